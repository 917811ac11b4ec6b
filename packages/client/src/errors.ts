// The one error type of the client: a failed call, with the service's status code by name, its message, and
// the machine-readable reason the service sends in `x-svc-reason` (today only QUEUE_RETIRING).
import { Metadata, status as GrpcStatus, type ServiceError as GrpcServiceError } from '@grpc/grpc-js';

/** The gRPC status code names the service answers with (docs: Errors); others can come from the transport. */
export type ErrorCode =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'FAILED_PRECONDITION'
  | 'UNAVAILABLE'
  | 'INTERNAL'
  | 'DEADLINE_EXCEEDED'
  | 'CANCELLED'
  | 'UNIMPLEMENTED'
  | 'UNKNOWN'
  | (string & {});

/** The response metadata key of the reason. */
export const REASON_KEY = 'x-svc-reason';

export class MatchmakerError extends Error {
  override readonly name: string = 'MatchmakerError';
  /** The status code's name, e.g. `FAILED_PRECONDITION`. */
  readonly code: ErrorCode;
  /** The numeric gRPC status code. */
  readonly grpcCode: number;
  /** `x-svc-reason` of the response, when it had one. */
  readonly reason: string | undefined;
  /** The RPC that failed, e.g. `CreateTicket`. */
  readonly method: string;
  /** How many attempts were made (more than 1 when UNAVAILABLE was retried). */
  readonly attempts: number;
  /** The response's trailing metadata. */
  readonly metadata: Metadata;

  constructor(init: {
    method: string;
    grpcCode: number;
    message: string;
    reason?: string;
    attempts: number;
    metadata?: Metadata;
    cause?: unknown;
  }) {
    super(`${init.method}: ${GrpcStatus[init.grpcCode] ?? init.grpcCode}: ${init.message}`, { cause: init.cause });
    this.code = GrpcStatus[init.grpcCode] ?? 'UNKNOWN';
    this.grpcCode = init.grpcCode;
    this.reason = init.reason;
    this.method = init.method;
    this.attempts = init.attempts;
    this.metadata = init.metadata ?? new Metadata();
  }

  /** UNAVAILABLE is the one code the service asks callers to retry (with backoff). */
  get retryable(): boolean {
    return this.grpcCode === GrpcStatus.UNAVAILABLE;
  }
}

/**
 * FAILED_PRECONDITION with `x-svc-reason: QUEUE_RETIRING`: the queue's configuration was removed. Do not retry
 * against this queue; route players elsewhere.
 */
export class QueueRetiringError extends MatchmakerError {
  override readonly name = 'QueueRetiringError';
  override readonly reason = 'QUEUE_RETIRING';
  /** The queue the call addressed. */
  readonly queueId: string;

  constructor(init: ConstructorParameters<typeof MatchmakerError>[0] & { queueId: string }) {
    super(init);
    this.queueId = init.queueId;
  }
}

/** The typed error for a grpc-js call failure. */
export function callError(err: GrpcServiceError, method: string, queueId: string, attempts: number): MatchmakerError {
  const reasonValue = err.metadata?.get(REASON_KEY)[0];
  const reason = reasonValue === undefined ? undefined : String(reasonValue);
  const init = { method, grpcCode: err.code, message: err.details || err.message, reason, attempts, metadata: err.metadata, cause: err };
  if (err.code === GrpcStatus.FAILED_PRECONDITION && reason === 'QUEUE_RETIRING') return new QueueRetiringError({ ...init, queueId });
  return new MatchmakerError(init);
}
