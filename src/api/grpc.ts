// gRPC adapter: decode the request, call the core, encode the answer or map the ServiceError once. Each
// method is wired by hand to the core method it calls, so the types of both ends are checked. Two services
// share the port: matchmaker.core.v1.MatchmakerService (the core) and matchmaker.admin.v1.MatchmakerAdminService
// (the Operator's explain and statistics).
import { fromBinary, type DescMessage, type DescMethodUnary, type MessageShape } from '@bufbuild/protobuf';
import { Metadata, Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import type { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import type { Access, Principal } from '../core/access.js';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import type { Operator } from '../core/operator.js';
import { asServiceError, clip, invalidArgument, type ServiceError } from '../errors.js';
import { ERROR_CODES, errorHeaders, messageOf } from './error-map.js';
import { libraryErrorInterceptor } from './grpc-library-errors.js';
import type { ServiceMetrics } from './metrics/service-metrics.js';
import { grpcServiceDefinition, MatchmakerAdminService, MatchmakerService, reflectionPackageDefinition } from './grpc-definitions.js';

type Operation = keyof typeof MatchmakerService.method;
type AdminOperation = keyof typeof MatchmakerAdminService.method;
/** Counts each answered call (metrics/service-metrics.ts). */
type RequestObserver = Pick<ServiceMetrics, 'observeRequest'>;
type UnaryHandler = (call: ServerUnaryCall<Buffer, unknown>, callback: sendUnaryData<unknown>) => void;

function toGrpcError(err: ServiceError) {
  const metadata = new Metadata();
  for (const [name, value] of Object.entries(errorHeaders(err))) metadata.set(name, value);
  return { code: ERROR_CODES[err.code].grpc, details: messageOf(err), metadata };
}

/** What one client connection may hold on the gRPC port (service settings grpc_max_*). */
export interface GrpcConnectionLimits {
  maxConcurrentStreams: number;
  /** 0: idle connections stay open. */
  maxConnectionIdleMs: number;
}

export function createGrpcServer(
  core: MatchmakerCore,
  operator: Operator,
  health: HealthImplementation,
  log: Logger,
  metrics: RequestObserver,
  access: Access,
  limits: GrpcConnectionLimits,
): Server {
  const { method } = MatchmakerService;
  /** One handler for one method: its request decoded from the received bytes, its answer typed by the method. */
  const unary =
    <I extends DescMessage, O extends DescMessage>(
      rpc: DescMethodUnary<I, O>,
      call: (request: MessageShape<I>, encoded: Uint8Array, principal: Principal | undefined) => Promise<MessageShape<O>>,
    ): UnaryHandler =>
    (unaryCall, callback) => {
      const started = performance.now();
      const fail = (err: unknown) => {
        const serviceError = asServiceError(err);
        if (serviceError.code === 'INTERNAL') log.error({ err, method: rpc.name }, 'internal error');
        metrics.observeRequest(rpc.name, 'grpc', serviceError.code, (performance.now() - started) / 1000);
        callback(toGrpcError(serviceError));
      };
      const run = (principal: Principal | undefined) => {
        let request: MessageShape<I>;
        try {
          request = fromBinary(rpc.input, unaryCall.request);
        } catch (err) {
          const message = `request does not decode as ${rpc.input.typeName}: ${clip((err as Error).message)}`;
          fail(rpc.parent === MatchmakerService ? core.malformed(rpc.localName as Operation, message) : invalidArgument(message));
          return;
        }
        call(request, unaryCall.request, principal).then((response) => {
          metrics.observeRequest(rpc.name, 'grpc', 'OK', (performance.now() - started) / 1000);
          callback(null, response);
        }, fail);
      };
      // Without tokens the call runs at once, as it did before access checks existed.
      if (!access.enabled) return run(undefined);
      const authorization = unaryCall.metadata.get('authorization')[0];
      const scope = rpc.parent === MatchmakerService ? 'tickets' : 'admin';
      access.authorize(typeof authorization === 'string' ? authorization : undefined, scope, unaryCall.getPeer()).then(run, fail);
    };

  const handlers: Record<Operation, UnaryHandler> = {
    createTicket: unary(method.createTicket, (req, encoded) => core.createTicket(req, encoded)),
    cancelTicket: unary(method.cancelTicket, (req) => core.cancelTicket(req)),
    reactivateTickets: unary(method.reactivateTickets, (req) => core.reactivateTickets(req)),
    createBackfillRequest: unary(method.createBackfillRequest, (req) => core.createBackfillRequest(req)),
    cancelBackfillRequests: unary(method.cancelBackfillRequests, (req) => core.cancelBackfillRequests(req)),
    clearQueuePool: unary(method.clearQueuePool, async (req, _encoded, principal) => {
      const answer = await core.clearQueuePool(req);
      access.audit(principal, 'clear', { queueId: req.queueId, transport: 'grpc' });
      return answer;
    }),
  };

  const { method: admin } = MatchmakerAdminService;
  const adminHandlers: Record<AdminOperation, UnaryHandler> = {
    explainTicket: unary(admin.explainTicket, (req) => operator.explainTicket(req)),
    getQueueStatistics: unary(admin.getQueueStatistics, (req) => operator.queueStatistics(req)),
  };

  const server = new Server({
    interceptors: [libraryErrorInterceptor],
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    // grpc-js has no "off" value: without the option a connection may idle forever.
    ...(limits.maxConnectionIdleMs > 0 ? { 'grpc.max_connection_idle_ms': limits.maxConnectionIdleMs } : {}),
  });
  // grpc-js looks handlers up by the method's proto name (CreateTicket).
  const byName = Object.fromEntries(MatchmakerService.methods.map((m) => [m.name, handlers[m.localName as Operation]]));
  server.addService(grpcServiceDefinition(MatchmakerService, { rawRequests: true }), byName);
  const adminByName = Object.fromEntries(MatchmakerAdminService.methods.map((m) => [m.name, adminHandlers[m.localName as AdminOperation]]));
  server.addService(grpcServiceDefinition(MatchmakerAdminService, { rawRequests: true }), adminByName);
  new ReflectionService(reflectionPackageDefinition() as never).addToServer(server);
  health.addToServer(server);
  return server;
}

export { ServerCredentials };
