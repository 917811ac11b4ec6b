// HTTP/JSON adapter: the spec's six routes (http-operations.ts), health probes, the operator routes
// (http-admin.ts), /metrics (http-metrics.ts) and the dashboard (dashboard/dashboard.ts). Every failure is a ServiceError, mapped once.
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Logger } from 'pino';
import type { Access } from '../core/access.js';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import type { Operator } from '../core/operator.js';
import type { Scope } from '../config/access-files.js';
import { asServiceError, quotePath, ServiceError } from '../errors.js';
import { admin } from './http-admin.js';
import type { HttpGuard } from './http-guard.js';
import { decodePathSegment, sendError, sendJson } from './http-json.js';
import { metrics } from './http-metrics.js';
import { type OperationRoute, operationRoutes } from './http-operations.js';
import type { Dashboard } from './dashboard/dashboard.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';
import type { TlsCredentials } from './tls.js';
import { MatchmakerService } from '../gen/matchmaker/core/v1/service_pb.js';

export interface HttpApiOptions {
  core: MatchmakerCore;
  /** Backs the admin routes and /metrics. */
  operator: Operator;
  maxBodyBytes: number;
  log: Logger;
  /** Served on /metrics; counts every operation's answer. */
  metrics: ServiceMetrics;
  /** GET /dashboard, its assets, and the activity it polls. */
  dashboard: Dashboard;
  limits: HttpLimits;
  /** Bearer tokens and scopes (docs/security.md). */
  access: Access;
  /** Origin, Host and body type checks. */
  guard: HttpGuard;
  /** Set: HTTPS, following the certificate files. */
  tls?: TlsCredentials;
}

/** What one connection may hold (src/config/service-config.ts: http_*). */
export interface HttpLimits {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

/** How often Node checks the request and header timeouts: every second, sooner for shorter timeouts. */
function checkingIntervalMs({ requestTimeoutMs, headersTimeoutMs }: HttpLimits): number {
  const shortest = Math.min(...[requestTimeoutMs, headersTimeoutMs].filter((t) => t > 0), 2000);
  return Math.max(50, Math.floor(shortest / 2));
}

const CLIENT_ERROR_RESPONSES: Record<string, string> = {
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
};

export function createHttpServer(options: HttpApiOptions): Server {
  const { log } = options;
  const routes = operationRoutes(options.core);
  const { limits, tls } = options;
  const serverOptions: ServerOptions = {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: limits.headersTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: checkingIntervalMs(limits),
  };
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res, routes, options).catch((err: unknown) => {
      const serviceError = asServiceError(err);
      if (serviceError.code === 'INTERNAL') log.error({ err, url: req.url }, 'internal error');
      // A body left unread (too large, or refused early) would be taken for the next request: close.
      if (!req.complete) res.setHeader('connection', 'close');
      sendError(res, serviceError);
    });
  };
  let server: Server;
  if (tls) {
    // The header timeout starts once the handshake is done: a client that stalls the handshake is bounded by
    // the same limit (Node's own default is 120 s).
    const https = createHttpsServer(
      { ...serverOptions, ...tls.httpsOptions(), ...(limits.headersTimeoutMs > 0 ? { handshakeTimeout: limits.headersTimeoutMs } : {}) },
      onRequest,
    );
    tls.onChange((context) => https.setSecureContext(context));
    server = https;
  } else server = createServer(serverOptions, onRequest);
  // Beyond the cap, net.Server closes a new connection as soon as it is accepted.
  server.maxConnections = limits.maxConnections;
  // A request that timed out (slow headers or body), or that does not parse: answer if nothing was sent
  // yet, then close the connection whatever the peer does.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && !inFlight?.headersSent) {
      const status = CLIENT_ERROR_RESPONSES[err.code ?? ''] ?? '400 Bad Request';
      socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`, () => socket.destroy());
    }
    setTimeout(() => socket.destroy(), 1000).unref();
  });
  return server;
}

async function handle(req: IncomingMessage, res: ServerResponse, routes: OperationRoute[], options: HttpApiOptions): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = url.pathname;
  // HEAD is GET without the body (Node's response leaves the body out): probes and curl -I use it.
  const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
  // A browser must not sniff a JSON answer into something it runs.
  res.setHeader('x-content-type-options', 'nosniff');
  if (method === 'GET' && path === '/livez') return sendJson(res, 200, { status: 'ok' });
  if (method === 'GET' && path === '/readyz') {
    const queueId = url.searchParams.get('queue_id');
    if (queueId !== null) {
      const { ready, status } = options.operator.queueReadiness(queueId);
      return sendJson(res, ready ? 200 : 503, { status });
    }
    const ready = options.core.state === 'serving';
    return sendJson(res, ready ? 200 : 503, { status: ready ? 'ok' : options.core.state });
  }
  options.guard.checkSource(req.headers);
  options.guard.checkBody(method, req.headers);
  const authorize = (scope: Scope) => options.access.authorize(req.headers.authorization, scope, req.socket.remoteAddress ?? '');
  if (method === 'GET' && path === '/metrics') {
    await authorize('metrics');
    return metrics(res, options.metrics);
  }
  // The page and its scripts hold no data: the page asks for a token and sends it with every request.
  if (method === 'GET' && options.dashboard.serve(path, res)) return;
  if (path.startsWith('/admin/')) {
    const principal = await authorize('admin');
    if (method === 'GET' && path === '/admin/v1/activity') return options.dashboard.sendActivity(res);
    return admin(method, path, url, res, options.operator, (action, details) =>
      options.access.audit(principal, action, { ...details, transport: 'http' }),
    );
  }
  if (!path.startsWith('/v1/')) throw new ServiceError('NOT_FOUND', `no route for ${method} ${quotePath(path)}`);
  const principal = await authorize('tickets');

  const matched = routes.filter((r) => r.pattern.test(path));
  const route = matched.find((r) => r.method === method);
  if (!route) {
    if (matched.length > 0) {
      const allowed = matched.map((r) => r.method).join(', ');
      res.setHeader('allow', allowed);
      throw new ServiceError('UNIMPLEMENTED', `${method} is not supported on ${quotePath(path)}; use ${allowed}`);
    }
    throw new ServiceError('NOT_FOUND', `no route for ${method} ${quotePath(path)}`);
  }
  const started = performance.now();
  const operation = MatchmakerService.method[route.operation].name;
  try {
    const answer = await route.run(req, path, options.maxBodyBytes);
    if (route.operation === 'clearQueuePool') {
      options.access.audit(principal, 'clear', { queueId: decodePathSegment(route.pattern.exec(path)![1]!, 0), transport: 'http' });
    }
    sendJson(res, 200, answer);
    options.metrics.observeRequest(operation, 'http', 'OK', (performance.now() - started) / 1000);
  } catch (err) {
    options.metrics.observeRequest(operation, 'http', asServiceError(err).code, (performance.now() - started) / 1000);
    throw err;
  }
}
