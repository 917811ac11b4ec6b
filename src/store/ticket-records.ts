// One queue's ticket records in the memory store, by position: records put one at a time in a Map, and the
// runs a restore put at once (store.ts TicketRun) kept as given. A replica restoring a million tickets made a
// million records here (a Map entry and an object each: half a second, and as much again for the collector
// to move them to the old generation); a run costs one byte per ticket, for the ones that left since.
import type { StoredTicket, TicketRun } from './store.js';

interface HeldRun {
  run: TicketRun;
  /** 1 where the run's ticket left (deleted) or was written over by a record of the Map. */
  gone: Uint8Array;
  /** How many are not gone. */
  live: number;
}

export class TicketRecords {
  /** Records put one at a time (and every change to a run's ticket): they win over the runs. */
  private readonly records = new Map<number, StoredTicket>();
  private readonly runs: HeldRun[] = [];

  constructor(private readonly queueId: string) {}

  get size(): number {
    let n = this.records.size;
    for (const held of this.runs) n += held.live;
    return n;
  }

  get(position: number): StoredTicket | undefined {
    const record = this.records.get(position);
    if (record !== undefined || this.runs.length === 0) return record;
    const found = this.inRuns(position);
    if (found === undefined) return undefined;
    const { run } = found.held;
    return { queueId: this.queueId, ticketId: run.ticketId(found.i), position, ticket: run.ticket(found.i), state: 'active' };
  }

  /** The bytes of `get(position)`'s ticket, without making its record (or its id's string, for a run's). */
  ticketBytes(position: number): Uint8Array | undefined {
    const record = this.records.get(position);
    if (record !== undefined || this.runs.length === 0) return record?.ticket;
    const found = this.inRuns(position);
    return found && found.held.run.ticket(found.i);
  }

  set(record: StoredTicket): void {
    this.forgetInRuns(record.position);
    this.records.set(record.position, record);
  }

  delete(position: number): void {
    this.records.delete(position);
    this.forgetInRuns(position);
  }

  /** Keeps a run of tickets the store does not hold yet (their positions are not checked against the Map). */
  putRun(run: TicketRun): void {
    if (run.length > 0) this.runs.push({ run, gone: new Uint8Array(run.length), live: run.length });
  }

  /** Every record, in no particular order. */
  *values(): IterableIterator<StoredTicket> {
    yield* this.records.values();
    for (const { run, gone } of this.runs) {
      for (let i = 0; i < run.length; i++) {
        if (gone[i] === 0)
          yield { queueId: this.queueId, ticketId: run.ticketId(i), position: run.position(i), ticket: run.ticket(i), state: 'active' };
      }
    }
  }

  /** The run holding a live ticket at `position`, and its index there (binary search: a run ascends). */
  private inRuns(position: number): { held: HeldRun; i: number } | undefined {
    for (const held of this.runs) {
      const { run } = held;
      // New tickets come after every restored one: most lookups end here.
      if (position > run.position(run.length - 1) || position < run.position(0)) continue;
      let lo = 0;
      let hi = run.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (run.position(mid) < position) lo = mid + 1;
        else hi = mid;
      }
      if (lo < run.length && run.position(lo) === position && held.gone[lo] === 0) return { held, i: lo };
    }
    return undefined;
  }

  private forgetInRuns(position: number): void {
    if (this.runs.length === 0) return;
    const found = this.inRuns(position);
    if (found === undefined) return;
    found.held.gone[found.i] = 1;
    found.held.live--;
    if (found.held.live === 0) this.runs.splice(this.runs.indexOf(found.held), 1);
  }
}
