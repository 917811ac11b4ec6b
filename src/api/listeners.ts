// The service's two ports: the gRPC server and the HTTP server (with the WebSocket outcome stream on it),
// built from the settings with their limits, checks and TLS (src/api/tls.ts), bound, and closed within a
// grace period.
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import type { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../config/service-config.js';
import type { Access } from '../core/access.js';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import type { Operator } from '../core/operator.js';
import type { OutcomeFeed } from '../core/outcome-feed.js';
import type { Dashboard } from './dashboard/dashboard.js';
import { createGrpcServer } from './grpc.js';
import { createHttpServer } from './http.js';
import { HttpGuard, settingList } from './http-guard.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';
import { attachOutcomeStream } from './outcome-stream.js';
import { TlsCredentials, type TlsMode } from './tls.js';

export interface ListenerParts {
  core: MatchmakerCore;
  operator: Operator;
  health: HealthImplementation;
  metrics: ServiceMetrics;
  dashboard: Dashboard;
  feed: OutcomeFeed;
  access: Access;
  log: Logger;
}

export interface Listeners {
  grpcPort: number;
  httpPort: number;
  tls: TlsMode;
  /** Closes both ports and the stream's sockets; connections still busy after `graceMs` are cut. */
  close(graceMs: number): Promise<void>;
}

/** Builds both servers and binds them to their ports. */
export async function openListeners(config: ServiceConfig, parts: ListenerParts): Promise<Listeners> {
  const { core, operator, health, metrics, dashboard, feed, access, log } = parts;
  // Read and checked before anything binds: a bad file stops the start.
  const tls = TlsCredentials.open(config, log);
  const guard = new HttpGuard({
    allowedOrigins: settingList(config.http_allowed_origins),
    allowedHosts: settingList(config.http_allowed_hosts),
    scheme: tls ? 'https' : 'http',
  });
  const grpcServer = createGrpcServer(core, operator, health, log, metrics, access, {
    maxConcurrentStreams: config.grpc_max_concurrent_streams,
    maxConnectionIdleMs: config.grpc_max_connection_idle_ms,
  });
  const httpServer = createHttpServer({
    core,
    operator,
    maxBodyBytes: config.http_max_body_bytes,
    log,
    metrics,
    dashboard,
    access,
    guard,
    ...(tls ? { tls } : {}),
    limits: {
      requestTimeoutMs: config.http_request_timeout_ms,
      headersTimeoutMs: config.http_headers_timeout_ms,
      keepAliveTimeoutMs: config.http_keep_alive_timeout_ms,
      maxConnections: config.http_max_connections,
    },
  });
  const stream = attachOutcomeStream(httpServer, {
    feed,
    heartbeatMs: config.websocket_heartbeat_ms,
    log,
    delivery: metrics.delivery,
    access,
    guard,
  });

  const grpcPort = await new Promise<number>((resolve, reject) =>
    grpcServer.bindAsync(
      `${config.bind_address}:${config.grpc_port}`,
      tls ? tls.grpcCredentials() : ServerCredentials.createInsecure(),
      (err, port) => (err ? reject(err) : resolve(port)),
    ),
  );
  const httpPort = await new Promise<number>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(config.http_port, config.bind_address, () => resolve((httpServer.address() as AddressInfo).port));
  });
  return {
    grpcPort,
    httpPort,
    tls: tls?.mode ?? 'off',
    // Stream sockets are connections of the HTTP server too: they close with it.
    close: async (graceMs) => {
      tls?.close();
      await Promise.all([closeGrpc(grpcServer, graceMs), stream.close(), closeHttp(httpServer, graceMs)]);
    },
  };
}

/** grpc-js tryShutdown waits for every HTTP/2 session to close, which a client may never do: bounded. */
function closeGrpc(server: GrpcServer, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** close() waits for every connection to end, and a request whose body never finishes holds one: bounded. */
function closeHttp(server: HttpServer, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(timer);
      resolve();
    });
    server.closeIdleConnections();
  });
}
