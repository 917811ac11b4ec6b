// A queue's resolved tickets, kept for terminal_retention_ttl_secs (600 s by default) so that ReactivateTickets
// can return them to the pool. At 3,000 matched tickets a second that is 1.8 million records: held as JS
// objects and strings they would be the largest thing every major collection marks, so they live off the JS
// heap as the active tickets do (id-map.ts): a log of records in the order they were resolved, in typed
// arrays, and an IdMap from each ticket id to its record's place in the log.
//
// The log is a ring: a record leaves its front once it is forgotten (resolved.forget) or reactivated, and
// one removed from the middle is marked dead, its room taken back when the front reaches it. New records take
// the room the front left, so a log whose records come and go within a retention period keeps its length and
// moves nothing; it grows only when every slot from the front to the back is taken.
import { grownColumn } from '../engine/growable-column.js';
import { IdColumn, IdMap } from '../engine/id-map.js';

/**
 * Past this many records the log's columns reserve room for RESERVED_RECORDS and grow in place
 * (growable-column.ts): doubling a log by a copy held the event loop for 112 ms at a million records and
 * 214 ms at two million on a two-core machine, in the apply of a tick's matches (bench/RESULTS.md, twenty-third session). Smaller logs
 * (most queues, every test) keep plain arrays.
 */
const IN_PLACE_PAST = 1 << 16;
/** 4,194,304 records: a retention period's worth at 3,000 matched tickets a second for 10 minutes, twice over. */
const RESERVED_RECORDS = 1 << 22;

export interface ResolvedTicket {
  position: number;
  matchId: string;
  resolvedAtMs: number;
}

export class ResolvedTickets {
  /** Ticket id -> sequence number of its record; record `seq` is at slot `slotOf(seq)` of the columns. */
  private readonly bySeq = new IdMap();
  /** Sequence numbers of the first record not yet taken back, and of the next record. */
  private head = 0;
  private tail = 0;
  /** The slot of record `head`; the records follow it, wrapping past the last slot to the first. */
  private headSlot = 0;
  private capacity = 0;
  private ticketIds = new IdColumn();
  private matchIds = new IdColumn();
  private positions = new Float64Array(0);
  private resolvedAtMs = new Float64Array(0);
  private live = new Uint8Array(0);

  get size(): number {
    return this.bySeq.size;
  }

  has(ticketId: string): boolean {
    return this.bySeq.has(ticketId);
  }

  get(ticketId: string): ResolvedTicket | undefined {
    const seq = this.bySeq.get(ticketId);
    return seq === undefined ? undefined : this.recordAt(this.slotOf(seq));
  }

  /** Adds a record at the end of the resolution order; a ticket already resolved keeps its place. */
  set(ticketId: string, record: ResolvedTicket): this {
    const seq = this.bySeq.get(ticketId);
    if (seq !== undefined) {
      this.write(this.slotOf(seq), ticketId, record);
      return this;
    }
    if (this.tail - this.head === this.capacity) this.grow();
    const slot = this.slotOf(this.tail);
    this.write(slot, ticketId, record);
    this.live[slot] = 1;
    this.bySeq.set(ticketId, this.tail++);
    return this;
  }

  delete(ticketId: string): boolean {
    const seq = this.bySeq.get(ticketId);
    if (seq === undefined) return false;
    this.bySeq.delete(ticketId);
    this.live[this.slotOf(seq)] = 0;
    while (this.head < this.tail && this.live[this.headSlot] === 0) {
      // The slot is free: its ids go, so that an id that is not a UUID is not held until the slot is reused.
      this.ticketIds.forget(this.headSlot);
      this.matchIds.forget(this.headSlot);
      this.head++;
      this.headSlot = this.headSlot + 1 === this.capacity ? 0 : this.headSlot + 1;
    }
    return true;
  }

  /** Calls `fn` with each record in resolution order, until it answers false; `fn` must not change this. */
  scan(fn: (record: ResolvedTicket, ticketId: string) => boolean | undefined): void {
    for (let seq = this.head; seq < this.tail; seq++) {
      const i = this.slotOf(seq);
      if (this.live[i] === 1 && fn(this.recordAt(i), this.ticketIds.get(i)) === false) return;
    }
  }

  /** Calls `fn` with each record in resolution order; `fn` must not change this. */
  forEach(fn: (record: ResolvedTicket, ticketId: string) => void): void {
    this.scan((record, ticketId) => {
      fn(record, ticketId);
      return true;
    });
  }

  *[Symbol.iterator](): IterableIterator<[string, ResolvedTicket]> {
    const entries: [string, ResolvedTicket][] = [];
    this.forEach((record, ticketId) => {
      entries.push([ticketId, record]);
    });
    yield* entries;
  }

  /** Records the log has room for now, live and dead: under twice the most live at once when they leave in order. */
  logLength(): number {
    return this.capacity;
  }

  private recordAt(i: number): ResolvedTicket {
    return { position: this.positions[i]!, matchId: this.matchIds.get(i), resolvedAtMs: this.resolvedAtMs[i]! };
  }

  private write(i: number, ticketId: string, record: ResolvedTicket): void {
    this.ticketIds.set(i, ticketId);
    this.matchIds.set(i, record.matchId);
    this.positions[i] = record.position;
    this.resolvedAtMs[i] = record.resolvedAtMs;
  }

  private slotOf(seq: number): number {
    const slot = this.headSlot + (seq - this.head);
    return slot >= this.capacity ? slot - this.capacity : slot;
  }

  /**
   * Doubles the columns (every slot taken). The records that wrapped past the last slot are then out of order:
   * the shorter of the two runs moves, those before the head to just past the old last slot, or those from the
   * head on to the new end, so at most half the log moves, and only while it grows.
   */
  private grow(): void {
    const old = this.capacity;
    const capacity = Math.max(16, 2 * old);
    const reserved = capacity > IN_PLACE_PAST ? RESERVED_RECORDS : 0;
    this.ticketIds.grow(capacity, reserved);
    this.matchIds.grow(capacity, reserved);
    this.positions = grownColumn(this.positions, Float64Array, capacity, reserved);
    this.resolvedAtMs = grownColumn(this.resolvedAtMs, Float64Array, capacity, reserved);
    this.live = grownColumn(this.live, Uint8Array, capacity, reserved);
    this.capacity = capacity;
    if (this.headSlot === 0) return;
    const [from, to, count] =
      this.headSlot <= old - this.headSlot ? [0, old, this.headSlot] : [this.headSlot, this.headSlot + capacity - old, old - this.headSlot];
    this.ticketIds.moveRows(from, to, count);
    this.matchIds.moveRows(from, to, count);
    this.positions.copyWithin(to, from, from + count);
    this.resolvedAtMs.copyWithin(to, from, from + count);
    this.live.copyWithin(to, from, from + count);
    if (from !== 0) this.headSlot = to;
  }
}
