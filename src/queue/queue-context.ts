// What the parts of a queue's runtime share: the request path (queue-runtime.ts), the tick (tick.ts) and
// the pool rebuild (pool-rebuild.ts) each change the queue only through `apply`.
import type { Logger } from 'pino';
import type { QueueConfig } from '../config/queue-config.js';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { BackfillRequest, Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import type { PoolLayout } from '../engine/ticket-pool.js';
import type { PoolColumns } from './pool-columns.js';
import type { Applied, QueueState } from './queue-state.js';
import type { QueueRecord } from './records.js';
import type { QueueTelemetry } from './queue-telemetry.js';

export interface QueueContext {
  readonly queueId: string;
  readonly log: Logger;
  readonly state: QueueState;
  readonly columns: PoolColumns;
  /** The configuration in force (a hot reload replaces it). */
  readonly config: QueueConfig;
  /** Whether the queue takes requests and ticks (not starting, retiring or stopped). */
  readonly running: boolean;
  /** Whether this copy of the queue may propose a leader's records: tick, expire, evict (always, embedded). */
  readonly leading: boolean;
  /**
   * Proposes records for the queue's history. Each is applied in order by QueueState.apply, the pool's rows
   * follow, and the promise resolves with what each applied once their changes are durable. In the
   * embedded mode they are applied at once, in this call; a replicated queue applies them when its log
   * delivers them, on every replica alike.
   */
  propose<R extends QueueRecord>(records: readonly R[]): Promise<Applied<R['type']>[]>;
  /**
   * Makes the rows that wait while this copy follows the queue (waiting-rows.ts), in time slices: before anything
   * reads the pool whole (a tick, explain, statistics).
   */
  buildWaitingRows(): Promise<void>;
  /** A ticket whose row waits: its arrival and party size, from its bytes; undefined for any other. */
  waitingTicket(ticketId: string): { arrivalMs: number; partySize: number } | undefined;
  /** Where the queue reports what it does (metrics, the dashboard). */
  readonly telemetry: QueueTelemetry;
  /** A pooled or resolved ticket's bytes: from memory while its commit is in flight, else from the store. */
  ticketBytes(ticketId: string, position: number): Uint8Array;
  /**
   * The same bytes lent (Store.lendTicketBytes): valid until the store is next read or written, so for a
   * caller that parses them at once and keeps no view of them. Saves a copy of each ticket read.
   */
  lendTicketBytes(ticketId: string, position: number): Uint8Array;
}

export const layoutOf = (config: QueueConfig): PoolLayout => ({
  filters: config.engine.attribute_filters,
  rulesetIds: config.rulesets.map((r) => r.id),
  defaultLatencyMs: config.engine.default_latency_ms,
  reservedRows: config.limits.max_pool_tickets,
});

export const createdAtMs = (item: Pick<Ticket | BackfillRequest, 'createdAt'>) =>
  item.createdAt ? timestampDate(item.createdAt).getTime() : Date.now();
