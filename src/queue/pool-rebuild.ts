// Building a queue's pool columns from its stored tickets: at start, and after a hot reload (new host keys,
// filters or rulesets mean new columns). Rows are built in time slices while requests are served; the
// engine waits until the pool is full. When the configuration changed what the queue admits, each ticket
// is checked on the way in, and what no longer fits leaves with its outcome (a `tickets.evict` record per
// slice), so a large pool is checked without holding the event loop and the engine never runs on a ticket
// the configuration refuses.
import { randomUUID } from 'node:crypto';
import type { QueueConfig } from '../config/queue-config.js';
import { parseTicketEngineInput } from '../engine/engine-input.js';
import { poolFieldsOf } from '../store/ticket-encoding.js';
import type { TicketPool } from '../engine/ticket-pool.js';
import { backfillFate, ticketFate } from './admission.js';
import { createdAtMs, layoutOf, type QueueContext } from './queue-context.js';
import type { BackfillAt, Eviction, TicketAt } from './records.js';
import { timeSliced } from './time-slices.js';
import type { ArrivalOrder } from './queue-snapshot.js';

type TicketEviction = TicketAt & { eviction: Eviction };

/**
 * Rows a rebuilt pool has room for: a quarter more than it holds. A pool built exactly full doubled its
 * columns at the first CreateTicket after a restart, copying every row on the event loop: a 107 ms pause at
 * 1M tickets (bench/RESULTS.md, thirteenth session). Columns now grow in place within the queue's
 * reservation (src/engine/growable-column.ts); the spare quarter still spares a pool past it that copy, and
 * its pages are committed only as rows are written.
 */
export function rebuiltCapacity(tickets: number): number {
  return Math.max(1024, Math.ceil(tickets * 1.25));
}

export class PoolRebuild {
  /** A hot reload changed what the queue admits, and no rebuild has checked every ticket since. */
  private admissionPending = false;

  constructor(private readonly q: QueueContext) {}

  /** Marks that `next` admits differently from `previous` (limits, rulesets, team sizes). */
  noteReload(previous: QueueConfig, next: QueueConfig): void {
    // The pool's size limit is not one: a lowered max_pool_tickets removes nothing.
    const admission = (c: QueueConfig) =>
      JSON.stringify([c.rulesets.map((r) => [r.id, r.team_size]), c.limits.max_engine_input_bytes, c.limits.max_metadata_bytes]);
    // Stays set until a rebuild checks every ticket: a reload that replaces an unfinished rebuild checks too.
    if (admission(previous) !== admission(next)) this.admissionPending = true;
  }

  get checksAdmission(): boolean {
    return this.admissionPending;
  }

  /**
   * Replaces the pool with a new one for the current configuration and builds the rows of `tickets` into it
   * in time slices, reading each one's bytes from the store. A ticket that left the pool meanwhile is
   * skipped, one that arrives meanwhile goes straight in, and when another rebuild replaces this pool the
   * rest is left to it. With `admit`, each ticket is first checked against the configuration.
   */
  async fill(tickets: ArrivalOrder, done: string, admitWanted: boolean): Promise<void> {
    const { q } = this;
    // Evictions are a leader's records: a replica that does not act for the queue builds rows only.
    const admit = admitWanted && q.leading;
    const pool = q.columns.replace(layoutOf(q.config), rebuiltCapacity(tickets.length));
    const startedMs = Date.now();
    let evictions: TicketEviction[] = [];
    let evicted = 0;
    // A slice's misfits leave together, committed before the next slice starts.
    const commitEvictions = async () => {
      const slice = evictions;
      evictions = [];
      evicted += await this.evict(slice);
    };
    try {
      await timeSliced(
        tickets.length,
        (i) => {
          if (q.columns.pool !== pool || !q.running) return false;
          const ticket = { ticketId: tickets.ticketId(i), position: tickets.position(i) };
          if (q.state.isActiveAt(ticket)) this.insertStored(pool, ticket, admit ? evictions : undefined);
        },
        admit ? commitEvictions : undefined,
      );
    } catch (err) {
      // A ticket whose record cannot be read: the engine runs on the rows built so far rather than never.
      q.log.error({ queue: q.queueId, err }, 'pool rebuild stopped early: a stored ticket could not be read');
      // What the interrupted slice already found still leaves the pool, with its outcomes.
      await commitEvictions();
    }
    if (!q.columns.filled(pool)) return;
    if (admit) this.admissionPending = false;
    if (evicted > 0) {
      q.log.info(
        { queue: q.queueId, removed: evicted, tickets: q.state.active.size },
        'configuration change: tickets that no longer fit left the pool',
      );
    }
    if (tickets.length > 0) q.log.info({ queue: q.queueId, tickets: tickets.length, ms: Date.now() - startedMs }, done);
  }

  /**
   * Checks every active ticket against this copy's configuration, without rebuilding the pool, and
   * proposes the removal of those it no longer admits (a slice's misfits in one record): what a replica
   * does on taking the lead of a queue, since it may run another version of the queue's file than the
   * leader before it (a rollout), whose file governed what was admitted until then.
   */
  async evictMisfits(done: string): Promise<void> {
    const { q } = this;
    const tickets = q.state.activeInArrivalOrder();
    let evictions: TicketEviction[] = [];
    let evicted = 0;
    const commit = async () => {
      const slice = evictions;
      evictions = [];
      evicted += await this.evict(slice);
    };
    await timeSliced(
      tickets.length,
      (i) => {
        if (!q.running || !q.leading) return false;
        const { ticketId, position } = tickets[i]!;
        if (!q.state.isActiveAt(tickets[i]!)) return;
        const ticket = poolFieldsOf(q.lendTicketBytes(ticketId, position));
        let players: number;
        try {
          players = parseTicketEngineInput(ticket.engineInput, ticketId, 'engine_input').playerIds.length;
        } catch {
          return; // as a rebuild does: it stays stored, and the rebuild said so
        }
        const fate = ticketFate(q.config, ticket, players);
        if (fate.kind !== 'keep') evictions.push({ ticketId, position, eviction: fate });
      },
      commit,
    );
    if (evicted > 0) q.log.info({ queue: q.queueId, removed: evicted, tickets: q.state.active.size }, done);
  }

  /** Backfill requests the configuration no longer admits leave at once (there are few of them). */
  evictMisfitBackfills(): Promise<void> | undefined {
    const { q } = this;
    const evictions: (BackfillAt & { eviction: Eviction })[] = [];
    for (const [backfillId, { request, version }] of q.state.backfills.entries()) {
      const fate = backfillFate(q.config, request);
      if (fate.kind !== 'keep') evictions.push({ backfillId, version, eviction: fate });
    }
    if (evictions.length === 0 || !q.leading) return undefined;
    const proposed = q.propose([
      { type: 'backfills.evict', evictions, atMs: Date.now(), operationId: randomUUID(), chunkSize: q.config.outcomes.batch_chunk_size },
    ]);
    q.log.info(
      { queue: q.queueId, backfills: q.state.backfills.size },
      'configuration change: backfill requests that no longer fit left the pool',
    );
    return proposed.then(
      () => undefined,
      (err: unknown) =>
        q.log.warn({ queue: q.queueId, err }, 'backfill requests that no longer fit were not removed: their records were not appended'),
    );
  }

  /** Proposes the removal of tickets that no longer fit (one record); answers how many left. */
  private async evict(evictions: TicketEviction[]): Promise<number> {
    const { q } = this;
    if (evictions.length === 0) return 0;
    try {
      const [applied] = await q.propose([
        { type: 'tickets.evict', evictions, atMs: Date.now(), operationId: randomUUID(), chunkSize: q.config.outcomes.batch_chunk_size },
      ]);
      // No result when a replicated log skipped the entry (a new leader had claimed the queue).
      return applied?.result.evicted ?? 0;
    } catch (err) {
      q.log.warn({ queue: q.queueId, err }, 'tickets that no longer fit were not removed: their records were not appended');
      return 0;
    }
  }

  /** A stored ticket's row, into `pool`; with `evictions`, only if the configuration still admits it. */
  private insertStored(pool: TicketPool, { ticketId, position }: TicketAt, evictions: TicketEviction[] | undefined): void {
    const { q } = this;
    const ticket = poolFieldsOf(q.lendTicketBytes(ticketId, position));
    try {
      const input = parseTicketEngineInput(ticket.engineInput, ticketId, 'engine_input');
      if (evictions) {
        const fate = ticketFate(q.config, ticket, input.playerIds.length);
        if (fate.kind !== 'keep') {
          evictions.push({ ticketId, position, eviction: fate });
          return;
        }
      }
      pool.insert(ticketId, pool.prepare(input, ticket.rulesetIds, createdAtMs(ticket)));
    } catch (err) {
      q.log.error(
        { queue: q.queueId, ticket: ticketId, err: (err as Error).message },
        'ticket no longer fits the queue configuration; it stays stored but cannot match',
      );
    }
  }
}
