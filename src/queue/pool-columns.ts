// The engine's view of a queue's pool: the columns (TicketPool) the native engine reads on another thread.
// While the engine reads them, changes to them wait and run, in order and in time slices, as soon as its
// results' rows are turned into ticket ids; a rebuilt pool (restart, hot reload) is filled in slices and the
// engine does not run on it until it is full.
import type { Logger } from 'pino';
import { TicketPool, type PoolLayout, type PoolRow } from '../engine/ticket-pool.js';
import { WORK_SLICE_MS } from './time-slices.js';

export class PoolColumns {
  pool: TicketPool;
  /** The pool whose rows are still being built (pool-rebuild.ts): the engine waits for it. */
  filling: TicketPool | undefined;
  /** The engine is reading the columns: changes to them wait in afterEngine. */
  private engineRunning = false;
  private readonly afterEngine: (() => void)[] = [];
  /** Rows inserted while the engine runs, waiting in afterEngine, by ticket id. */
  private readonly waitingRows = new Map<string, { pool: TicketPool; row: PoolRow }>();

  constructor(
    layout: PoolLayout,
    private readonly log: Logger,
    private readonly queueId: string,
  ) {
    this.pool = new TicketPool(layout);
  }

  /** A new, empty pool for `layout` that the engine waits for until `filled`. */
  replace(layout: PoolLayout, capacity: number): TicketPool {
    this.pool = new TicketPool(layout, capacity);
    this.filling = this.pool;
    return this.pool;
  }

  filled(pool: TicketPool): boolean {
    if (this.filling !== pool) return false;
    this.filling = undefined;
    return true;
  }

  /** Whether the engine may run on the current pool (it is not being rebuilt). */
  get ready(): boolean {
    return this.filling !== this.pool;
  }

  /** Runs `change` on the columns now, or, in order, after the engine run that is reading them. */
  withPool(change: () => void): void {
    if (this.engineRunning) this.afterEngine.push(change);
    else change();
  }

  /**
   * A row prepared against `pool` goes in once the engine is not reading it, unless the pool was replaced
   * meanwhile (a rebuild reads the ticket from the state instead) or the ticket left again (`stillActive`):
   * then it lets go of the values it holds.
   */
  insert(pool: TicketPool, ticketId: string, row: PoolRow, stillActive: () => boolean): void {
    if (this.engineRunning) this.waitingRows.set(ticketId, { pool, row });
    this.withPool(() => {
      if (this.waitingRows.get(ticketId)?.row === row) this.waitingRows.delete(ticketId);
      // Let go already: its ticket left while the row waited (`remove`).
      if (!row.holds) return;
      if (this.pool === pool && stillActive()) pool.insert(ticketId, row);
      else pool.release(row);
    });
  }

  /**
   * The tickets left: their strings are let go at once, so that the tables follow the records' order (a
   * ticket applied next finds the room they freed); their rows leave once the engine is not reading them
   * (at once when it is not running, letting go then: the usual case pays no second lookup).
   */
  remove(ticketIds: readonly string[]): void {
    if (this.engineRunning) {
      for (const id of ticketIds) {
        // A row still waiting to go in lets go as a row in the pool does.
        const waiting = this.waitingRows.get(id);
        if (waiting) {
          this.waitingRows.delete(id);
          waiting.pool.release(waiting.row);
        } else this.pool.releaseValues(id);
      }
    }
    this.withPool(() => {
      for (const id of ticketIds) this.pool.remove(id);
    });
  }

  /**
   * Runs the engine over the columns; changes to them wait until its row indices are turned into ticket
   * ids (by `toIds`), since those changes move rows. A failed run leaves the pool as it was.
   */
  async withEngine<R, T>(run: () => Promise<R>, toIds: (result: R) => T | Promise<T>): Promise<T | undefined> {
    this.engineRunning = true;
    let result: T | undefined;
    try {
      result = await toIds(await run());
    } catch (err) {
      this.log.error({ queue: this.queueId, err }, 'engine run failed; the pool is unchanged');
    }
    try {
      await this.applyHeld();
    } finally {
      this.engineRunning = false;
      this.afterEngine.length = 0;
    }
    return result;
  }

  /**
   * The changes held while the engine ran, in order, yielding to the event loop every slice: a tick over a
   * million tickets holds the rows of a few thousand CreateTickets, and putting them in at once held the
   * loop for 50 to 100 ms (bench/RESULTS.md, twenty-third session). Changes made meanwhile queue behind them.
   */
  private async applyHeld(): Promise<void> {
    for (let next = 0; next < this.afterEngine.length; ) {
      if (next > 0) await new Promise((resolve) => setImmediate(resolve));
      const until = performance.now() + WORK_SLICE_MS;
      do this.afterEngine[next++]!();
      while (next < this.afterEngine.length && performance.now() < until);
    }
  }
}
