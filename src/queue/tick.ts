// A queue's tick: expiry, then backfill, then the engine over the pool's columns, and each formed match
// committed as a `match.commit` record. The engine runs on another thread while requests go on; a match
// holding a ticket that left the pool since the tick began is not proposed, and one whose ticket left
// between its proposal and its commit is void when applied (queue-state.ts), so a ticket is never matched
// after a successful cancel. Results are resolved in time slices (time-slices.ts).
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { toBinary } from '@bufbuild/protobuf';
import type { QueueConfig } from '../config/queue-config.js';
import { EngineOutputSchema } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { playerIdsOf } from '../engine/engine-input.js';
import { buildEngineOutput } from '../engine/engine-output.js';
import { matchQuality, type MatchQuality } from '../engine/match-quality.js';
import type { PoolKeys, PoolRow, TicketPool } from '../engine/ticket-pool.js';
import type { EngineBackfillRequest, EngineMatch, TickResult, TickRunner } from '../engine/tick-runner.js';
import { engineInputOf } from '../store/ticket-encoding.js';
import type { OpenBackfill } from './backfill-book.js';
import { createdAtMs, type QueueContext } from './queue-context.js';
import type { Applied } from './queue-state.js';
import type { RuleRejections } from './queue-telemetry.js';
import type { QueueRecord, RecordOf, TicketAt } from './records.js';
import { timeSliced } from './time-slices.js';

/** What a tick reports (queue-telemetry.ts TickFacts), gathered as it runs. */
interface TickMeasure {
  started: number;
  /** The time the engine ran at (epoch ms). */
  atMs: number;
  engineMs: number;
  ticketsExamined: number;
  rejections: RuleRejections[];
}

/** A match of a tick, with its rows already turned into tickets (and measured) where the engine saw them. */
interface FormedMatch {
  match: EngineMatch;
  /** What its indices stand for (TickResult.keys). */
  keys: PoolKeys;
  tickets: TicketAt[];
  quality: MatchQuality;
}

/** A formed match's record, and what its telemetry reports once the record commits. */
interface MatchCommit {
  record: RecordOf<'match.commit'>;
  quality: MatchQuality;
  teams: string[][];
  host: string | undefined;
}

/**
 * The running match's host, as the engine chose it for a match: the host of the pool with the lowest
 * worst-player latency among its current players (unmeasured counts as the default). Unknown without
 * measurements.
 */
function matchHost(row: PoolRow, pool: TicketPool, defaultLatencyMs: number): number | undefined {
  if (row.latencies.length === 0) return undefined;
  const measured = new Map(row.latencies);
  let best: number | undefined;
  let bestMs = Infinity;
  for (let h = 0; h < pool.hostCount; h++) {
    if (!pool.isHost(h)) continue;
    const ms = measured.get(h) ?? defaultLatencyMs;
    if (ms < bestMs) [best, bestMs] = [h, ms];
  }
  return best;
}

export class Ticker {
  /** From the engine's start until every formed match is committed: tickets that left the pool meanwhile. */
  private inProgress = false;
  private readonly leftDuringTick = new Set<string>();
  private seed = 1;

  constructor(
    private readonly q: QueueContext,
    private readonly runner: TickRunner,
  ) {}

  /** Tickets that leave the pool while a tick is in progress are never proposed in its matches. */
  noteLeft(ticketIds: readonly string[]): void {
    if (this.inProgress) for (const id of ticketIds) this.leftDuringTick.add(id);
  }

  /** One tick, by the copy of the queue that acts for it (the leader); a failed proposal is logged, not thrown. */
  async tick(): Promise<void> {
    if (!this.q.leading) return;
    try {
      await this.run();
    } catch (err) {
      this.q.log.warn({ queue: this.q.queueId, err }, 'tick failed: its records were not all appended');
    } finally {
      this.inProgress = false;
      this.leftDuringTick.clear();
    }
  }

  private async run(): Promise<void> {
    const { q } = this;
    // A copy that took the lead may hold rows it did not make while following: expiry and the engine read them all.
    await q.buildWaitingRows();
    // Made in slices: another replica may lead the queue by now.
    if (!q.leading) return;
    this.expire(Date.now());
    if (q.columns.pool.count === 0 || !q.running || !q.columns.ready) return;
    // What the engine's indices refer to (host keys, attribute values, rulesets), even if a hot reload
    // replaces the pool or the config before every result is committed.
    const { pool } = q.columns;
    const { config } = q;
    const measure: TickMeasure = { started: performance.now(), atMs: 0, engineMs: 0, ticketsExamined: 0, rejections: [] };
    this.inProgress = true;
    // Backfill first: a running match's open slots go ahead of new matches.
    if (q.state.backfills.size > 0) await this.fillBackfills(pool, config);
    const formed =
      q.columns.pool === pool
        ? await q.columns.withEngine(
            () => this.runEngine(pool, config, measure),
            (result) => {
              // Why each ticket still waits, kept with its row while the rows are those the engine read.
              pool.recordRefusals(result.refusals, measure.atMs);
              return this.formedMatches(result, pool, config);
            },
          )
        : undefined;
    // A slice's matches are encoded in it and proposed together at its end: one commit of the store, or
    // one entry of a replicated log (an entry per match made every replica read, decode and commit each
    // on its own). The next slice waits until that slice's commits are durable: the tick's writes then reach
    // the disk a slice at a time, and a CreateTicket never waits behind more than one slice's flush (a whole
    // tick's outcomes in one flush took ~20 ms). A proposal that fails (a replication log without a leader)
    // fails the tick, rather than rejecting unobserved and ending the process.
    if (formed) {
      const slice: MatchCommit[] = [];
      await timeSliced(
        formed.length,
        (i) => {
          const commit = this.matchCommit(formed[i]!, config);
          if (commit) slice.push(commit);
        },
        () => this.commitMatches(slice.splice(0)),
      );
      const { engineMs, ticketsExamined, rejections } = measure;
      q.telemetry.tick({ queueId: q.queueId, tickMs: performance.now() - measure.started, engineMs, ticketsExamined, rejections });
    }
    const ms = Math.round(performance.now() - measure.started);
    q.log.debug({ queue: q.queueId, matches: formed?.length ?? 0, pool: q.columns.pool.count, ms }, 'tick');
  }

  /** The engine's run over the pool, timed, with its rule rejections read while its result is valid. */
  private async runEngine(pool: TicketPool, config: QueueConfig, measure: TickMeasure): Promise<TickResult> {
    measure.ticketsExamined = pool.count;
    const started = performance.now();
    measure.atMs = Date.now();
    const result = await this.runner.run(pool, measure.atMs, this.seed++);
    measure.engineMs = performance.now() - started;
    config.rulesets.forEach(({ id: rulesetId }, r) => {
      for (const [rule, count] of Object.entries(result.rejections(r))) if (count > 0) measure.rejections.push({ rulesetId, rule, count });
    });
    return result;
  }

  /**
   * Tickets older than ticket_ttl_secs, backfill requests older than backfill_ttl_secs, and resolved
   * tickets past terminal_retention_ttl_secs, all in one commit. Runs between engine runs, when the pool's
   * columns hold exactly the active tickets, so the tickets' ages come from the arrival column (read only
   * when some ticket may be old enough: TicketPool.arrivedBefore).
   */
  private expire(nowMs: number): void {
    const { q } = this;
    const { config, state } = q;
    const chunkSize = config.outcomes.batch_chunk_size;
    const records: QueueRecord[] = [];

    const retentionMs = config.terminal_retention_ttl_secs * 1000;
    const forgotten: { ticketId: string; matchId: string }[] = [];
    // In resolution order: the first still kept ends the scan, the rest are younger.
    state.resolved.scan((resolved, ticketId) => {
      if (nowMs - resolved.resolvedAtMs <= retentionMs) return false;
      forgotten.push({ ticketId, matchId: resolved.matchId });
      return true;
    });
    if (forgotten.length > 0) records.push({ type: 'resolved.forget', tickets: forgotten });

    const { pool } = q.columns;
    const expired: TicketAt[] = [];
    for (const r of pool.arrivedBefore(nowMs - config.ticket_ttl_secs * 1000)) {
      const ticketId = pool.idAt(r);
      const position = state.active.get(ticketId);
      if (position !== undefined) expired.push({ ticketId, position });
    }
    if (expired.length > 0) records.push({ type: 'tickets.expire', tickets: expired, atMs: nowMs, operationId: randomUUID(), chunkSize });

    const oldestBackfill = nowMs - config.backfill_ttl_secs * 1000;
    const expiredBackfills = [...state.backfills.entries()]
      .filter(([, b]) => createdAtMs(b.request) < oldestBackfill)
      .map(([backfillId, b]) => ({ backfillId, version: b.version }));
    if (expiredBackfills.length > 0) {
      records.push({ type: 'backfills.expire', backfills: expiredBackfills, atMs: nowMs, operationId: randomUUID(), chunkSize });
    }

    if (records.length > 0) this.proposeInBackground(records);
  }

  /** Records whose answer the tick does not wait for (expiry, fills); their failure is only logged. */
  private proposeInBackground<R extends QueueRecord>(records: R[], onApplied?: (applied: Applied<R['type']>[]) => void): void {
    this.q
      .propose(records)
      .then(onApplied)
      .catch((err: unknown) => this.q.log.warn({ queue: this.q.queueId, err }, 'records of the tick were not appended'));
  }

  /** A tick's matches with their rows turned into tickets, in time slices (the columns stay frozen). */
  private async formedMatches(result: TickResult, pool: TicketPool, config: QueueConfig): Promise<FormedMatch[]> {
    const formed: FormedMatch[] = [];
    const { state, log, queueId } = this.q;
    const nowMs = Date.now();
    await timeSliced(result.count, (m) => {
      const match = result.match(m);
      const ids = Array.from(match.rows, (row) => pool.idAt(row));
      if (ids.some((id) => this.leftDuringTick.has(id) || !state.active.has(id))) {
        log.debug({ queue: queueId, tickets: ids }, 'match dropped: one of its tickets left the pool during the tick');
        return;
      }
      formed.push({
        match,
        tickets: ids.map((ticketId) => ({ ticketId, position: state.active.get(ticketId)! })),
        keys: result.keys,
        quality: matchQuality(match, pool, config, nowMs),
      });
    });
    return formed;
  }

  /** A formed match's `match.commit` record, or undefined when it is void (a ticket left the pool). */
  private matchCommit({ match, keys, tickets, quality }: FormedMatch, config: QueueConfig): MatchCommit | undefined {
    const { q } = this;
    if (!tickets.every((t) => q.state.isActiveAt(t))) {
      q.log.debug(
        { queue: q.queueId, tickets: tickets.map((t) => t.ticketId) },
        'match dropped: one of its tickets left the pool during the tick',
      );
      return undefined;
    }
    const players = tickets.map((t) => playerIdsOf(engineInputOf(q.lendTicketBytes(t.ticketId, t.position)), t.ticketId));
    const output = buildEngineOutput(match, players, keys, config);
    const record: RecordOf<'match.commit'> = {
      type: 'match.commit',
      matchId: randomUUID(),
      tickets,
      rulesetId: config.rulesets[match.rulesetIndex]!.id,
      engineOutput: toBinary(EngineOutputSchema, output),
      atMs: Date.now(),
    };
    return { record, quality, teams: output.teams.map((t) => t.playerIds), host: output.host?.preferred };
  }

  /** Proposes a slice's match records together; answers once they are durable. */
  private async commitMatches(commits: MatchCommit[]): Promise<void> {
    if (commits.length === 0) return;
    const { q } = this;
    const applied = await q.propose(commits.map((c) => c.record));
    for (const [i, { record, quality, teams, host }] of commits.entries()) {
      // No result where a replicated log skipped the entry (a new leader had claimed the queue).
      if (!applied[i]?.result.committed) continue;
      const { matchId, rulesetId, atMs } = record;
      const { waitsMs, players, skillSpread, teamImbalance } = quality;
      q.telemetry.matchFormed({ queueId: q.queueId, rulesetId, matchId, atMs, waitsMs, players, skillSpread, teamImbalance, host, teams });
    }
  }

  /**
   * Fills open backfill requests from the pool: each filled request leaves with a backfill.created
   * outcome carrying its assigned tickets, which are resolved into the request's running match.
   */
  private async fillBackfills(pool: TicketPool, config: QueueConfig): Promise<void> {
    const { q } = this;
    // A request's row holds its values and hosts in the pool's tables for this run only. One whose values do
    // not fit (the tables are full of the tickets' values) waits for room rather than failing the tick.
    const open: [string, OpenBackfill][] = [];
    const rows: PoolRow[] = [];
    for (const entry of q.state.backfills.entries()) {
      try {
        rows.push(pool.prepare(entry[1].input, [], createdAtMs(entry[1].request)));
        open.push(entry);
      } catch (err) {
        q.log.debug({ queue: q.queueId, backfill: entry[0], err: (err as Error).message }, 'backfill request skipped this tick');
      }
    }
    try {
      await this.fillFrom(pool, config, open, rows);
    } finally {
      for (const row of rows) pool.release(row);
    }
  }

  /** Runs the backfill over the open requests (with their rows) and proposes a fill for each one filled. */
  private async fillFrom(pool: TicketPool, config: QueueConfig, open: [string, OpenBackfill][], rows: PoolRow[]): Promise<void> {
    const { q } = this;
    const requests = open.map(([, { request }], i): EngineBackfillRequest => {
      const row = rows[i]!;
      return {
        rulesetIndex: config.rulesets.findIndex((r) => r.id === request.rulesetId),
        slots: request.slotsRequested,
        skill: row.mmrMean,
        host: matchHost(row, pool, config.engine.default_latency_ms),
        arrivalMs: row.arrivalMs,
        attrValues: row.attrValues,
        attrAccepts: row.attrAccepts,
      };
    });
    if (requests.some((r) => r.rulesetIndex < 0)) return; // a reload removed a ruleset: its requests are being orphaned
    const fills = await q.columns.withEngine(
      () => this.runner.backfill(pool, requests, Date.now()),
      (perRequest) =>
        perRequest.map((assigned) => ({
          ids: assigned.map((row) => pool.idAt(row)),
          players: assigned.reduce((sum, row) => sum + pool.partySize[row]!, 0),
        })),
    );
    const records: RecordOf<'backfill.fill'>[] = [];
    const filled: { rulesetId: string; players: number }[] = [];
    const atMs = Date.now();
    fills?.forEach(({ ids, players }, i) => {
      if (ids.length === 0 || ids.some((id) => this.leftDuringTick.has(id) || !q.state.active.has(id))) return;
      const [backfillId, { version, request }] = open[i]!;
      const tickets = ids.map((ticketId) => ({ ticketId, position: q.state.active.get(ticketId)! }));
      records.push({ type: 'backfill.fill', backfill: { backfillId, version }, fillId: randomUUID(), tickets, atMs });
      filled.push({ rulesetId: request.rulesetId, players });
    });
    if (records.length === 0) return;
    this.proposeInBackground(records, (applied) =>
      applied.forEach((a, i) => {
        if (a.result.committed) q.telemetry.backfillFilled(q.queueId, filled[i]!.rulesetId, filled[i]!.players);
      }),
    );
  }
}
