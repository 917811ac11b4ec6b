// Two request errors grpc-js answers by itself, before any handler runs, with INTERNAL: a compressed
// message that does not decompress with its grpc-encoding, and a grpc-timeout header that does not parse.
// Both are the caller's mistake, so we answer INVALID_ARGUMENT (docs/api.md lists what grpc-js decides).
// grpc-js sends them from its base call object (server-interceptors.js, BaseServerInterceptingCall:
// handleTimeoutHeader and decompressAndMaybePush call this.sendStatus), below every interceptor's
// responder; an interceptor can still reach that object and rewrite those two statuses on their way out.
// test/api/grpc-library-errors.test.ts fails if a grpc-js upgrade changes this.
import { ServerInterceptingCall, type ServerInterceptor, type StatusObject, status as GrpcStatus } from '@grpc/grpc-js';
import { quote } from '../errors.js';

type PartialStatus = Partial<StatusObject> & Pick<StatusObject, 'code' | 'details'>;

const TIMEOUT = /^Invalid grpc-timeout value "(.*)"$/s;

/** The status we send instead of one grpc-js decided, or the same one. */
function remap(status: PartialStatus): PartialStatus {
  if (status.code !== GrpcStatus.INTERNAL) return status;
  if (status.details === 'Failed to decompress message') {
    return {
      ...status,
      code: GrpcStatus.INVALID_ARGUMENT,
      details: 'request message does not decompress with its grpc-encoding (gzip or deflate)',
    };
  }
  const timeout = TIMEOUT.exec(status.details);
  if (timeout) {
    return {
      ...status,
      code: GrpcStatus.INVALID_ARGUMENT,
      details: `grpc-timeout ${quote(timeout[1]!)} is not a timeout: up to 8 digits and a unit (H, M, S, m, u, n)`,
    };
  }
  return status;
}

export const libraryErrorInterceptor: ServerInterceptor = (_method, call) => {
  let base = call as unknown as { nextCall?: unknown; sendStatus(status: PartialStatus): void };
  while (base.nextCall) base = base.nextCall as typeof base;
  const send = base.sendStatus.bind(base);
  base.sendStatus = (status) => send(remap(status));
  return new ServerInterceptingCall(call);
};
