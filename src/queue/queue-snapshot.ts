// A queue's state as data (QueueState.snapshot / QueueState.fromSnapshot): everything `apply` reads, so a
// state restored from it applies the log's later records exactly as the state it was taken from would. It
// is what a checkpoint of the replicated mode holds (checkpoint-codec.ts), and lets a replica start from a
// log position instead of from the log's start.
//
// Outcomes are not part of it: they are the outbox, not the state `apply` reads. A checkpoint carries the
// outbox beside it, as the replica's local store holds it (store.ts OutboxSnapshot).
import { toBinary } from '@bufbuild/protobuf';
import { BackfillRequestSchema, type BackfillRequest } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { IdMap } from '../engine/id-map.js';
import type { Store, StoreChange, TicketRun } from '../store/store.js';
import type { TicketAt } from './records.js';
import type { ResolvedTicket } from './resolved-tickets.js';

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
  /** Active tickets in arrival (position) order: a restore's are the checkpoint's columns, not objects. */
  active: TicketRun;
  /**
   * The same tickets' ids -> positions, when whoever made the data has built that map already (the
   * checkpoint decoder does, to refuse an id held twice): the restored state keeps it rather than build
   * its own. Nothing else may hold it.
   */
  activeIds?: IdMap;
  /** Resolved tickets in the state's own order (per shard, resolution order: the retention scan relies on it). */
  resolved: SnapshotResolvedTicket[];
  /** Open backfill requests in the order they were opened (a clear removes them in that order). */
  backfills: SnapshotBackfill[];
  /** The version the next backfill posting gets. */
  nextBackfillVersion: number;
  /** The position the next new ticket gets: not derivable from the tickets (the last one may be gone). */
  nextPosition: number;
}

/** Tickets in arrival order, read one at a time (a restore's are columns: TicketRun). */
export type ArrivalOrder = Pick<TicketRun, 'length' | 'ticketId' | 'position'>;

/** Tickets listed in arrival order, as an ArrivalOrder. */
export function inArrivalOrder(tickets: readonly TicketAt[]): ArrivalOrder {
  return {
    get length() {
      return tickets.length;
    },
    ticketId: (i) => tickets[i]!.ticketId,
    position: (i) => tickets[i]!.position,
  };
}

/** Snapshot tickets listed in arrival order, as a run (a leader's snapshot, tests). */
export function ticketRunOf(tickets: readonly SnapshotTicket[]): TicketRun {
  return Object.assign(inArrivalOrder(tickets), { ticket: (i: number) => tickets[i]!.ticket });
}

/** A run's tickets as a list (tools and tests: a restore keeps the run). */
export function ticketsOf(run: TicketRun): SnapshotTicket[] {
  return Array.from({ length: run.length }, (_, i) => ({ ticketId: run.ticketId(i), position: run.position(i), ticket: run.ticket(i) }));
}

/** Resolved tickets a commit of a restored state carries (commitSnapshot). */
const RESTORE_SLICE_TICKETS = 10_000;

/**
 * Gives an empty local store the records of a restored state, so it answers `readTicket` for restored
 * tickets (matches and fills read their bytes) and lookups. The store must hold nothing of the queue
 * before: a restore replaces the queue, it does not merge. The active tickets go in as the run they are;
 * the resolved ones a slice at a time, each once the one before has been applied: made all at once, a
 * million change records lived long enough for the collector to move each to the old generation, only to
 * die there.
 */
export async function commitSnapshot(store: Pick<Store, 'commit'>, queueId: string, data: QueueSnapshotData): Promise<void> {
  await store.commit([{ type: 'tickets.put', queueId, run: data.active }]);
  for (let from = 0; from < data.resolved.length; from += RESTORE_SLICE_TICKETS) {
    const changes = data.resolved.slice(from, from + RESTORE_SLICE_TICKETS).map(
      ({ ticketId, position, ticket, matchId, resolvedAtMs }): StoreChange => ({
        type: 'ticket.put',
        ticket: { queueId, ticketId, position, ticket, state: 'resolved', matchId, resolvedAtMs },
      }),
    );
    await store.commit(changes);
  }
  const backfills = data.backfills.map(
    (b): StoreChange => ({
      type: 'backfill.put',
      backfill: { queueId, backfillId: b.request.id, request: toBinary(BackfillRequestSchema, b.request) },
    }),
  );
  if (backfills.length > 0) await store.commit(backfills);
}

/** What a snapshot is taken from: the state's tickets (id -> position, or the resolved record) and the rest. */
export interface SnapshotSource {
  /** Active tickets, id -> position. */
  active: { forEach(fn: (position: number, ticketId: string) => void): void };
  /** Resolved tickets, in resolution order (kept). */
  resolved: { forEach(fn: (record: ResolvedTicket, ticketId: string) => void): void };
  backfills: SnapshotBackfill[];
  nextBackfillVersion: number;
  nextPosition: number;
  readTicket(ticketId: string, position: number): Uint8Array;
}

/**
 * A snapshot in two steps. Taking the frame reads every ticket's id and position (and the resolved records)
 * at once: the part that must see one state. `fill(i)` then reads ticket i's bytes into `data`, for i below
 * `tickets`; once every one is filled, `data` is the snapshot. Between the two nothing may change the state
 * or forget a ticket's bytes, which a caller ensures by applying no record meanwhile (bytes never change).
 */
export function snapshotFrame(source: SnapshotSource): { data: QueueSnapshotData; tickets: number; fill(i: number): void } {
  const { ids, positions, order } = activeInPositionOrder(source.active);
  const resolvedIds: string[] = [];
  const resolvedRecords: ResolvedTicket[] = [];
  source.resolved.forEach((record, ticketId) => {
    resolvedIds.push(ticketId);
    resolvedRecords.push(record);
  });
  const active = new Array<SnapshotTicket>(ids.length);
  const data: QueueSnapshotData = {
    active: ticketRunOf(active),
    resolved: new Array<SnapshotResolvedTicket>(resolvedIds.length),
    backfills: source.backfills,
    nextBackfillVersion: source.nextBackfillVersion,
    nextPosition: source.nextPosition,
  };
  const fill = (i: number) => {
    if (i < ids.length) {
      const k = order[i]!;
      const [ticketId, position] = [ids[k]!, positions[k]!];
      active[i] = { ticketId, position, ticket: source.readTicket(ticketId, position) };
    } else {
      const r = i - ids.length;
      const [ticketId, { position, matchId, resolvedAtMs }] = [resolvedIds[r]!, resolvedRecords[r]!];
      data.resolved[r] = { ticketId, position, matchId, resolvedAtMs, ticket: source.readTicket(ticketId, position) };
    }
  };
  return { data, tickets: ids.length + resolvedIds.length, fill };
}

/**
 * The active tickets' ids and positions as the map holds them, and `order`: their indices in increasing
 * position (arrival order). The map iterates in hash order.
 */
export function activeInPositionOrder(active: SnapshotSource['active']): { ids: string[]; positions: number[]; order: Uint32Array } {
  const ids: string[] = [];
  const positions: number[] = [];
  // forEach: a third of the time of iterating entries through a generator.
  active.forEach((position, ticketId) => {
    ids.push(ticketId);
    positions.push(position);
  });
  return { ids, positions, order: byPosition(positions) };
}

/** Whether the tickets' positions never decrease. */
function ascending(tickets: readonly TicketAt[]): boolean {
  for (let k = 1; k < tickets.length; k++) if (tickets[k]!.position < tickets[k - 1]!.position) return false;
  return true;
}

/** Index bits of a packed sort key; a position must leave the rest of a double's 53 exact bits. */
const INDEX_BITS = 2 ** 21;

/**
 * The indices of `positions` in increasing position. Positions are unique: packed with their index into one
 * double each, a native numeric sort orders them (a comparator sort of a million indices takes 2-3 times longer).
 */
function byPosition(positions: readonly number[]): Uint32Array {
  const n = positions.length;
  const packable = n <= INDEX_BITS && positions.every((p) => Number.isSafeInteger(p) && p >= 0 && p < 2 ** 53 / INDEX_BITS);
  if (!packable) return Uint32Array.from(positions.keys()).sort((a, b) => positions[a]! - positions[b]!);
  const keys = new Float64Array(n);
  for (let k = 0; k < n; k++) keys[k] = positions[k]! * INDEX_BITS + k;
  keys.sort();
  const order = new Uint32Array(n);
  for (let i = 0; i < n; i++) order[i] = keys[i]! % INDEX_BITS;
  return order;
}

/**
 * The tickets a restore listed in arrival order (a checkpoint's, the store's) with those records activated
 * after it (`activated`, in apply order: new tickets, and reactivated ones back at their old positions),
 * merged by position, each position once. Some may have left since: the caller checks each one. Listing
 * the state's whole map instead turned every id back into a string and sorted a million positions again.
 * The merge is a list of indices (`from` says whose), so a restore's columns stay columns.
 */
export function withActivated(restored: ArrivalOrder, activated: readonly TicketAt[]): ArrivalOrder {
  if (activated.length === 0) return restored;
  // In apply order they ascend but for reactivated tickets: a comparator sort of 400,000 took 0.1-0.2 s.
  const later = ascending(activated) ? activated : [...activated].sort((a, b) => a.position - b.position);
  const index = new Uint32Array(restored.length + later.length);
  /** 1 where the merged ticket is one of `later`. */
  const from = new Uint8Array(index.length);
  let n = 0;
  let lastPosition = Number.NaN;
  let i = 0;
  let j = 0;
  while (i < restored.length || j < later.length) {
    const fromRestored = j === later.length || (i < restored.length && restored.position(i) <= later[j]!.position);
    const position = fromRestored ? restored.position(i) : later[j]!.position;
    if (position !== lastPosition) {
      index[n] = fromRestored ? i : j;
      from[n++] = fromRestored ? 0 : 1;
      lastPosition = position;
    }
    if (fromRestored) i++;
    else j++;
  }
  return {
    length: n,
    ticketId: (k) => (from[k] === 0 ? restored.ticketId(index[k]!) : later[index[k]!]!.ticketId),
    position: (k) => (from[k] === 0 ? restored.position(index[k]!) : later[index[k]!]!.position),
  };
}
