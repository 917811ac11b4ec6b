// The durable state behind the service, as an interface: the embedded lmdb backend implements it now,
// the broker (NATS JetStream) backend later. Every write is a list of explicit change records applied
// atomically, as open-match2's statestore replicates state updates: the same records can later be a
// replication log.
import type { Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { EncodedOutcome } from './outcome-record.js';

/**
 * A ticket as stored: the Ticket message exactly as acknowledged (created_at set), plus its lifecycle state.
 * `position` is the ticket's place in its queue's arrival order, assigned by the queue's runtime and never
 * reused while the record exists: a queue's records are kept in position order, so a new ticket appends to
 * the end of the store's index instead of landing on a random page of it.
 */
export interface StoredTicket {
  queueId: string;
  ticketId: string;
  position: number;
  /** Binary matchmaker.core.v1.Ticket. */
  ticket: Uint8Array;
  state: 'active' | 'resolved';
  /** Set when resolved: the match the ticket went into. */
  matchId?: string;
  /** Set when resolved: when, in epoch milliseconds (starts the terminal retention window). */
  resolvedAtMs?: number;
}

/**
 * Active tickets of one queue in ascending position, read one at a time: a replica's restore hands its
 * store a million of them as the checkpoint's columns (replication/wire/checkpoint-decode.ts), not as a
 * million records. A store keeps the run as given and reads a ticket from it only when asked.
 */
export interface TicketRun {
  readonly length: number;
  position(i: number): number;
  ticketId(i: number): string;
  /** Binary matchmaker.core.v1.Ticket. */
  ticket(i: number): Uint8Array;
}

/** A stored ticket without its bytes (read with `readTicket` when needed). */
export type StoredTicketState = Omit<StoredTicket, 'ticket'>;

/** Where a ticket's record is: its queue and position. */
export interface TicketRef {
  queueId: string;
  ticketId: string;
  position: number;
}

export interface StoredBackfill {
  queueId: string;
  backfillId: string;
  /** Binary matchmaker.core.v1.BackfillRequest, exactly as acknowledged. */
  request: Uint8Array;
}

export type StoreChange =
  /** A new active ticket (or one written back whole). */
  | { type: 'ticket.put'; ticket: StoredTicket }
  /** Active tickets at once, none of them stored before (a restore). */
  | { type: 'tickets.put'; queueId: string; run: TicketRun }
  /** The ticket went into a committed match; its Ticket bytes stay as they were. */
  | { type: 'ticket.resolve'; ref: TicketRef; matchId: string; resolvedAtMs: number }
  /** A resolved ticket is back in the pool. */
  | { type: 'ticket.reactivate'; ref: TicketRef }
  /** The ticket and its resolution, if any, are forgotten. */
  | { type: 'ticket.delete'; ref: TicketRef }
  | { type: 'backfill.put'; backfill: StoredBackfill }
  | { type: 'backfill.delete'; queueId: string; backfillId: string }
  /** Appends to the outbox. The store appends producer_id and the next producer_sequence at commit. */
  | { type: 'outcome.record'; outcome: EncodedOutcome }
  /** Retention: forgets an outcome. */
  | { type: 'outcome.delete'; queueId: string; sequence: bigint }
  /** A push sink acknowledged every outcome of the queue up to `sequence`. */
  | { type: 'delivery.advance'; queueId: string; sequence: bigint }
  /** The queue's delivery ran out of retries (or was released, with `parked` undefined). */
  | { type: 'delivery.park'; queueId: string; parked: ParkedDelivery | undefined }
  /** A named stream consumer acknowledged every outcome up to `sequence`. `owner`: the bearer token (by name)
   *  it belongs to from now on, kept only if it had none (the first owner stays). */
  | { type: 'consumer.advance'; consumer: string; sequence: bigint; owner?: string };

/** A delivery that exhausted its retries: it holds back its queue until released. */
export interface ParkedDelivery {
  sequence: bigint;
  attempts: number;
  lastError: string;
  parkedAtMs: number;
}

export interface QueueSnapshot {
  /** In position order, read as iterated: a pool of a million tickets is not held in memory at once. */
  tickets: Iterable<StoredTicketState>;
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
   * disk flush (group commit). A failed commit is fatal: the store calls its onFatal handler. The store may
   * keep what the changes hold (the memory store keeps a put ticket's record as it is): the caller does not
   * change them afterwards.
   */
  commit(changes: readonly StoreChange[]): Promise<void>;
  /**
   * Resolves once every change committed before this call is durable. Commits apply in call order, so a
   * reader that saw an in-memory effect of an earlier commit can await this before acknowledging it.
   */
  whenDurable(): Promise<void>;
  /**
   * Commits a small durable write outside the commit path (its failure is not fatal) and rejects when the
   * store cannot write (a full disk): readiness waits for this at start-up.
   */
  probeWrite(): Promise<void>;
  /** Everything stored for one queue, for restoring its pool at start. */
  loadQueue(queueId: string): QueueSnapshot;
  /**
   * One ticket's committed record (a change not yet committed is not visible). Read-only: a store may answer
   * with the record it holds (a change replaces a record, never alters it).
   */
  readTicket(ref: TicketRef): Readonly<StoredTicket> | undefined;
  /**
   * One committed ticket's bytes (binary Ticket), lent: valid only until the store is next read or written.
   * For a caller that reads what it needs from them at once and keeps no view of them (a pool's rebuild, a
   * match's output): the embedded store answers without readTicket's copy of the record.
   */
  lendTicketBytes(ref: TicketRef): Uint8Array | undefined;
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
  /** The name of the bearer token that owns a named stream consumer, if one does. */
  consumerOwner(consumer: string): string | undefined;
  /** The highest producer_sequence whose commit has completed (0 when none). */
  lastSequence(): bigint;
  /**
   * The highest producer_sequence recorded for one queue (0 when none): its last outcome still held, or its
   * delivery cursor when retention has removed every delivered one. With one numbering for the whole service
   * (the embedded mode) this is what a queue's delivery is measured against, not `lastSequence`.
   */
  queueLastSequence(queueId: string): bigint;
  /** Called after each commit that recorded outcomes, with their queues. */
  onOutcomesCommitted(listener: (queueIds: ReadonlySet<string>) => void): void;
  close(): Promise<void>;
}

/**
 * One queue's outbox as a replica's local store holds it: what a checkpoint of the replicated mode carries
 * so that a restored replica numbers the queue's next outcomes where the others do and still holds those
 * not yet delivered. Outcomes at or below the delivery cursor are left out: a push sink has them.
 */
export interface OutboxSnapshot {
  /** The producer_sequence the next recorded outcome gets. */
  nextSequence: bigint;
  /** The last sequence a push sink acknowledged (0 when none). */
  deliveryCursor: bigint;
  parked: ParkedDelivery | undefined;
  /** Named stream consumers' positions, by name. */
  consumers: { consumer: string; sequence: bigint; owner?: string }[];
  /** The recorded outcomes above the cursor (producer_id and producer_sequence set), ascending. */
  outcomes: { sequence: bigint; bytes: Uint8Array }[];
}

/** A store that can hand over one queue's outbox and take one over: a replica's local store. */
export interface OutboxStore extends Store {
  /** The queue's outbox as of the last settled commit (call it with no commit in flight: whenDurable). */
  outboxSnapshot(queueId: string): OutboxSnapshot;
  /** Takes over an outbox, at once; the store must not have recorded any outcome yet. */
  restoreOutbox(queueId: string, outbox: OutboxSnapshot): void;
}
