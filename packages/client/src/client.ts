// MatchmakerClient: the six operations of matchmaker.core.v1.MatchmakerService over gRPC, and the two of
// matchmaker.admin.v1.MatchmakerAdminService (explain a ticket, a queue's statistics) on the same channel, as
// promises of the generated response messages. Each attempt has a deadline; UNAVAILABLE (and only UNAVAILABLE, as the spec's
// Errors table says) is retried with exponential backoff and full jitter. Ids that make a retry idempotent
// (the ticket's, the backfill request's) are chosen once, before the first attempt.
import { randomUUID } from 'node:crypto';
import { create, fromBinary, toBinary, type DescMessage, type DescMethodUnary, type MessageShape } from '@bufbuild/protobuf';
import {
  Client,
  credentials as grpcCredentials,
  Metadata,
  status as GrpcStatus,
  type ChannelCredentials,
  type ChannelOptions,
  type ServiceError as GrpcServiceError,
} from '@grpc/grpc-js';
import { backoffDelay, sleep, type BackoffPolicy } from './backoff.js';
import { encodeEngineInput, encodeMetadata, type EngineInputLike } from './engine.js';
import { callError, MatchmakerError } from './errors.js';
import {
  MatchmakerService,
  type CancelBackfillRequestsResponse,
  type CancelTicketResponse,
  type ClearQueuePoolResponse,
  type CreateBackfillRequestResponse,
  type CreateTicketResponse,
  type ReactivateTicketsResponse,
} from './gen/matchmaker/core/v1/service_pb.js';
import { MatchmakerAdminService, type ExplainTicketResponse, type GetQueueStatisticsResponse } from './gen/matchmaker/admin/v1/admin_pb.js';

export interface RetryPolicy extends BackoffPolicy {
  /** Attempts in all, the first included; 1 turns retries off. */
  maxAttempts: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 6, initialDelayMs: 100, maxDelayMs: 5_000 };
/** The default deadline of one attempt: CreateTicket answers in milliseconds once the ticket is durable. */
export const DEFAULT_DEADLINE_MS = 10_000;

/** Told before each retry: what failed and how long the client waits. */
export interface RetryEvent {
  method: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  delayMs: number;
  error: MatchmakerError;
}

export interface MatchmakerClientOptions {
  /** The gRPC endpoint, `host:port` (self-hosted default port 9001). */
  address: string;
  /** Channel credentials; plaintext (the self-hosted container) when omitted, `credentials.createSsl()` for TLS. */
  credentials?: ChannelCredentials;
  /** Sent as `authorization: Bearer <token>` on every call, to a service that requires tokens (its AUTH_TOKENS_FILE or AUTH_JWKS_FILE). */
  accessToken?: string;
  /** Deadline of each attempt in milliseconds (default 10000). */
  deadlineMs?: number;
  /** Retries of UNAVAILABLE (default: 6 attempts, waits below 100 ms doubling to 5 s). */
  retry?: Partial<RetryPolicy>;
  onRetry?: (event: RetryEvent) => void;
  /** grpc-js channel options (the reconnection backoff defaults to 100 ms growing to 2 s). */
  channelOptions?: ChannelOptions;
}

export interface CallOptions {
  /** This call's deadline per attempt, in place of the client's. */
  deadlineMs?: number;
  /** Cancels the call (and any wait before a retry); it then fails with CANCELLED. */
  signal?: AbortSignal;
  /** Extra request metadata. */
  metadata?: Record<string, string>;
}

/** A ticket to create. `id` is chosen by the client (a UUID) when omitted. */
export interface TicketInit {
  id?: string;
  queueId: string;
  engineInput?: EngineInputLike;
  /** Rulesets to compete in; empty or omitted: every ruleset of the queue. */
  rulesetIds?: readonly string[];
  /** Opaque correlation data returned on every outcome that carries the ticket (a string is sent as UTF-8). */
  metadata?: Uint8Array | string;
}

/** A backfill request to create. `id` is chosen by the client (a UUID) when omitted. */
export interface BackfillRequestInit {
  id?: string;
  queueId: string;
  /** UUID of the running match; a new request for the same match replaces the previous one. */
  matchId: string;
  /** Required when the queue has more than one ruleset. */
  rulesetId?: string;
  /** Open slots (0 counts as 1). */
  slotsRequested?: number;
  /** The players already in the match. */
  engineInput?: EngineInputLike;
  metadata?: Uint8Array | string;
}

/**
 * grpc-js waits 1 s, growing to 120 s, before reconnecting a lost channel, and calls fail at once meanwhile:
 * longer than the retry budget, so a service back after a restart would go unnoticed. Reconnect sooner.
 */
const DEFAULT_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 2_000,
};

type Method = DescMethodUnary;
const methods = MatchmakerService.method;
const adminMethods = MatchmakerAdminService.method;

export class MatchmakerClient {
  private readonly grpc: Client;
  private readonly retry: RetryPolicy;
  private readonly deadlineMs: number;

  constructor(private readonly options: MatchmakerClientOptions) {
    this.grpc = new Client(options.address, options.credentials ?? grpcCredentials.createInsecure(), {
      ...DEFAULT_CHANNEL_OPTIONS,
      ...options.channelOptions,
    });
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  }

  /** Submits a ticket; resolves once it is durable (not when it is matched: the match comes as an outcome). */
  createTicket(ticket: TicketInit, options?: CallOptions): Promise<CreateTicketResponse> {
    const request = create(methods.createTicket.input, {
      ticket: {
        id: ticket.id ?? randomUUID(),
        queueId: ticket.queueId,
        engineInput: ticket.engineInput === undefined ? undefined : encodeEngineInput(ticket.engineInput),
        rulesetIds: [...(ticket.rulesetIds ?? [])],
        metadata: ticket.metadata === undefined ? undefined : encodeMetadata(ticket.metadata),
      },
    });
    return this.call(methods.createTicket, request, ticket.queueId, options);
  }

  /** Removes a ticket from matchmaking. FAILED_PRECONDITION when it is already in a committed match. */
  cancelTicket(queueId: string, ticketId: string, options?: CallOptions): Promise<CancelTicketResponse> {
    return this.call(methods.cancelTicket, create(methods.cancelTicket.input, { queueId, ticketId }), queueId, options);
  }

  /** Returns resolved tickets to the pool (a match that cannot be honoured); the rest come back in `failedTicketIds`. */
  reactivateTickets(queueId: string, ticketIds: readonly string[], options?: CallOptions): Promise<ReactivateTicketsResponse> {
    const request = create(methods.reactivateTickets.input, { queueId, ticketIds: [...ticketIds] });
    return this.call(methods.reactivateTickets, request, queueId, options);
  }

  /** Asks for players for a running match; replaces an earlier request for the same match. */
  createBackfillRequest(backfill: BackfillRequestInit, options?: CallOptions): Promise<CreateBackfillRequestResponse> {
    const request = create(methods.createBackfillRequest.input, {
      backfillRequest: {
        id: backfill.id ?? randomUUID(),
        queueId: backfill.queueId,
        matchId: backfill.matchId,
        rulesetId: backfill.rulesetId ?? '',
        slotsRequested: backfill.slotsRequested ?? 0,
        engineInput: backfill.engineInput === undefined ? undefined : encodeEngineInput(backfill.engineInput),
        metadata: backfill.metadata === undefined ? undefined : encodeMetadata(backfill.metadata),
      },
    });
    return this.call(methods.createBackfillRequest, request, backfill.queueId, options);
  }

  /** Removes backfill requests; ids that were not active come back in `failedBackfillIds`. */
  cancelBackfillRequests(queueId: string, backfillIds: readonly string[], options?: CallOptions): Promise<CancelBackfillRequestsResponse> {
    const request = create(methods.cancelBackfillRequests.input, { queueId, backfillIds: [...backfillIds] });
    return this.call(methods.cancelBackfillRequests, request, queueId, options);
  }

  /** Empties the queue (end-to-end test setup and teardown); every failure is NOT_FOUND. */
  clearQueuePool(queueId: string, options?: CallOptions): Promise<ClearQueuePoolResponse> {
    return this.call(methods.clearQueuePool, create(methods.clearQueuePool.input, { queueId }), queueId, options);
  }

  /**
   * Why a ticket waits (matchmaker.admin.v1 ExplainTicket): its state and wait, per ruleset the bounds in force
   * and how many waiting tickets pass each rule, the rule the last tick recorded against it, and an estimated
   * time to match. NOT_FOUND for an unknown queue or ticket.
   */
  explainTicket(queueId: string, ticketId: string, options?: CallOptions): Promise<ExplainTicketResponse> {
    return this.call(adminMethods.explainTicket, create(adminMethods.explainTicket.input, { queueId, ticketId }), queueId, options);
  }

  /**
   * A queue's statistics (matchmaker.admin.v1 GetQueueStatistics), for the queue and per ruleset: tickets and
   * players waiting, recent waits and match rate, the estimated wait of a new ticket. NOT_FOUND for an unknown queue.
   */
  getQueueStatistics(queueId: string, options?: CallOptions): Promise<GetQueueStatisticsResponse> {
    return this.call(adminMethods.getQueueStatistics, create(adminMethods.getQueueStatistics.input, { queueId }), queueId, options);
  }

  /** Closes the channel; calls in flight fail with CANCELLED. */
  close(): void {
    this.grpc.close();
  }

  private async call<I extends DescMessage, O extends DescMessage>(
    method: Method & { input: I; output: O },
    request: MessageShape<I>,
    queueId: string,
    options: CallOptions = {},
  ): Promise<MessageShape<O>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt(method, request, options);
      } catch (err) {
        const error = callError(err as GrpcServiceError, method.name, queueId, attempt);
        if (!error.retryable || attempt >= this.retry.maxAttempts || options.signal?.aborted) throw error;
        const delayMs = backoffDelay(attempt, this.retry);
        this.options.onRetry?.({ method: method.name, attempt, delayMs, error });
        await sleep(delayMs, options.signal);
        if (options.signal?.aborted) throw cancelled(method.name, attempt);
      }
    }
  }

  private attempt<I extends DescMessage, O extends DescMessage>(
    method: Method & { input: I; output: O },
    request: MessageShape<I>,
    options: CallOptions,
  ): Promise<MessageShape<O>> {
    const metadata = new Metadata();
    if (this.options.accessToken !== undefined) metadata.set('authorization', `Bearer ${this.options.accessToken}`);
    for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
    const deadline = Date.now() + (options.deadlineMs ?? this.deadlineMs);
    return new Promise((resolve, reject) => {
      const call = this.grpc.makeUnaryRequest(
        `/${method.parent.typeName}/${method.name}`,
        (message: MessageShape<I>) => Buffer.from(toBinary(method.input, message)),
        (bytes: Buffer) => fromBinary(method.output, bytes),
        request,
        metadata,
        { deadline },
        (err, response) => {
          options.signal?.removeEventListener('abort', abort);
          if (err) reject(err);
          else resolve(response!);
        },
      );
      const abort = () => call.cancel();
      options.signal?.addEventListener('abort', abort, { once: true });
      if (options.signal?.aborted) abort();
    });
  }
}

function cancelled(method: string, attempts: number): MatchmakerError {
  return new MatchmakerError({ method, grpcCode: GrpcStatus.CANCELLED, message: 'cancelled by the caller', attempts });
}
