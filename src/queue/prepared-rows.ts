// Rows that requests prepared (and so checked against the pool's limits) for records not yet applied, by
// ticket id. Each holds its values and host keys in the pool's tables until the record's apply inserts it
// or the request is answered without that (src/engine/ticket-pool.ts: prepare, release).
import type { PoolRow, TicketPool } from '../engine/ticket-pool.js';

export interface PreparedRow {
  pool: TicketPool;
  row: PoolRow;
}

export class PreparedRows {
  private readonly rows = new Map<string, PreparedRow>();

  /** Rows waiting for their record: tickets this copy proposed and has not applied yet. */
  get size(): number {
    return this.rows.size;
  }

  /** Keeps `row` for the ticket's record; a row a concurrent request prepared for it is let go (the record uses this one). */
  add(ticketId: string, pool: TicketPool, row: PoolRow): void {
    const earlier = this.rows.get(ticketId);
    if (earlier) earlier.pool.release(earlier.row);
    this.rows.set(ticketId, { pool, row });
  }

  has(ticketId: string): boolean {
    return this.rows.has(ticketId);
  }

  /** The record's apply takes the ticket's row into the pool: it no longer waits here. */
  take(ticketId: string): PreparedRow | undefined {
    const prepared = this.rows.get(ticketId);
    this.rows.delete(ticketId);
    return prepared;
  }

  /**
   * The request is answered: its row, unless the apply took it or another request for the ticket prepared
   * anew, lets go of its values.
   */
  drop(ticketId: string, row: PoolRow): void {
    const prepared = this.rows.get(ticketId);
    if (prepared?.row !== row) return;
    this.rows.delete(ticketId);
    prepared.pool.release(row);
  }
}
