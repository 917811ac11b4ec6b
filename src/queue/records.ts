// The records that change a queue's state. Every change to the pool, the resolved tickets and the backfill
// book is one of these, applied by one deterministic function (queue-state.ts). A record carries every
// value its application needs that is not in the state: times, the ids of what it creates, positions, the
// chunk size of its outcomes. So applying the same records in the same order gives the same state, the
// same store changes and the same outcomes, whether the records come from this process's requests and
// ticks (the embedded mode) or from a queue's replicated log (src/replication/replicated-history.ts).
import type { BackfillRequest } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { ParkedDelivery } from '../store/store.js';

/** A ticket where a record saw it: a record about it applies only while it is still there. */
export interface TicketAt {
  ticketId: string;
  position: number;
}

/** A backfill request as a record saw it: `version` changes when the same id is posted again. */
export interface BackfillAt {
  backfillId: string;
  version: number;
}

/** What a hot reload or a restart does to an active ticket or request that no longer fits. */
export type Eviction = { kind: 'orphaned'; rulesetId: string } | { kind: 'removed'; reason: RemovalReason };

/** Times and ids for the outcomes a record causes. */
interface Stamped {
  atMs: number;
  /** Outcome ids and batch operation ids derive from this (outcome-factory.ts `stampOf`). */
  operationId: string;
}

/** Outcomes of a sweep are batched `chunkSize` ids at a time. */
interface Chunked extends Stamped {
  chunkSize: number;
}

export type QueueRecord =
  /** CreateTicket: `ticket` is the Ticket as acknowledged (created_at set), binary. A known id is a no-op. */
  | { type: 'ticket.create'; ticketId: string; ticket: Uint8Array }
  /** CancelTicket. */
  | { type: 'ticket.cancel'; ticketId: string }
  /** ReactivateTickets: only tickets resolved at or after `resolvedSinceMs` (still retained) come back. */
  | { type: 'tickets.reactivate'; ticketIds: readonly string[]; resolvedSinceMs: number }
  /** CreateBackfillRequest: replaces an open request for the same match. */
  | { type: 'backfill.create'; request: BackfillRequest }
  /** CancelBackfillRequests. */
  | { type: 'backfills.cancel'; backfillIds: readonly string[] }
  /** ClearQueuePool, or a retired queue's removal: every active ticket and request leaves. */
  | ({ type: 'pool.clear'; reason: RemovalReason } & Chunked)
  /**
   * A match the engine formed: void unless every ticket is still active where the engine saw it. Its
   * outcome's id derives from `matchId`.
   */
  | { type: 'match.commit'; matchId: string; tickets: readonly TicketAt[]; rulesetId: string; engineOutput: Uint8Array; atMs: number }
  /** A backfill request the engine filled: void unless the request and every ticket are still as seen. */
  | { type: 'backfill.fill'; backfill: BackfillAt; fillId: string; tickets: readonly TicketAt[]; atMs: number }
  /** Tickets past ticket_ttl_secs. */
  | ({ type: 'tickets.expire'; tickets: readonly TicketAt[] } & Chunked)
  /** Backfill requests past backfill_ttl_secs. */
  | ({ type: 'backfills.expire'; backfills: readonly BackfillAt[] } & Chunked)
  /** Tickets the queue's configuration no longer admits. */
  | ({ type: 'tickets.evict'; evictions: readonly (TicketAt & { eviction: Eviction })[] } & Chunked)
  /** Backfill requests the queue's configuration no longer admits. */
  | ({ type: 'backfills.evict'; evictions: readonly (BackfillAt & { eviction: Eviction })[] } & Chunked)
  /** Resolved tickets past terminal_retention_ttl_secs: forgotten (no longer reactivatable). */
  | { type: 'resolved.forget'; tickets: readonly { ticketId: string; matchId: string }[] }
  /** The queue's push sink acknowledged its outcomes through `sequence` (appended by the delivering leader). */
  | { type: 'delivery.advance'; sequence: bigint }
  /** The queue's delivery ran out of retries: later outcomes wait until it is released. */
  | { type: 'delivery.park'; parked: ParkedDelivery }
  /** An operator released the queue's parked delivery. */
  | { type: 'delivery.release' }
  /** A named WebSocket stream consumer acknowledged the queue's outcomes through `sequence`. */
  | { type: 'consumer.advance'; consumer: string; sequence: bigint; owner?: string };

export type RecordType = QueueRecord['type'];
export type RecordOf<T extends RecordType> = Extract<QueueRecord, { type: T }>;

/** What applying each record answers (besides its store changes and pool effects). */
export interface RecordResults {
  'ticket.create': { created: boolean };
  /** `matchId` when the ticket is already in a committed match (the cancel fails). */
  'ticket.cancel': { matchId?: string };
  'tickets.reactivate': { failedTicketIds: string[] };
  'backfill.create': undefined;
  'backfills.cancel': { failedBackfillIds: string[] };
  'pool.clear': { ticketsCleared: number; backfillRequestsCleared: number };
  'match.commit': { committed: boolean };
  'backfill.fill': { committed: boolean };
  'tickets.expire': { expired: number };
  'backfills.expire': { expired: number };
  'tickets.evict': { evicted: number };
  'backfills.evict': { evicted: number };
  'resolved.forget': { forgotten: number };
  'delivery.advance': undefined;
  'delivery.park': undefined;
  'delivery.release': undefined;
  'consumer.advance': undefined;
}
