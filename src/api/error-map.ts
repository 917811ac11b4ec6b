// How each transport says a ServiceError: the one table of gRPC status and HTTP status per code.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { clip, type ErrorCode, type ServiceError } from '../errors.js';

export const ERROR_CODES: Record<ErrorCode, { grpc: GrpcStatus; http: number }> = {
  INVALID_ARGUMENT: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  NOT_FOUND: { grpc: GrpcStatus.NOT_FOUND, http: 404 },
  FAILED_PRECONDITION: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 409 },
  UNAVAILABLE: { grpc: GrpcStatus.UNAVAILABLE, http: 503 },
  INTERNAL: { grpc: GrpcStatus.INTERNAL, http: 500 },
  UNIMPLEMENTED: { grpc: GrpcStatus.UNIMPLEMENTED, http: 405 },
};

/** The header (gRPC trailing metadata or HTTP response header) that carries a ServiceError's reason. */
export const REASON_HEADER = 'x-svc-reason';

/** The longest message a transport sends: a last bound for messages that embed text we did not quote. */
const MAX_MESSAGE_CHARS = 1024;

/** A ServiceError's message as sent to the caller. */
export function messageOf(err: ServiceError): string {
  return clip(err.message, MAX_MESSAGE_CHARS);
}
