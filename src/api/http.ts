// HTTP/JSON adapter: the spec's six routes in canonical protobuf JSON, health probes, and a read-only view
// of the outbox. Decode the body, take path fields, call the core, encode the answer or map the
// ServiceError once.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { create, fromJson, toJson, type DescMessage, type JsonValue } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import type { ProcessMetrics } from './process-metrics.js';
import { TicketSchema, BackfillRequestSchema } from '../gen/matchmaker/core/v1/resources_pb.js';
import {
  CancelBackfillRequestsRequestSchema,
  CancelTicketRequestSchema,
  ClearQueuePoolRequestSchema,
  CreateBackfillRequestRequestSchema,
  CreateTicketRequestSchema,
  MatchmakerService,
  ReactivateTicketsRequestSchema,
} from '../gen/matchmaker/core/v1/service_pb.js';
import { OutcomeSchema } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { asServiceError, invalidArgument, ServiceError } from '../errors.js';
import { ERROR_CODES, REASON_HEADER } from './error-map.js';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import type { OutcomeDelivery } from '../outcomes/delivery.js';
import type { QueueRegistry } from '../queue/queue-registry.js';
import type { Store } from '../store/store.js';

type Params = string[];
// Path-bound request fields are plain strings on these messages.
type AnyRequest = Record<string, unknown> & { ticket?: { queueId: string }; backfillRequest?: { queueId: string } };

interface Route {
  method: 'POST' | 'DELETE';
  pattern: RegExp;
  /** The core method (gRPC method name in lowerCamelCase). */
  operation: keyof typeof MatchmakerService.method;
  schema: DescMessage;
  /** Puts the path parameters into the request; a body value that disagrees with the path is refused. */
  bind(request: AnyRequest, params: Params): void;
}

/** A field from the path; the body may repeat it, but not contradict it. */
function fromPath(bodyValue: string, pathValue: string, field: string): string {
  if (bodyValue !== '' && bodyValue !== pathValue) {
    throw invalidArgument(`${field} in the body ("${bodyValue}") differs from the path ("${pathValue}")`);
  }
  return pathValue;
}

const QUEUE = '([^/:]*)';
const routes: Route[] = [
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets$`),
    operation: 'createTicket',
    schema: CreateTicketRequestSchema,
    bind(req, [queueId]) {
      req.ticket ??= create(TicketSchema);
      req.ticket.queueId = fromPath(req.ticket.queueId, queueId!, 'ticket.queue_id');
    },
  },
  {
    method: 'DELETE',
    pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets/([^/:]+)$`),
    operation: 'cancelTicket',
    schema: CancelTicketRequestSchema,
    bind(req, [queueId, ticketId]) {
      req.queueId = fromPath(req.queueId as string, queueId!, 'queue_id');
      req.ticketId = fromPath(req.ticketId as string, ticketId!, 'ticket_id');
    },
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets:reactivate$`),
    operation: 'reactivateTickets',
    schema: ReactivateTicketsRequestSchema,
    bind: bindQueueId,
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/queues/${QUEUE}/backfills$`),
    operation: 'createBackfillRequest',
    schema: CreateBackfillRequestRequestSchema,
    bind(req, [queueId]) {
      req.backfillRequest ??= create(BackfillRequestSchema);
      req.backfillRequest.queueId = fromPath(req.backfillRequest.queueId, queueId!, 'backfill_request.queue_id');
    },
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/queues/${QUEUE}/backfills:cancel$`),
    operation: 'cancelBackfillRequests',
    schema: CancelBackfillRequestsRequestSchema,
    bind: bindQueueId,
  },
  {
    method: 'POST',
    pattern: new RegExp(`^/v1/queues/${QUEUE}:clear$`),
    operation: 'clearQueuePool',
    schema: ClearQueuePoolRequestSchema,
    bind: bindQueueId,
  },
];

function bindQueueId(req: AnyRequest, [queueId]: Params): void {
  req.queueId = fromPath(req.queueId as string, queueId!, 'queue_id');
}

export interface HttpApiOptions {
  core: MatchmakerCore;
  /** The store, the queues and outcome delivery, once open: back the admin routes and /metrics. */
  state: () => { store: Store; registry: QueueRegistry; delivery: OutcomeDelivery } | undefined;
  maxBodyBytes: number;
  log: Logger;
  /** Event-loop delay and GC pauses, appended to /metrics. */
  processMetrics: ProcessMetrics;
}

export function createHttpServer(options: HttpApiOptions): Server {
  const { log } = options;
  return createServer((req, res) => {
    handle(req, res, options).catch((err: unknown) => {
      const serviceError = asServiceError(err);
      if (serviceError.code === 'INTERNAL') log.error({ err, url: req.url }, 'internal error');
      // A body left unread (too large, or refused early) would be taken for the next request: close.
      if (!req.complete) res.setHeader('connection', 'close');
      sendError(res, serviceError);
    });
  }).on('clientError', (_err, socket) => {
    socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
  });
}

async function handle(req: IncomingMessage, res: ServerResponse, options: HttpApiOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = url.pathname;
  if (req.method === 'GET' && path === '/livez') return sendJson(res, 200, { status: 'ok' });
  if (req.method === 'GET' && path === '/readyz') {
    const ready = options.core.state === 'serving';
    return sendJson(res, ready ? 200 : 503, { status: ready ? 'ok' : options.core.state });
  }
  if (req.method === 'GET' && path === '/metrics') return metrics(res, options);
  if (path.startsWith('/admin/')) return admin(req.method ?? 'GET', path, url, res, options);

  const matched = routes.filter((r) => r.pattern.test(path));
  const route = matched.find((r) => r.method === req.method);
  if (!route) {
    if (matched.length > 0) {
      const allowed = matched.map((r) => r.method).join(', ');
      res.setHeader('allow', allowed);
      throw new ServiceError('UNIMPLEMENTED', `${req.method} is not supported on ${path}; use ${allowed}`);
    }
    throw new ServiceError('NOT_FOUND', `no route for ${req.method} ${path}`);
  }
  let request: AnyRequest;
  try {
    const params = route.pattern
      .exec(path)!
      .slice(1)
      .map((p, i) => decodePathSegment(p, i));
    const body = await readJsonBody(req, options.maxBodyBytes);
    request = decodeJson(route.schema, body);
    route.bind(request, params);
  } catch (err) {
    throw options.core.malformed(route.operation, err instanceof ServiceError ? err.message : (err as Error).message);
  }
  const method = MatchmakerService.method[route.operation];
  const call = options.core[route.operation].bind(options.core) as (r: unknown) => Promise<Parameters<typeof toJson>[1]>;
  const response = await call(request);
  sendJson(res, 200, toJson(method.output, response as never, { alwaysEmitImplicit: true }));
}

/** fromJson, with the error prefixed by the path of the field that failed (ticket.created_at: ...). */
function decodeJson(schema: DescMessage, body: JsonValue): AnyRequest {
  try {
    return fromJson(schema, body) as unknown as AnyRequest;
  } catch (err) {
    const at = failingField(schema, body, '');
    throw invalidArgument(at ? `${at}: ${(err as Error).message}` : (err as Error).message);
  }
}

/** The deepest message-typed field whose JSON does not decode on its own, as a snake_case path. */
function failingField(schema: DescMessage, json: JsonValue, prefix: string): string | undefined {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = schema.fields.find((f) => f.jsonName === key || f.name === key);
    if (field?.fieldKind !== 'message' || value === null) continue;
    const path = prefix ? `${prefix}.${field.name}` : field.name;
    try {
      fromJson(field.message, value);
    } catch {
      return failingField(field.message, value, path) ?? path;
    }
  }
  return undefined;
}

function decodePathSegment(segment: string, index: number): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalidArgument(`path segment ${index + 1} is not valid percent-encoding`);
  }
}

async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<JsonValue> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw invalidArgument(`request body exceeds ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    throw invalidArgument(`request body is not valid JSON: ${(err as Error).message}`);
  }
}

/**
 * Operator routes (docs/api.md): GET /admin/v1/queues, GET /admin/v1/queues/{queue_id}/tickets/{ticket_id},
 * GET /admin/v1/outcomes?queue_id=&after_sequence=&limit=, GET /admin/v1/deliveries,
 * POST /admin/v1/queues/{queue_id}/deliveries:retry (releases a parked delivery).
 */
async function admin(method: string, path: string, url: URL, res: ServerResponse, options: HttpApiOptions): Promise<void> {
  const state = options.state();
  if (!state || options.core.state !== 'serving') throw new ServiceError('UNAVAILABLE', 'service is not serving; retry with backoff');
  const retry = /^\/admin\/v1\/queues\/([^/:]+)\/deliveries:retry$/.exec(path);
  if (method === 'POST' && retry) {
    const queueId = decodePathSegment(retry[1]!, 0);
    const released = await state.delivery.release(queueId);
    if (!released) throw new ServiceError('FAILED_PRECONDITION', `queue "${queueId}" has no parked delivery`);
    return sendJson(res, 200, { released: true });
  }
  if (method !== 'GET') throw new ServiceError('NOT_FOUND', `no route for ${method} ${path}`);
  if (path === '/admin/v1/outcomes') return listOutcomes(url, res, state.store);
  if (path === '/admin/v1/deliveries') return sendJson(res, 200, { deliveries: state.delivery.status() });
  if (path === '/admin/v1/queues') {
    const queues = state.registry.all().map((q) => ({
      queueId: q.queueId,
      state: q.state,
      activeTickets: q.activeTicketCount,
      resolvedTickets: q.resolvedTicketCount,
      backfillRequests: q.backfillRequestCount,
    }));
    return sendJson(res, 200, { queues });
  }
  const ticketPath = /^\/admin\/v1\/queues\/([^/:]+)\/tickets\/([^/:]+)$/.exec(path);
  if (ticketPath) {
    const [queueId, ticketId] = ticketPath.slice(1).map((p, i) => decodePathSegment(p, i)) as [string, string];
    const queue = state.registry.get(queueId);
    if (!queue) throw new ServiceError('NOT_FOUND', `queue "${queueId}" does not exist`);
    const found = queue.lookupTicket(ticketId.toLowerCase());
    if (!found) throw new ServiceError('NOT_FOUND', `ticket ${ticketId} is not in queue "${queueId}"`);
    return sendJson(res, 200, { state: found.state, matchId: found.matchId ?? '', ticket: toJson(TicketSchema, found.ticket) });
  }
  throw new ServiceError('NOT_FOUND', `no route for GET ${path}`);
}

/** Prometheus text format. */
function metrics(res: ServerResponse, options: HttpApiOptions): void {
  const state = options.state();
  const lines: string[] = [];
  const gauge = (name: string, help: string, samples: [labels: string, value: number | string][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of samples) lines.push(`${name}${labels} ${value}`);
  };
  gauge('matchmaker_up', 'Whether the service is serving (1) or starting or stopping (0).', [
    ['', options.core.state === 'serving' ? 1 : 0],
  ]);
  if (state) {
    const queues = state.registry.all();
    const label = (queueId: string) => `{queue_id="${queueId}"}`;
    gauge(
      'matchmaker_pool_tickets',
      'Active tickets in the queue pool.',
      queues.map((q) => [label(q.queueId), q.activeTicketCount]),
    );
    gauge(
      'matchmaker_resolved_tickets',
      'Resolved tickets kept for reactivation.',
      queues.map((q) => [label(q.queueId), q.resolvedTicketCount]),
    );
    gauge(
      'matchmaker_backfill_requests',
      'Active backfill requests.',
      queues.map((q) => [label(q.queueId), q.backfillRequestCount]),
    );
    const deliveries = state.delivery.status();
    gauge(
      'matchmaker_outcome_deliveries_parked',
      'Deliveries parked after exhausting retries (alert on > 0).',
      deliveries.map((d) => [label(d.queueId), d.parked ? 1 : 0]),
    );
    gauge('matchmaker_outcome_last_sequence', 'Highest producer_sequence recorded.', [['', String(state.store.lastSequence())]]);
    gauge(
      'matchmaker_outcome_delivered_sequence',
      'Highest producer_sequence delivered per queue (push sinks).',
      deliveries.filter((d) => d.sink !== 'websocket').map((d) => [label(d.queueId), d.deliveredThrough]),
    );
  }
  lines.push(...options.processMetrics.lines());
  const body = `${lines.join('\n')}\n`;
  res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function listOutcomes(url: URL, res: ServerResponse, store: Store): void {
  const after = url.searchParams.get('after_sequence');
  const queueIdParam = url.searchParams.get('queue_id');
  const limit = url.searchParams.get('limit');
  if (after !== null && !/^\d+$/.test(after)) throw invalidArgument('after_sequence must be a non-negative integer');
  if (limit !== null && !/^\d+$/.test(limit)) throw invalidArgument('limit must be a non-negative integer');
  const outcomes = store.listOutcomes({
    afterSequence: after === null ? undefined : BigInt(after),
    queueFilter: queueIdParam === null ? undefined : (queueId) => queueId === queueIdParam,
    limit: limit === null ? 1000 : Math.min(10_000, Number(limit)),
  });
  sendJson(res, 200, { outcomes: outcomes.map((o) => toJson(OutcomeSchema, o)) });
}

function sendError(res: ServerResponse, err: ServiceError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (err.reason) res.setHeader(REASON_HEADER, err.reason);
  sendJson(res, ERROR_CODES[err.code].http, { code: err.code, message: err.message });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
