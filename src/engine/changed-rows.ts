// The rows of a pool written since the engine last read it, so that its tick updates the layout it kept
// instead of laying the pool out whole (docs/engine.md, "Incremental ticks"). TicketPool notes every row it
// writes (an insert, and the row a swap-remove moves the last one into) and hands them over when a tick
// reads the pool.
import { grownColumn } from './growable-column.js';
import type { PoolChangeArrays } from './native.js';

export class ChangedRows {
  private rows = new Uint32Array(256);
  private count = 0;
  /** The pool's row count at the last read: undefined before the first, and once the changes are not worth keeping. */
  private readCount: number | undefined;
  /** `HostColumns.rewrites` at the last read. */
  private rewritesRead = 0;

  /** Row `r` of a pool of `poolCount` rows was written. Past a quarter of the rows, a merge costs what a layout does: none are kept. */
  note(r: number, poolCount: number): void {
    if (this.readCount === undefined) return;
    if (this.count > poolCount / 4 + 64) {
      this.readCount = undefined;
      return;
    }
    if (this.count === this.rows.length) this.rows = grownColumn(this.rows, Uint32Array, this.rows.length * 2);
    this.rows[this.count++] = r;
  }

  /** Every row moved (whole columns rewritten): the next read lays the pool out whole. */
  forget(): void {
    this.readCount = undefined;
  }

  /**
   * What changed since the last call, for the engine about to read a pool of `poolCount` rows whose host
   * columns were rewritten `rewrites` times: undefined when it must lay the pool out whole (its first read,
   * whole columns rewritten, or too many rows changed). The pool counts as read from now on.
   */
  take(poolCount: number, rewrites: number): PoolChangeArrays | undefined {
    const kept = this.readCount !== undefined && rewrites === this.rewritesRead;
    const changes = kept ? { previousCount: this.readCount!, rows: this.rows.slice(0, this.count) } : undefined;
    this.readCount = poolCount;
    this.count = 0;
    this.rewritesRead = rewrites;
    return changes;
  }
}
