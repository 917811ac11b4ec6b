// The pool rows a replica that follows a queue has not made yet. A follower ticks nothing on its pool: it
// keeps the rows for explain, statistics and the day it takes the lead. Most tickets are matched soon after
// they arrive, and a row made at once for such a ticket was made to be thrown away; making rows was the
// largest part of a follower's apply in its profile (bench/RESULTS.md, "Thirtieth session"). So a follower's
// rows wait here, oldest first, and are made when more than `most` wait, when something reads the pool
// (`buildAllInSlices`: explain, statistics, the first tick of a replica that took the lead, a request bringing a
// value the pool's tables lack), and never for a ticket that left first.
import type { TicketAt } from './records.js';
import { WORK_SLICE_MS } from './time-slices.js';

/**
 * At most this many rows wait. A follower whose pool stays under it makes no row while it follows (a replica only
 * following spent about 40% less a request than with 4,096: bench/RESULTS.md, thirty-second session); making them
 * all takes up to about a second (17 to 35 us each in the follower bench's closing reads), in time slices.
 */
export const MOST_WAITING_ROWS = 32_768;

export class WaitingRows {
  /** In the order their records activated them; entries whose ticket left or came back are skipped. */
  private order: TicketAt[] = [];
  private next = 0;
  /** Ticket id -> the position its waiting row is for. */
  private readonly positions = new Map<string, number>();
  /** A pass making every row in slices, while one runs. */
  private building: Promise<void> | undefined;

  constructor(
    /** Makes the row of a ticket that is still active at `at` (pool-rows.ts `PoolRows.insert`). */
    private readonly build: (at: TicketAt) => void,
    private readonly most = MOST_WAITING_ROWS,
  ) {}

  get size(): number {
    return this.positions.size;
  }

  /** The position the ticket's waiting row is for, if one waits. */
  positionOf(ticketId: string): number | undefined {
    return this.positions.get(ticketId);
  }

  add(at: TicketAt): void {
    this.order.push(at);
    this.positions.set(at.ticketId, at.position);
    while (this.positions.size > this.most) this.buildNext();
  }

  /** The ticket left the pool: answers whether its row was waiting (then there is none to remove). */
  drop(ticketId: string): boolean {
    return this.positions.delete(ticketId);
  }

  /** Makes every waiting row at once: only where the caller cannot wait (the ones added since a sliced pass). */
  buildAll(): void {
    while (this.positions.size > 0) this.buildNext();
    this.order = [];
    this.next = 0;
  }

  /**
   * Makes every waiting row, in time slices that yield to the event loop (requests wait at most about one slice
   * for it); callers meanwhile share the pass. Rows added while it runs are made by it too.
   */
  buildAllInSlices(): Promise<void> {
    this.building ??= this.buildInSlices().finally(() => (this.building = undefined));
    return this.building;
  }

  private async buildInSlices(): Promise<void> {
    for (let first = true; this.positions.size > 0; first = false) {
      if (!first) await new Promise((resolve) => setImmediate(resolve));
      const until = performance.now() + WORK_SLICE_MS;
      do this.buildNext();
      while (this.positions.size > 0 && performance.now() < until);
    }
    this.order = [];
    this.next = 0;
  }

  /** Forgets every waiting row: the pool is being rebuilt from every active ticket. */
  clear(): void {
    this.positions.clear();
    this.order = [];
    this.next = 0;
  }

  private buildNext(): void {
    const at = this.order[this.next++]!;
    if (this.positions.get(at.ticketId) === at.position) {
      this.positions.delete(at.ticketId);
      this.build(at);
    }
    // Let go of the entries passed, now and then, rather than shift the array for each.
    if (this.next >= 1024 && this.next * 2 >= this.order.length) {
      this.order = this.order.slice(this.next);
      this.next = 0;
    }
  }
}
