// A queue's resolved tickets, kept for terminal_retention_ttl_secs (600 s by default) so that ReactivateTickets
// can return them to the pool. At 3,000 matched tickets a second that is 1.8 million records: held as JS
// objects and strings they would be the largest thing every major collection marks, so they live off the JS
// heap as the active tickets do (id-map.ts): a log of records in the order they were resolved, in typed
// arrays, and an IdMap from each ticket id to its record's place in the log.
//
// A record leaves the log's front once it is forgotten (resolved.forget) or reactivated; one removed from the
// middle is marked dead and its room is taken back when the front reaches it, so the log spans at most the
// records of one retention period.
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
  /** Ticket id -> sequence number of its record; record `seq` is at index `seq - base` of the columns. */
  private readonly bySeq = new IdMap();
  private base = 0;
  /** Sequence numbers of the first record not yet taken back, and of the next record. */
  private head = 0;
  private tail = 0;
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
    return seq === undefined ? undefined : this.recordAt(seq - this.base);
  }

  /** Adds a record at the end of the resolution order; a ticket already resolved keeps its place. */
  set(ticketId: string, record: ResolvedTicket): this {
    const seq = this.bySeq.get(ticketId);
    if (seq !== undefined) {
      this.write(seq - this.base, ticketId, record);
      return this;
    }
    if (this.tail - this.base === this.capacity) this.makeRoom();
    this.write(this.tail - this.base, ticketId, record);
    this.live[this.tail - this.base] = 1;
    this.bySeq.set(ticketId, this.tail++);
    return this;
  }

  delete(ticketId: string): boolean {
    const seq = this.bySeq.get(ticketId);
    if (seq === undefined) return false;
    this.bySeq.delete(ticketId);
    this.live[seq - this.base] = 0;
    while (this.head < this.tail && this.live[this.head - this.base] === 0) this.head++;
    return true;
  }

  /** Calls `fn` with each record in resolution order, until it answers false; `fn` must not change this. */
  scan(fn: (record: ResolvedTicket, ticketId: string) => boolean | undefined): void {
    for (let seq = this.head; seq < this.tail; seq++) {
      const i = seq - this.base;
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

  /** Records the log has room for now, live and dead: under twice the live ones when they leave in order. */
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

  /** Takes back the room of the records before `head`, or doubles the columns when that is under half. */
  private makeRoom(): void {
    const taken = this.head - this.base;
    const count = this.tail - this.head;
    if (taken > 0 && 2 * count <= this.capacity) {
      this.ticketIds.dropFront(taken, this.tail - this.base);
      this.matchIds.dropFront(taken, this.tail - this.base);
      this.positions.copyWithin(0, taken, this.tail - this.base);
      this.resolvedAtMs.copyWithin(0, taken, this.tail - this.base);
      this.live.copyWithin(0, taken, this.tail - this.base);
      this.live.fill(0, count);
      this.base = this.head;
      return;
    }
    const capacity = Math.max(16, 2 * this.capacity);
    const reserved = capacity > IN_PLACE_PAST ? RESERVED_RECORDS : 0;
    this.ticketIds.grow(capacity, reserved);
    this.matchIds.grow(capacity, reserved);
    this.positions = grownColumn(this.positions, Float64Array, capacity, reserved);
    this.resolvedAtMs = grownColumn(this.resolvedAtMs, Float64Array, capacity, reserved);
    this.live = grownColumn(this.live, Uint8Array, capacity, reserved);
    this.capacity = capacity;
  }
}
