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
  | { type: 'outcome.record'; outcome: Outcome };

export interface QueueSnapshot {
  tickets: StoredTicket[];
  backfills: StoredBackfill[];
}

export interface OutcomeQuery {
  /** Only outcomes with a producer_sequence above this. */
  afterSequence?: bigint;
  queueId?: string;
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
  close(): Promise<void>;
}
