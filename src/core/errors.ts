// The one error type of the service. It carries the spec's gRPC code; each transport maps it once
// (src/api/grpc.ts, src/api/http.ts) through the table below.
import { status as GrpcStatus } from '@grpc/grpc-js';

export const ERROR_CODES = {
  INVALID_ARGUMENT: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  NOT_FOUND: { grpc: GrpcStatus.NOT_FOUND, http: 404 },
  FAILED_PRECONDITION: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 409 },
  UNAVAILABLE: { grpc: GrpcStatus.UNAVAILABLE, http: 503 },
  INTERNAL: { grpc: GrpcStatus.INTERNAL, http: 500 },
  UNIMPLEMENTED: { grpc: GrpcStatus.UNIMPLEMENTED, http: 405 },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** Machine-readable reasons, sent as `x-svc-reason` (gRPC trailing metadata or HTTP header). */
export type ErrorReason = 'QUEUE_RETIRING';

export const REASON_HEADER = 'x-svc-reason';

export class ServiceError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly reason?: ErrorReason,
  ) {
    super(message);
    this.name = 'ServiceError';
  }
}

export const invalidArgument = (message: string) => new ServiceError('INVALID_ARGUMENT', message);
export const notFound = (message: string) => new ServiceError('NOT_FOUND', message);
export const failedPrecondition = (message: string, reason?: ErrorReason) => new ServiceError('FAILED_PRECONDITION', message, reason);
export const unavailable = (message: string) => new ServiceError('UNAVAILABLE', message);

/** Any thrown value as a ServiceError; anything unexpected becomes INTERNAL (and is logged by the caller). */
export function asServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  return new ServiceError('INTERNAL', 'internal error');
}
