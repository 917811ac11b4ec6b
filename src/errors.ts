// The one error type of the service, typed once with its cause. It sits below every layer, so the engine,
// the queue runtime and the store raise the spec's codes without importing the core; each transport maps a
// code once (src/api/error-map.ts).

/** The spec's error conditions, by gRPC code name. */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'FAILED_PRECONDITION'
  | 'UNAVAILABLE'
  | 'INTERNAL'
  | 'UNIMPLEMENTED'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'RESOURCE_EXHAUSTED';

/** Machine-readable reasons, sent as `x-svc-reason` (gRPC trailing metadata or HTTP header). */
export type ErrorReason = 'QUEUE_RETIRING' | 'UNSUPPORTED_MEDIA_TYPE';

export interface ServiceErrorOptions {
  reason?: ErrorReason;
  /** What went wrong underneath (logged; never sent to the caller). */
  cause?: unknown;
  /** RESOURCE_EXHAUSTED by a rate limit: when a retry may succeed (HTTP `Retry-After`, gRPC `retry-after`). */
  retryAfterSecs?: number;
}

export class ServiceError extends Error {
  readonly reason: ErrorReason | undefined;
  readonly retryAfterSecs: number | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ServiceErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ServiceError';
    this.reason = options.reason;
    this.retryAfterSecs = options.retryAfterSecs;
  }
}

export const invalidArgument = (message: string, cause?: unknown) => new ServiceError('INVALID_ARGUMENT', message, { cause });
export const notFound = (message: string, cause?: unknown) => new ServiceError('NOT_FOUND', message, { cause });
export const failedPrecondition = (message: string, reason?: ErrorReason) => new ServiceError('FAILED_PRECONDITION', message, { reason });
export const unavailable = (message: string, cause?: unknown) => new ServiceError('UNAVAILABLE', message, { cause });
export const unauthenticated = (message: string) => new ServiceError('UNAUTHENTICATED', message);
export const permissionDenied = (message: string) => new ServiceError('PERMISSION_DENIED', message);
export const resourceExhausted = (message: string, retryAfterSecs?: number) =>
  new ServiceError('RESOURCE_EXHAUSTED', message, { retryAfterSecs });

/** Any thrown value as a ServiceError; anything unexpected becomes INTERNAL with it as the cause (the caller logs it). */
export function asServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  return new ServiceError('INTERNAL', 'internal error', { cause: err });
}

/** The most characters of a caller's value that an error message quotes. */
export const QUOTE_MAX_CHARS = 64;
/** ... of a request path: long enough for every route with its ids (a UUID is 36), still bounded. */
export const PATH_QUOTE_MAX_CHARS = 256;

/**
 * A caller's value as an error message shows it: JSON-quoted, cut to a short prefix when long. A message
 * never grows with the input: gRPC sends it in a header (grpc-message), and a header of megabytes stalls
 * the caller's whole HTTP/2 connection.
 */
/** A request path as an error message shows it. */
export const quotePath = (path: string): string => quote(path, PATH_QUOTE_MAX_CHARS);

export function quote(value: string, maxChars = QUOTE_MAX_CHARS): string {
  if (value.length <= maxChars) return JSON.stringify(value);
  return `${JSON.stringify(value.slice(0, maxChars))}… (${value.length} characters)`;
}

/** A message that may embed a caller's value we did not quote ourselves (a library's), cut to `maxChars`. */
export function clip(message: string, maxChars = 256): string {
  if (message.length <= maxChars) return message;
  return `${message.slice(0, maxChars)}… (${message.length} characters)`;
}
