// The durable state behind the service, as an interface: the embedded lmdb backend implements it now,
// the broker (NATS JetStream) backend later. Every write is a list of explicit change records applied
// atomically, as open-match2's statestore replicates state updates: the same records can later be a
// replication log.
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';

/** A ticket as stored: the Ticket message exactly as acknowledged (created_at set), plus its lifecycle state. */
export interface StoredTicket {
  queueId: string;
  ticketId: string;
  /** Binary matchmaker.core.v1.Ticket. */
  ticket: Uint8Array;
  state: 'active' | 'resolved';
  /** Set when resolved: the match the ticket went into. */
  matchId?: string;
  /** Set when resolved: when, in epoch milliseconds (starts the terminal retention window). */
  resolvedAtMs?: number;
}

export interface StoredBackfill {
  queueId: string;
  backfillId: string;
  /** Binary matchmaker.core.v1.BackfillRequest, exactly as acknowledged. */
  request: Uint8Array;
}

export type StoreChange =
  | { type: 'ticket.put'; ticket: StoredTicket }
  | { type: 'ticket.delete'; queueId: string; ticketId: string }
  | { type: 'backfill.put'; backfill: StoredBackfill }
  | { type: 'backfill.delete'; queueId: string; backfillId: string }
  /** Appends to the outbox. The store sets producer_id and the next producer_sequence at commit. */
  | { type: 'outcome.record'; outcome: Outcome }
  /** Retention: forgets an outcome. */
  | { type: 'outcome.delete'; queueId: string; sequence: bigint }
  /** A push sink acknowledged every outcome of the queue up to `sequence`. */
  | { type: 'delivery.advance'; queueId: string; sequence: bigint }
  /** The queue's delivery ran out of retries (or was released, with `parked` undefined). */
  | { type: 'delivery.park'; queueId: string; parked: ParkedDelivery | undefined }
  /** A named stream consumer acknowledged every outcome up to `sequence`. */
  | { type: 'consumer.advance'; consumer: string; sequence: bigint };

/** A delivery that exhausted its retries: it holds back its queue until released. */
export interface ParkedDelivery {
  sequence: bigint;
  attempts: number;
  lastError: string;
  parkedAtMs: number;
}

export interface QueueSnapshot {
  tickets: StoredTicket[];
  backfills: StoredBackfill[];
}

export interface OutcomeQuery {
  /** Only outcomes with a producer_sequence above this. */
  afterSequence?: bigint;
  /** Only outcomes of queues this accepts. */
  queueFilter?: (queueId: string) => boolean;
  limit?: number;
}

export interface Store {
  /** Stable id of this producer of outcomes (kept with the data, so it survives restarts). */
  readonly producerId: string;
  /**
   * Applies the changes atomically. Resolves once they are durable on disk; concurrent commits share one
   * disk flush (group commit). A failed commit is fatal: the store calls its onFatal handler.
   */
  commit(changes: readonly StoreChange[]): Promise<void>;
  /**
   * Resolves once every change committed before this call is durable. Commits apply in call order, so a
   * reader that saw an in-memory effect of an earlier commit can await this before acknowledging it.
   */
  whenDurable(): Promise<void>;
  /** Everything stored for one queue, for restoring its pool at start. */
  loadQueue(queueId: string): QueueSnapshot;
  /** Ids of every queue that has tickets or backfill requests stored. */
  storedQueueIds(): string[];
  /** Recorded outcomes in producer_sequence order. */
  listOutcomes(query: OutcomeQuery): Outcome[];
  /** One queue's recorded outcomes after `afterSequence`, in order (an index: no scan of other queues). */
  queueOutcomes(queueId: string, afterSequence: bigint, limit: number): Outcome[];
  /** The last sequence a push sink acknowledged for the queue (0 when none). */
  deliveryCursor(queueId: string): bigint;
  parkedDelivery(queueId: string): ParkedDelivery | undefined;
  /** The last sequence a named stream consumer acknowledged, if it ever did. */
  consumerPosition(consumer: string): bigint | undefined;
  /** The highest producer_sequence whose commit has completed (0 when none). */
  lastSequence(): bigint;
  /** Called after each commit that recorded outcomes, with their queues. */
  onOutcomesCommitted(listener: (queueIds: ReadonlySet<string>) => void): void;
  close(): Promise<void>;
}
