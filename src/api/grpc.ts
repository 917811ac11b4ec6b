// gRPC adapter: decode the request, call the core, encode the answer or map the ServiceError once.
import { fromBinary, type DescMessage } from '@bufbuild/protobuf';
import {
  Metadata,
  Server,
  ServerCredentials,
  type sendUnaryData,
  type ServerUnaryCall,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import type { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import { asServiceError, type ServiceError } from '../errors.js';
import { ERROR_CODES, REASON_HEADER } from './error-map.js';
import type { MatchmakerCore } from '../core/matchmaker-core.js';
import { grpcServiceDefinition, MatchmakerService, reflectionPackageDefinition } from './grpc-definitions.js';

function toGrpcError(err: ServiceError) {
  const metadata = new Metadata();
  if (err.reason) metadata.set(REASON_HEADER, err.reason);
  return { code: ERROR_CODES[err.code].grpc, details: err.message, metadata };
}

export function createGrpcServer(core: MatchmakerCore, health: HealthImplementation, log: Logger): Server {
  const server = new Server();
  const handlers: UntypedServiceImplementation = {};
  for (const method of MatchmakerService.methods) {
    const input: DescMessage = method.input;
    const call = (core[method.localName as keyof MatchmakerCore] as (req: unknown, encoded: Uint8Array) => Promise<unknown>).bind(core);
    handlers[method.name] = (unary: ServerUnaryCall<Buffer, unknown>, callback: sendUnaryData<unknown>) => {
      let request: unknown;
      try {
        request = fromBinary(input, unary.request);
      } catch (err) {
        const message = `request does not decode as ${input.typeName}: ${(err as Error).message}`;
        callback(toGrpcError(core.malformed(method.localName as keyof typeof MatchmakerService.method, message)));
        return;
      }
      call(request, unary.request).then(
        (response) => callback(null, response),
        (err: unknown) => {
          const serviceError = asServiceError(err);
          if (serviceError.code === 'INTERNAL') log.error({ err, method: method.name }, 'internal error');
          callback(toGrpcError(serviceError));
        },
      );
    };
  }
  server.addService(grpcServiceDefinition(MatchmakerService, { rawRequests: true }), handlers);
  new ReflectionService(reflectionPackageDefinition() as never).addToServer(server);
  health.addToServer(server);
  return server;
}

export { ServerCredentials };
