// A queue's state and the one function that changes it: `apply(record)`. The state is what every replica
// must agree on: the active tickets (id -> position), the resolved ones kept for reactivation, the open
// backfill requests. `apply` is deterministic: it reads nothing but the state, the record and stored ticket
// bytes (which never change once written), so the same records in the same order give the same state, the
// same store changes and the same outcomes (records.ts). It decides whether a record still holds (a match
// whose ticket was cancelled before it is void) and answers what the caller reports.
//
// The engine's columns are not part of this state: the runtime keeps them in step from what `apply` says
// left and entered the pool.
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { BackfillRequestSchema, BackfillSchema, MatchSchema, TicketSchema } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { Outcome, RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { IdMap } from '../engine/id-map.js';
import { encodeOutcome, matchCreatedOutcome } from '../outcomes/outcome-encoding.js';
import {
  backfillCreated,
  backfillRequestOrphaned,
  backfillRequestsExpired,
  backfillRequestsRemoved,
  stampOf,
  ticketOrphaned,
  ticketsExpired,
  ticketsRemoved,
  type OutcomeStamp,
} from '../outcomes/outcome-factory.js';
import type { QueueSnapshot, StoreChange, TicketRef } from '../store/store.js';
import { BackfillBook } from './backfill-book.js';
import { activeInPositionOrder, snapshotFrame, type QueueSnapshotData } from './queue-snapshot.js';
import type { Eviction, QueueRecord, RecordOf, RecordResults, RecordType, TicketAt } from './records.js';
import { ResolvedTickets } from './resolved-tickets.js';
import { timeSliced } from './time-slices.js';

/** What applying a record did. */
export interface Applied<T extends RecordType = RecordType> {
  /** The store changes to commit, outcomes included, in order. */
  changes: StoreChange[];
  /** Tickets that left the pool. */
  deactivated: string[];
  /** Tickets that entered the pool, where they are stored. */
  activated: TicketAt[];
  result: RecordResults[T];
}

/** Reads a stored ticket's bytes (the Ticket as acknowledged): they never change once written. */
export type TicketReader = (ticketId: string, position: number) => Uint8Array;

const record = (outcome: Outcome): StoreChange => ({ type: 'outcome.record', outcome: encodeOutcome(outcome) });

export class QueueState {
  /** Active tickets: id -> position (the ticket's place in the store and in arrival order), off the JS heap. */
  readonly active: IdMap;
  /** Resolved tickets, kept for terminal_retention_ttl_secs, in resolution order, off the JS heap. */
  readonly resolved = new ResolvedTickets();
  readonly backfills = new BackfillBook();
  private nextPosition = 1;

  constructor(
    readonly queueId: string,
    private readonly readTicket: TicketReader,
    active = new IdMap(),
  ) {
    this.active = active;
  }

  /** Loads the stored state; answers the active tickets in arrival order (their rows are built later). */
  restore(snapshot: QueueSnapshot): TicketAt[] {
    const active: TicketAt[] = [];
    for (const stored of snapshot.tickets) {
      this.nextPosition = Math.max(this.nextPosition, stored.position + 1);
      if (stored.state === 'resolved') {
        this.resolved.set(stored.ticketId, {
          position: stored.position,
          matchId: stored.matchId ?? '',
          resolvedAtMs: stored.resolvedAtMs ?? 0,
        });
      } else {
        this.active.set(stored.ticketId, stored.position);
        active.push({ ticketId: stored.ticketId, position: stored.position });
      }
    }
    for (const stored of snapshot.backfills) this.backfills.add(fromBinary(BackfillRequestSchema, stored.request));
    return active;
  }

  /**
   * The state as data (queue-snapshot.ts), with the bytes of every ticket it holds. Synchronous, so it is
   * taken between two records, never in the middle of one.
   */
  snapshot(): QueueSnapshotData {
    const frame = this.snapshotFrame();
    for (let i = 0; i < frame.tickets; i++) frame.fill(i);
    return frame.data;
  }

  /**
   * The same data, with the tickets' bytes read in time slices after their ids and positions are taken at
   * once: a large queue does not hold the event loop. The caller applies no record until it resolves.
   */
  async snapshotInSlices(): Promise<QueueSnapshotData> {
    const frame = this.snapshotFrame();
    await timeSliced(frame.tickets, (i) => frame.fill(i));
    return frame.data;
  }

  private snapshotFrame() {
    return snapshotFrame({
      active: this.active,
      resolved: this.resolved,
      backfills: Array.from(this.backfills.entries(), ([, open]) => ({ request: open.request, version: open.version })),
      nextBackfillVersion: this.backfills.nextVersion,
      nextPosition: this.nextPosition,
      readTicket: this.readTicket,
    });
  }

  /**
   * A state as a snapshot holds it. `readTicket` must answer for its tickets: commit
   * `commitSnapshot` of the same data to the store it reads before applying records.
   */
  static fromSnapshot(queueId: string, readTicket: TicketReader, data: QueueSnapshotData): QueueState {
    const state = new QueueState(queueId, readTicket, data.activeIds);
    if (!data.activeIds) {
      const { active } = data;
      state.active.reserve(active.length);
      for (let i = 0; i < active.length; i++) state.active.set(active.ticketId(i), active.position(i));
    }
    for (const t of data.resolved) {
      state.resolved.set(t.ticketId, { position: t.position, matchId: t.matchId, resolvedAtMs: t.resolvedAtMs });
    }
    state.backfills.load(data.backfills, data.nextBackfillVersion);
    state.nextPosition = data.nextPosition;
    return state;
  }

  /** Whether the ticket is still active where a record saw it. */
  isActiveAt(ticket: TicketAt): boolean {
    return this.active.get(ticket.ticketId) === ticket.position;
  }

  /** Whether the id is known (active or resolved): a CreateTicket for it makes no new entry. */
  knows(ticketId: string): boolean {
    return this.active.has(ticketId) || this.resolved.has(ticketId);
  }

  /** The active tickets in arrival (position) order; the map itself iterates in no order. */
  activeInArrivalOrder(): TicketAt[] {
    // Sorted as packed positions: a comparator sort of a million objects in hash order took over a second.
    const { ids, positions, order } = activeInPositionOrder(this.active);
    return Array.from(order, (k) => ({ ticketId: ids[k]!, position: positions[k]! }));
  }

  /** Applies one record: the only way this state changes. */
  apply<R extends QueueRecord>(rec: R): Applied<R['type']> {
    const out: Applied = { changes: [], deactivated: [], activated: [], result: undefined };
    out.result = this.applyTo(rec, out);
    return out as Applied<R['type']>;
  }

  private applyTo(rec: QueueRecord, out: Applied): RecordResults[RecordType] {
    switch (rec.type) {
      case 'ticket.create':
        return this.create(rec, out);
      case 'ticket.cancel': {
        const resolved = this.resolved.get(rec.ticketId);
        if (resolved) return { matchId: resolved.matchId };
        const position = this.active.get(rec.ticketId);
        if (position !== undefined) this.remove({ ticketId: rec.ticketId, position }, out);
        return {};
      }
      case 'tickets.reactivate':
        return this.reactivate(rec, out);
      case 'backfill.create': {
        const { request } = rec;
        const replaced = this.backfills.forMatch(request.matchId);
        if (replaced !== undefined && this.backfills.remove(replaced) && replaced !== request.id) {
          out.changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: replaced });
        }
        // The same request id re-posted for another match moves; the put below overwrites the stored one.
        this.backfills.remove(request.id);
        this.backfills.add(request);
        out.changes.push({
          type: 'backfill.put',
          backfill: { queueId: this.queueId, backfillId: request.id, request: toBinary(BackfillRequestSchema, request) },
        });
        return undefined;
      }
      case 'backfills.cancel': {
        const failedBackfillIds: string[] = [];
        for (const id of new Set(rec.backfillIds)) {
          if (this.backfills.remove(id)) out.changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: id });
          else failedBackfillIds.push(id);
        }
        return { failedBackfillIds };
      }
      case 'pool.clear':
        return this.clear(rec, out);
      case 'match.commit':
        return this.commitMatch(rec, out);
      case 'backfill.fill':
        return this.fillBackfill(rec, out);
      case 'tickets.expire': {
        const expired = rec.tickets.filter((t) => this.isActiveAt(t));
        for (const t of expired) this.remove(t, out);
        const ids = expired.map((t) => t.ticketId);
        out.changes.push(...ticketsExpired(this.queueId, ids, rec.chunkSize, stampOf(rec.operationId, rec.atMs)).map(record));
        return { expired: ids.length };
      }
      case 'backfills.expire': {
        const ids = rec.backfills.filter((b) => this.removeBackfill(b.backfillId, b.version, out)).map((b) => b.backfillId);
        out.changes.push(...backfillRequestsExpired(this.queueId, ids, rec.chunkSize, stampOf(rec.operationId, rec.atMs)).map(record));
        return { expired: ids.length };
      }
      case 'tickets.evict':
        return this.evictTickets(rec, out);
      case 'backfills.evict':
        return this.evictBackfills(rec, out);
      case 'resolved.forget': {
        let forgotten = 0;
        for (const { ticketId, matchId } of rec.tickets) {
          const resolved = this.resolved.get(ticketId);
          if (resolved?.matchId !== matchId) continue;
          this.resolved.delete(ticketId);
          out.changes.push({ type: 'ticket.delete', ref: this.ref({ ticketId, position: resolved.position }) });
          forgotten++;
        }
        return { forgotten };
      }
      // The outbox's delivery state: every replica holds it, so whichever delivers next resumes from it.
      case 'delivery.advance':
        out.changes.push({ type: 'delivery.advance', queueId: this.queueId, sequence: rec.sequence });
        return undefined;
      case 'delivery.park':
        out.changes.push({ type: 'delivery.park', queueId: this.queueId, parked: { ...rec.parked } });
        return undefined;
      case 'delivery.release':
        out.changes.push({ type: 'delivery.park', queueId: this.queueId, parked: undefined });
        return undefined;
      case 'consumer.advance':
        out.changes.push({
          type: 'consumer.advance',
          consumer: rec.consumer,
          sequence: rec.sequence,
          ...(rec.owner === undefined ? {} : { owner: rec.owner }),
        });
        return undefined;
    }
  }

  private create(rec: RecordOf<'ticket.create'>, out: Applied): RecordResults['ticket.create'] {
    if (this.knows(rec.ticketId)) return { created: false };
    const at = { ticketId: rec.ticketId, position: this.nextPosition++ };
    this.active.set(at.ticketId, at.position);
    out.activated.push(at);
    // A literal, not a spread of ref(at): spreading it took a third of a follower's apply of a create.
    const ticket = { queueId: this.queueId, ticketId: at.ticketId, position: at.position, ticket: rec.ticket, state: 'active' } as const;
    out.changes.push({ type: 'ticket.put', ticket });
    return { created: true };
  }

  private reactivate(rec: RecordOf<'tickets.reactivate'>, out: Applied): RecordResults['tickets.reactivate'] {
    const failedTicketIds: string[] = [];
    for (const ticketId of new Set(rec.ticketIds)) {
      if (this.active.has(ticketId)) continue;
      const resolved = this.resolved.get(ticketId);
      if (!resolved || resolved.resolvedAtMs < rec.resolvedSinceMs) {
        failedTicketIds.push(ticketId);
        continue;
      }
      const at = { ticketId, position: resolved.position };
      this.resolved.delete(ticketId);
      this.active.set(ticketId, at.position);
      out.activated.push(at);
      out.changes.push({ type: 'ticket.reactivate', ref: this.ref(at) });
    }
    return { failedTicketIds };
  }

  private clear(rec: RecordOf<'pool.clear'>, out: Applied): RecordResults['pool.clear'] {
    const tickets = this.activeInArrivalOrder();
    for (const t of tickets) this.remove(t, out);
    const backfillIds = this.backfills.ids();
    this.backfills.clear();
    out.changes.push(...backfillIds.map((backfillId): StoreChange => ({ type: 'backfill.delete', queueId: this.queueId, backfillId })));
    const stamp = stampOf(rec.operationId, rec.atMs);
    const ticketIds = tickets.map((t) => t.ticketId);
    out.changes.push(...ticketsRemoved(this.queueId, ticketIds, rec.reason, rec.chunkSize, stamp).map(record));
    out.changes.push(...backfillRequestsRemoved(this.queueId, backfillIds, rec.reason, rec.chunkSize, stamp).map(record));
    return { ticketsCleared: ticketIds.length, backfillRequestsCleared: backfillIds.length };
  }

  private commitMatch(rec: RecordOf<'match.commit'>, out: Applied): RecordResults['match.commit'] {
    if (!rec.tickets.every((t) => this.isActiveAt(t))) return { committed: false };
    const tickets = rec.tickets.map((t) => this.readTicket(t.ticketId, t.position));
    for (const t of rec.tickets) this.resolve(t, rec.matchId, rec.atMs, out);
    const match = create(MatchSchema, {
      id: rec.matchId,
      engineOutput: rec.engineOutput,
      createdAt: timestampFromMs(rec.atMs),
      rulesetId: rec.rulesetId,
    });
    out.changes.push({
      type: 'outcome.record',
      outcome: matchCreatedOutcome(this.queueId, match, tickets, stampOf(rec.matchId, rec.atMs)),
    });
    return { committed: true };
  }

  private fillBackfill(rec: RecordOf<'backfill.fill'>, out: Applied): RecordResults['backfill.fill'] {
    const open = this.backfills.get(rec.backfill.backfillId);
    if (open?.version !== rec.backfill.version || !rec.tickets.every((t) => this.isActiveAt(t))) return { committed: false };
    const assignedTickets = rec.tickets.map((t) => fromBinary(TicketSchema, this.readTicket(t.ticketId, t.position)));
    for (const t of rec.tickets) this.resolve(t, open.request.matchId, rec.atMs, out);
    this.removeBackfill(rec.backfill.backfillId, rec.backfill.version, out);
    const filled = create(BackfillSchema, { id: rec.fillId, request: open.request, assignedTickets, createdAt: timestampFromMs(rec.atMs) });
    out.changes.push(record(backfillCreated(this.queueId, filled, stampOf(rec.fillId, rec.atMs))));
    return { committed: true };
  }

  private evictTickets(rec: RecordOf<'tickets.evict'>, out: Applied): RecordResults['tickets.evict'] {
    const stamp = stampOf(rec.operationId, rec.atMs);
    const removed = new Removals();
    let evicted = 0;
    for (const t of rec.evictions) {
      if (!this.isActiveAt(t)) continue;
      evicted++;
      if (t.eviction.kind === 'orphaned') {
        const ticket = fromBinary(TicketSchema, this.readTicket(t.ticketId, t.position));
        out.changes.push(record(ticketOrphaned(this.queueId, ticket, t.eviction.rulesetId, stamp)));
      } else removed.add(t.eviction.reason, t.ticketId);
      this.remove(t, out);
    }
    for (const [reason, ids] of removed) out.changes.push(...ticketsRemoved(this.queueId, ids, reason, rec.chunkSize, stamp).map(record));
    return { evicted };
  }

  private evictBackfills(rec: RecordOf<'backfills.evict'>, out: Applied): RecordResults['backfills.evict'] {
    const stamp = stampOf(rec.operationId, rec.atMs);
    const removed = new Removals();
    let evicted = 0;
    for (const b of rec.evictions) {
      const open = this.backfills.get(b.backfillId);
      if (!open || !this.removeBackfill(b.backfillId, b.version, out)) continue;
      evicted++;
      if (b.eviction.kind === 'orphaned') {
        out.changes.push(record(backfillRequestOrphaned(this.queueId, open.request, b.eviction.rulesetId, stamp)));
      } else removed.add(b.eviction.reason, b.backfillId);
    }
    for (const [reason, ids] of removed) {
      out.changes.push(...backfillRequestsRemoved(this.queueId, ids, reason, rec.chunkSize, stamp).map(record));
    }
    return { evicted };
  }

  /** An active ticket leaves the pool and is forgotten. */
  private remove(t: TicketAt, out: Applied): void {
    this.active.delete(t.ticketId);
    out.deactivated.push(t.ticketId);
    out.changes.push({ type: 'ticket.delete', ref: this.ref(t) });
  }

  /** An active ticket goes into a committed match: out of the pool, into `resolved`. */
  private resolve(t: TicketAt, matchId: string, atMs: number, out: Applied): void {
    this.active.delete(t.ticketId);
    this.resolved.set(t.ticketId, { position: t.position, matchId, resolvedAtMs: atMs });
    out.deactivated.push(t.ticketId);
    out.changes.push({ type: 'ticket.resolve', ref: this.ref(t), matchId, resolvedAtMs: atMs });
  }

  /** Closes the request if it is still the posting `version`; answers whether it did. */
  private removeBackfill(backfillId: string, version: number, out: Applied): boolean {
    if (this.backfills.get(backfillId)?.version !== version) return false;
    this.backfills.remove(backfillId);
    out.changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId });
    return true;
  }

  private ref(t: TicketAt): TicketRef {
    return { queueId: this.queueId, ticketId: t.ticketId, position: t.position };
  }
}

/** Ids grouped by removal reason, in the order the reasons first occur. */
class Removals extends Map<RemovalReason, string[]> {
  add(reason: RemovalReason, id: string): void {
    const ids = this.get(reason);
    if (ids) ids.push(id);
    else this.set(reason, [id]);
  }
}

export type { Eviction, OutcomeStamp };
