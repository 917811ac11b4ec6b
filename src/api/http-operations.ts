// The spec's six routes in canonical protobuf JSON. Each route names the core method it calls; its request
// and response types are those of the method's descriptor, checked by tsc.
import type { IncomingMessage } from 'node:http';
import { create, fromJson, toJson, type DescMessage, type DescMethodUnary, type JsonValue, type MessageShape } from '@bufbuild/protobuf';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import { clip, invalidArgument, quote, ServiceError } from '../errors.js';
import { BackfillRequestSchema, TicketSchema } from '../gen/matchmaker/core/v1/resources_pb.js';
import { MatchmakerService } from '../gen/matchmaker/core/v1/service_pb.js';
import { decodePathSegment, readJsonBody } from './http-json.js';
import { checkBase64Fields } from './json-base64.js';
import { BACKFILL_ENGINE_INPUT, serializeJsonEngineInput, TICKET_ENGINE_INPUT, type EngineInputAt } from './json-engine-input.js';

type Operation = keyof typeof MatchmakerService.method;

export interface OperationRoute {
  method: 'POST' | 'DELETE';
  pattern: RegExp;
  operation: Operation;
  /** Reads the body, binds the path, calls the core; resolves with the answer's JSON. */
  run(req: IncomingMessage, path: string, maxBodyBytes: number): Promise<JsonValue>;
}

/** A field from the path; the body may repeat it, but not contradict it. */
function fromPath(bodyValue: string, pathValue: string, field: string): string {
  if (bodyValue !== '' && bodyValue !== pathValue) {
    throw invalidArgument(`${field} in the body (${quote(bodyValue)}) differs from the path (${quote(pathValue)})`);
  }
  return pathValue;
}

const QUEUE = '([^/:]*)';

export function operationRoutes(core: MatchmakerCore): OperationRoute[] {
  const { method } = MatchmakerService;
  const route = <I extends DescMessage, O extends DescMessage>(spec: {
    method: OperationRoute['method'];
    pattern: RegExp;
    rpc: DescMethodUnary<I, O>;
    /** Puts the path parameters into the request; a body value that disagrees with the path is refused. */
    bind: (request: MessageShape<I>, params: string[]) => void;
    /** Where the body may hold an engine input as JSON (json-engine-input.ts). */
    engineInput?: EngineInputAt;
    call: (request: MessageShape<I>) => Promise<MessageShape<O>>;
  }): OperationRoute => {
    const operation = spec.rpc.localName as Operation;
    return {
      method: spec.method,
      pattern: spec.pattern,
      operation,
      async run(req, path, maxBodyBytes) {
        let request: MessageShape<I>;
        try {
          const params = spec.pattern
            .exec(path)!
            .slice(1)
            .map((p, i) => decodePathSegment(p, i));
          let body = await readJsonBody(req, maxBodyBytes);
          if (spec.engineInput) body = serializeJsonEngineInput(body, spec.engineInput);
          request = decodeJson(spec.rpc.input, body);
          spec.bind(request, params);
        } catch (err) {
          throw core.malformed(operation, err instanceof ServiceError ? err.message : clip((err as Error).message));
        }
        return toJson(spec.rpc.output, await spec.call(request), { alwaysEmitImplicit: true });
      },
    };
  };

  return [
    route({
      method: 'POST',
      pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets$`),
      rpc: method.createTicket,
      engineInput: TICKET_ENGINE_INPUT,
      bind(req, [queueId]) {
        req.ticket ??= create(TicketSchema);
        req.ticket.queueId = fromPath(req.ticket.queueId, queueId!, 'ticket.queue_id');
      },
      call: (req) => core.createTicket(req),
    }),
    route({
      method: 'DELETE',
      pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets/([^/:]+)$`),
      rpc: method.cancelTicket,
      bind(req, [queueId, ticketId]) {
        req.queueId = fromPath(req.queueId, queueId!, 'queue_id');
        req.ticketId = fromPath(req.ticketId, ticketId!, 'ticket_id');
      },
      call: (req) => core.cancelTicket(req),
    }),
    route({
      method: 'POST',
      pattern: new RegExp(`^/v1/queues/${QUEUE}/tickets:reactivate$`),
      rpc: method.reactivateTickets,
      bind: bindQueueId,
      call: (req) => core.reactivateTickets(req),
    }),
    route({
      method: 'POST',
      pattern: new RegExp(`^/v1/queues/${QUEUE}/backfills$`),
      rpc: method.createBackfillRequest,
      engineInput: BACKFILL_ENGINE_INPUT,
      bind(req, [queueId]) {
        req.backfillRequest ??= create(BackfillRequestSchema);
        req.backfillRequest.queueId = fromPath(req.backfillRequest.queueId, queueId!, 'backfill_request.queue_id');
      },
      call: (req) => core.createBackfillRequest(req),
    }),
    route({
      method: 'POST',
      pattern: new RegExp(`^/v1/queues/${QUEUE}/backfills:cancel$`),
      rpc: method.cancelBackfillRequests,
      bind: bindQueueId,
      call: (req) => core.cancelBackfillRequests(req),
    }),
    route({
      method: 'POST',
      pattern: new RegExp(`^/v1/queues/${QUEUE}:clear$`),
      rpc: method.clearQueuePool,
      bind: bindQueueId,
      call: (req) => core.clearQueuePool(req),
    }),
  ];
}

function bindQueueId(req: { queueId: string }, [queueId]: string[]): void {
  req.queueId = fromPath(req.queueId, queueId!, 'queue_id');
}

/** fromJson after the strict base64 check, with the error prefixed by the path of the field that failed (ticket.created_at: ...). */
function decodeJson<T extends DescMessage>(schema: T, body: JsonValue): MessageShape<T> {
  checkBase64Fields(schema, body);
  try {
    return fromJson(schema, body);
  } catch (err) {
    const at = failingField(schema, body, '');
    // protobuf-es quotes the offending JSON whole.
    const message = clip((err as Error).message);
    throw invalidArgument(at ? `${at}: ${message}` : message);
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
