// How each transport says a ServiceError: the one table of gRPC status and HTTP status per code.
import { status as GrpcStatus } from '@grpc/grpc-js';
import { clip, type ErrorCode, type ErrorReason, type ServiceError } from '../errors.js';

export const ERROR_CODES: Record<ErrorCode, { grpc: GrpcStatus; http: number }> = {
  INVALID_ARGUMENT: { grpc: GrpcStatus.INVALID_ARGUMENT, http: 400 },
  NOT_FOUND: { grpc: GrpcStatus.NOT_FOUND, http: 404 },
  FAILED_PRECONDITION: { grpc: GrpcStatus.FAILED_PRECONDITION, http: 409 },
  UNAVAILABLE: { grpc: GrpcStatus.UNAVAILABLE, http: 503 },
  INTERNAL: { grpc: GrpcStatus.INTERNAL, http: 500 },
  UNIMPLEMENTED: { grpc: GrpcStatus.UNIMPLEMENTED, http: 405 },
  UNAUTHENTICATED: { grpc: GrpcStatus.UNAUTHENTICATED, http: 401 },
  PERMISSION_DENIED: { grpc: GrpcStatus.PERMISSION_DENIED, http: 403 },
  RESOURCE_EXHAUSTED: { grpc: GrpcStatus.RESOURCE_EXHAUSTED, http: 429 },
};

/** Reasons whose HTTP status is more precise than their code's. */
export const HTTP_STATUS_BY_REASON: Partial<Record<ErrorReason, number>> = {
  UNSUPPORTED_MEDIA_TYPE: 415,
};

/** The header (gRPC trailing metadata or HTTP response header) that says how many seconds to wait before retrying. */
export const RETRY_AFTER_HEADER = 'retry-after';

/** The header (gRPC trailing metadata or HTTP response header) that carries a ServiceError's reason. */
export const REASON_HEADER = 'x-svc-reason';

/** The longest message a transport sends: a last bound for messages that embed text we did not quote. */
const MAX_MESSAGE_CHARS = 1024;

/** A ServiceError's message as sent to the caller. */
export function messageOf(err: ServiceError): string {
  return clip(err.message, MAX_MESSAGE_CHARS);
}

/** The headers (HTTP response headers, or gRPC trailing metadata) that go with a ServiceError. */
export function errorHeaders(err: ServiceError): Record<string, string> {
  const headers: Record<string, string> = {};
  if (err.reason) headers[REASON_HEADER] = err.reason;
  if (err.retryAfterSecs !== undefined) headers[RETRY_AFTER_HEADER] = String(Math.max(1, Math.ceil(err.retryAfterSecs)));
  return headers;
}

/** The HTTP response headers of a ServiceError: `errorHeaders`, and for a 401 the scheme to use (RFC 6750). */
export function httpErrorHeaders(err: ServiceError): Record<string, string> {
  return { ...errorHeaders(err), ...(err.code === 'UNAUTHENTICATED' ? { 'www-authenticate': 'Bearer' } : {}) };
}

/** A ServiceError's HTTP status. */
export function httpStatusOf(err: ServiceError): number {
  return (err.reason && HTTP_STATUS_BY_REASON[err.reason]) || ERROR_CODES[err.code].http;
}
