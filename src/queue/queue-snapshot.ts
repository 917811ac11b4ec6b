// A queue's state as data (QueueState.snapshot / QueueState.fromSnapshot): everything `apply` reads, so a
// state restored from it applies the log's later records exactly as the state it was taken from would. It
// is what a checkpoint of the replicated mode holds (checkpoint-codec.ts), and lets a replica start from a
// log position instead of from the log's start.
//
// Outcomes are not part of it: they are the outbox, not the state `apply` reads. A checkpoint carries the
// outbox beside it, as the replica's local store holds it (store.ts OutboxSnapshot).
import { toBinary } from '@bufbuild/protobuf';
import { BackfillRequestSchema, type BackfillRequest } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { StoreChange } from '../store/store.js';

export interface SnapshotTicket {
  ticketId: string;
  position: number;
  /** The Ticket as acknowledged, binary (what the store holds). */
  ticket: Uint8Array;
}

export interface SnapshotResolvedTicket extends SnapshotTicket {
  matchId: string;
  resolvedAtMs: number;
}

export interface SnapshotBackfill {
  request: BackfillRequest;
  /** The posting version fills are checked against. */
  version: number;
}

export interface QueueSnapshotData {
  /** Active tickets in arrival (position) order. */
  active: SnapshotTicket[];
  /** Resolved tickets in the state's own order (per shard, resolution order: the retention scan relies on it). */
  resolved: SnapshotResolvedTicket[];
  /** Open backfill requests in the order they were opened (a clear removes them in that order). */
  backfills: SnapshotBackfill[];
  /** The version the next backfill posting gets. */
  nextBackfillVersion: number;
  /** The position the next new ticket gets: not derivable from the tickets (the last one may be gone). */
  nextPosition: number;
}

/**
 * The store changes that give an empty local store the records of a restored state, so it answers
 * `readTicket` for restored tickets (matches and fills read their bytes) and lookups. The store must hold
 * nothing of the queue before: a restore replaces the queue, it does not merge.
 */
export function snapshotStoreChanges(queueId: string, data: QueueSnapshotData): StoreChange[] {
  const changes: StoreChange[] = [];
  for (const t of data.active) {
    changes.push({
      type: 'ticket.put',
      ticket: { queueId, ticketId: t.ticketId, position: t.position, ticket: t.ticket, state: 'active' },
    });
  }
  for (const t of data.resolved) {
    changes.push({
      type: 'ticket.put',
      ticket: {
        queueId,
        ticketId: t.ticketId,
        position: t.position,
        ticket: t.ticket,
        state: 'resolved',
        matchId: t.matchId,
        resolvedAtMs: t.resolvedAtMs,
      },
    });
  }
  for (const b of data.backfills) {
    changes.push({
      type: 'backfill.put',
      backfill: { queueId, backfillId: b.request.id, request: toBinary(BackfillRequestSchema, b.request) },
    });
  }
  return changes;
}
