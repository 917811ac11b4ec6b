// One queue's runtime: its active pool, the tick loop, resolved tickets kept for reactivation, and backfill
// requests. Every change is applied to memory in the same synchronous step that issues its store commit.
// The store applies commits in call order, so anything later derived from the pool (a match, a removal) is
// never durable before the changes it depends on; callers are answered once their own commit is durable.
//
// While a tick runs, the native engine reads the pool's columns on another thread: changes to the columns
// wait in `afterTick` until its matches' rows are turned into ticket ids, and a match that contains a
// ticket cancelled meanwhile is dropped. Turning rows into ids, resolving matches and rebuilding a restored
// pool run in time slices (time-slices.ts), so a tick that forms many matches never holds up requests.
import { randomUUID } from 'node:crypto';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampDate, timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { Logger } from 'pino';
import {
  BackfillRequestSchema,
  BackfillSchema,
  MatchSchema,
  TicketSchema,
  type BackfillRequest,
  type Ticket,
} from '../gen/matchmaker/core/v1/resources_pb.js';
import { EngineOutputSchema } from '../gen/matchmaker/engines/standard/v1/engine_pb.js';
import { RemovalReason, type Outcome } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import type { QueueConfig } from '../config/queue-config.js';
import { failedPrecondition } from '../errors.js';
import { parseBackfillEngineInput, parseTicketEngineInput, type ParsedEngineInput } from '../engine/engine-input.js';
import { buildEngineOutput } from '../engine/engine-output.js';
import { TicketPool, type PoolLayout, type PoolRow } from '../engine/ticket-pool.js';
import { engineParams, TickRunner, type EngineBackfillRequest, type EngineMatch, type TickResult } from '../engine/tick-runner.js';
import {
  backfillCreated,
  backfillRequestOrphaned,
  backfillRequestsExpired,
  backfillRequestsRemoved,
  ticketOrphaned,
  ticketsExpired,
  ticketsRemoved,
} from '../outcomes/outcome-factory.js';
import { encodeMatchCreated, encodeOutcome } from '../outcomes/outcome-encoding.js';
import { engineInputOf } from '../store/ticket-encoding.js';
import { backfillFate, ticketFate } from './admission.js';
import { timeSliced } from './time-slices.js';
import { ShardedMap } from '../engine/sharded-map.js';
import type { Store, StoreChange, TicketRef } from '../store/store.js';

export type QueueState = 'starting' | 'running' | 'retiring' | 'retired' | 'stopped';

interface ResolvedTicket {
  position: number;
  matchId: string;
  resolvedAtMs: number;
}

/** A match of a tick, with its rows already turned into ticket ids. */
interface FormedMatch {
  match: EngineMatch;
  ids: string[];
}

interface PoolBackfill {
  request: BackfillRequest;
  input: ParsedEngineInput;
}

export interface ClearResult {
  ticketsCleared: number;
  backfillRequestsCleared: number;
}

const layoutOf = (config: QueueConfig): PoolLayout => ({
  filters: config.engine.attribute_filters,
  rulesetIds: config.rulesets.map((r) => r.id),
  defaultLatencyMs: config.engine.default_latency_ms,
});

const createdAtMs = (item: Ticket | BackfillRequest) => (item.createdAt ? timestampDate(item.createdAt).getTime() : Date.now());
/**
 * The running match's host, as the engine chose it for a match: the host with the lowest worst-player
 * latency among its current players (unmeasured counts as the default). Unknown without measurements.
 */
function matchHost(row: PoolRow, pool: TicketPool, defaultLatencyMs: number): number | undefined {
  if (row.latencies.length === 0) return undefined;
  const measured = new Map(row.latencies);
  let best: number | undefined;
  let bestMs = Infinity;
  for (let h = 0; h < pool.hostCount; h++) {
    const ms = measured.get(h) ?? defaultLatencyMs;
    if (ms < bestMs) [best, bestMs] = [h, ms];
  }
  return best;
}

const record = (outcome: Outcome): StoreChange => ({ type: 'outcome.record', outcome: encodeOutcome(outcome) });
const records = (outcomes: Outcome[]): StoreChange[] => outcomes.map(record);

/**
 * Tickets a hot reload takes out of the pool while it is rebuilt: collected in one slice, then committed
 * together (the deletes, the orphan outcomes, one removal outcome per reason) before the next slice.
 */
class Evictions {
  count = 0;
  private changes: StoreChange[] = [];
  private removed = new Map<RemovalReason, string[]>();

  constructor(private readonly queueId: string) {}

  /** `outcome`: the ticket's own (orphaned), or the reason it joins a removal outcome with. */
  add(ref: TicketRef, outcome: Outcome | RemovalReason): void {
    this.count++;
    this.changes.push({ type: 'ticket.delete', ref });
    if (typeof outcome !== 'number') this.changes.push(record(outcome));
    else if (this.removed.has(outcome)) this.removed.get(outcome)!.push(ref.ticketId);
    else this.removed.set(outcome, [ref.ticketId]);
  }

  commit(store: Store, chunk: number): Promise<void> | undefined {
    for (const [reason, ids] of this.removed) this.changes.push(...records(ticketsRemoved(this.queueId, ids, reason, chunk)));
    const changes = this.changes;
    this.changes = [];
    this.removed = new Map();
    return changes.length > 0 ? store.commit(changes) : undefined;
  }
}

export class QueueRuntime {
  state: QueueState = 'starting';
  /**
   * Active tickets: id -> position (their record's place in the store). The Ticket bytes themselves stay in
   * the store, not on the JS heap: a pool of a million tickets is a million map entries, not a million
   * buffers for the garbage collector to trace.
   */
  private readonly active = new ShardedMap<number>();
  /** Ticket bytes whose store commit is still in flight (the store only answers for committed records). */
  private readonly pending = new Map<string, Uint8Array>();
  private nextPosition = 1;
  /** Resolved tickets, kept for terminal_retention_ttl_secs; each shard is in resolution order. */
  private readonly resolved = new ShardedMap<ResolvedTicket>();
  private readonly backfills = new Map<string, PoolBackfill>();
  /** match_id -> backfill id: one open request per running match. */
  private readonly backfillByMatch = new Map<string, string>();

  private pool: TicketPool;
  private readonly runner: TickRunner;
  /** The engine is reading the columns: column changes wait in afterTick. */
  private engineRunning = false;
  private readonly afterTick: (() => void)[] = [];
  /** From the engine's start until every formed match is resolved: tickets that left the pool meanwhile. */
  private tickInProgress = false;
  private readonly cancelledDuringTick = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private currentTick: Promise<void> = Promise.resolve();
  /** The pool whose rows are still being built (fillPool): the engine waits for it. */
  private filling: TicketPool | undefined;
  /** A hot reload changed what the queue admits, and no pool rebuild has checked every ticket since. */
  private admissionPending = false;
  private seed = 1;

  constructor(
    readonly queueId: string,
    private configValue: QueueConfig,
    private readonly store: Store,
    private readonly log: Logger,
  ) {
    this.pool = new TicketPool(layoutOf(configValue));
    this.runner = new TickRunner(engineParams(configValue));
  }

  get config(): QueueConfig {
    return this.configValue;
  }

  /**
   * Restores the queue from the store and takes requests at once. The stored tickets are known (ids,
   * positions) before this returns, so duplicates and cancels are right from the first request; their pool
   * rows are built in time slices (`fillPool`, checking each against the configuration), and the engine runs
   * once that is done.
   */
  start(): void {
    const snapshot = this.store.loadQueue(this.queueId);
    // Ids and positions only: the rows are built from the stored bytes in slices, read one at a time.
    const ids: string[] = [];
    const positions: number[] = [];
    for (const stored of snapshot.tickets) {
      this.nextPosition = Math.max(this.nextPosition, stored.position + 1);
      if (stored.state === 'resolved') {
        this.resolved.set(stored.ticketId, {
          position: stored.position,
          matchId: stored.matchId ?? '',
          resolvedAtMs: stored.resolvedAtMs ?? 0,
        });
      } else {
        this.active.set(stored.ticketId, stored.position);
        ids.push(stored.ticketId);
        positions.push(stored.position);
      }
    }
    for (const stored of snapshot.backfills) {
      const request = fromBinary(BackfillRequestSchema, stored.request);
      this.addBackfill({ request, input: parseBackfillEngineInput(request.engineInput, 'engine_input') });
    }
    this.state = 'running';
    this.log.info(
      { queue: this.queueId, tickets: this.active.size, resolved: this.resolved.size, backfills: this.backfills.size },
      'queue started',
    );
    // The queue's file may have changed while the service was down: what it no longer admits leaves with
    // its outcome, as on a hot reload, rather than staying in a pool it can never match in.
    const changes = this.evictMisfitBackfills(this.config);
    if (changes.length > 0) void this.store.commit(changes);
    void this.fillPool(ids, positions, 'pool restored', true);
    this.schedule();
  }

  /**
   * Replaces the pool with a new one (for the current configuration) and builds the rows of the tickets
   * `ids` (stored at `positions`) into it in time slices, reading each one's bytes from the store; the
   * engine does not run on it until that is done (`filling`). A ticket that left the pool meanwhile
   * (cancelled, cleared, expired) is skipped, one that arrives meanwhile goes straight in, and when another
   * fill replaces this pool the rest is left to it.
   *
   * With `admit`, each ticket is first checked against the configuration (a hot reload changed what the
   * queue admits): one that no longer fits leaves the pool instead, and each slice's removals are committed
   * with their outcomes before the next slice starts. A large pool is thus checked without holding the event
   * loop, and the engine never runs on a ticket the new configuration refuses.
   */
  private async fillPool(ids: readonly string[], positions: readonly number[], done: string, admit = false): Promise<void> {
    const pool = new TicketPool(layoutOf(this.config), Math.max(1024, ids.length));
    this.pool = pool;
    this.filling = pool;
    const startedMs = Date.now();
    const evicted = admit ? new Evictions(this.queueId) : undefined;
    try {
      await timeSliced(
        ids.length,
        (i) => {
          if (this.pool !== pool || this.state !== 'running') return false;
          const ticketId = ids[i]!;
          const position = positions[i]!;
          if (this.active.get(ticketId) !== position) return;
          this.insertStored(pool, ticketId, position, evicted);
        },
        evicted && (() => evicted.commit(this.store, this.config.outcomes.batch_chunk_size)),
      );
    } catch (err) {
      // A ticket whose record cannot be read: the engine runs on the rows built so far rather than never.
      this.log.error({ queue: this.queueId, err }, 'pool rebuild stopped early: a stored ticket could not be read');
      // What the interrupted slice already took out of the pool still leaves the store, with its outcomes.
      await evicted?.commit(this.store, this.config.outcomes.batch_chunk_size);
    }
    if (this.filling !== pool) return;
    this.filling = undefined;
    if (admit) this.admissionPending = false;
    if (evicted?.count)
      this.log.info(
        { queue: this.queueId, removed: evicted.count, tickets: this.active.size },
        'configuration change: tickets that no longer fit left the pool',
      );
    if (ids.length > 0) this.log.info({ queue: this.queueId, tickets: ids.length, ms: Date.now() - startedMs }, done);
  }

  /** Whether the current configuration still admits an active ticket; if not, takes it out (into `evicted`). */
  private admits(id: string, ticket: Ticket, input: ParsedEngineInput, position: number, evicted: Evictions): boolean {
    const fate = ticketFate(this.config, ticket, input.playerIds.length);
    if (fate.kind === 'keep') return true;
    this.deactivate(id);
    evicted.add(this.ref(id, position), fate.kind === 'orphaned' ? ticketOrphaned(this.queueId, ticket, fate.rulesetId) : fate.reason);
    return false;
  }

  /**
   * A valid hot-reloaded configuration. Tickets and requests that no longer fit leave the pool with their
   * outcomes (admission.ts decides: orphaned, RULESET_PARAMS_CHANGED, QUEUE_CONFIG_CHANGED): requests at
   * once, tickets while the pool is rebuilt (`fillPool`). The engine and the pool's columns follow the new
   * configuration after the current tick.
   */
  reconfigure(config: QueueConfig): void {
    const previous = this.configValue;
    this.configValue = config;
    const admission = (c: QueueConfig) => JSON.stringify([c.rulesets.map((r) => [r.id, r.team_size]), c.limits]);
    // Stays set until a rebuild checks every ticket: a reload that replaces an unfinished rebuild checks too.
    if (admission(previous) !== admission(config)) this.admissionPending = true;
    const changes = this.admissionPending ? this.evictMisfitBackfills(config) : [];
    this.withPool(() => {
      this.runner.configure(engineParams(config));
      const active = this.activeInArrivalOrder();
      void this.fillPool(
        active.map(([id]) => id),
        active.map(([, position]) => position),
        'pool rebuilt for the new configuration',
        this.admissionPending,
      );
    });
    if (changes.length > 0) void this.store.commit(changes);
  }

  private evictMisfitBackfills(config: QueueConfig): StoreChange[] {
    const changes: StoreChange[] = [];
    const removedBackfills = new Map<RemovalReason, string[]>();
    for (const [id, { request }] of [...this.backfills]) {
      const fate = backfillFate(config, request);
      if (fate.kind === 'keep') continue;
      this.removeBackfill(id);
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: id });
      if (fate.kind === 'orphaned') changes.push(record(backfillRequestOrphaned(this.queueId, request, fate.rulesetId)));
      else removedBackfills.set(fate.reason, [...(removedBackfills.get(fate.reason) ?? []), id]);
    }
    const chunk = config.outcomes.batch_chunk_size;
    for (const [reason, ids] of removedBackfills) changes.push(...records(backfillRequestsRemoved(this.queueId, ids, reason, chunk)));
    if (changes.length > 0)
      this.log.info(
        { queue: this.queueId, backfills: this.backfills.size },
        'configuration change: backfill requests that no longer fit left the pool',
      );
    return changes;
  }

  get activeTicketCount(): number {
    return this.active.size;
  }

  get resolvedTicketCount(): number {
    return this.resolved.size;
  }

  get backfillRequestCount(): number {
    return this.backfills.size;
  }

  /** Where a ticket is now, for the admin view: active in the pool, resolved into a match, or unknown. */
  lookupTicket(ticketId: string): { state: 'active' | 'resolved'; ticket: Ticket; matchId?: string } | undefined {
    const active = this.active.get(ticketId);
    if (active !== undefined) return { state: 'active', ticket: fromBinary(TicketSchema, this.ticketBytes(ticketId, active)) };
    const resolved = this.resolved.get(ticketId);
    return (
      resolved && {
        state: 'resolved',
        ticket: fromBinary(TicketSchema, this.ticketBytes(ticketId, resolved.position)),
        matchId: resolved.matchId,
      }
    );
  }

  /**
   * Adds the ticket to the pool; `bytes` is the ticket as acknowledged, binary (what is stored and
   * delivered). Idempotent on the ticket id: a retry never makes a second entry.
   */
  async createTicket(ticket: Ticket, bytes: Uint8Array, input: ParsedEngineInput): Promise<void> {
    if (this.active.has(ticket.id) || this.resolved.has(ticket.id)) {
      // A retry (or a concurrent duplicate) of a create we already issued: answer once that one is durable.
      return this.store.whenDurable();
    }
    const position = this.nextPosition++;
    this.activate(ticket.id, position, ticket, input);
    this.pending.set(ticket.id, bytes);
    try {
      await this.store.commit([{ type: 'ticket.put', ticket: { ...this.ref(ticket.id, position), ticket: bytes, state: 'active' } }]);
    } finally {
      if (this.pending.get(ticket.id) === bytes) this.pending.delete(ticket.id);
    }
  }

  /**
   * Removes an active ticket. A ticket that is not in the pool (never created, already cancelled, expired
   * or removed) is not in matchmaking either, so the call succeeds: a retried cancel is safe.
   */
  async cancelTicket(ticketId: string): Promise<void> {
    const match = this.resolved.get(ticketId);
    if (match) {
      throw failedPrecondition(`ticket ${ticketId} is already in committed match ${match.matchId}; the match outcome will be delivered`);
    }
    const position = this.deactivate(ticketId);
    if (position === undefined) return this.store.whenDurable();
    await this.store.commit([{ type: 'ticket.delete', ref: this.ref(ticketId, position) }]);
  }

  /** Returns resolved tickets to the pool with their original created_at; answers the ids that could not be. */
  async reactivateTickets(ticketIds: readonly string[]): Promise<string[]> {
    const failed: string[] = [];
    const changes: StoreChange[] = [];
    const retentionMs = this.config.terminal_retention_ttl_secs * 1000;
    const now = Date.now();
    for (const id of new Set(ticketIds)) {
      if (this.active.has(id)) continue;
      const resolved = this.resolved.get(id);
      if (!resolved || now - resolved.resolvedAtMs > retentionMs) {
        failed.push(id);
        continue;
      }
      const ticket = fromBinary(TicketSchema, this.ticketBytes(id, resolved.position));
      try {
        this.activate(id, resolved.position, ticket, parseTicketEngineInput(ticket.engineInput, id, 'engine_input'));
      } catch {
        failed.push(id); // no longer fits the queue (its configuration changed since)
        continue;
      }
      this.resolved.delete(id);
      changes.push({ type: 'ticket.reactivate', ref: this.ref(id, resolved.position) });
    }
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return failed;
  }

  /** Adds the request; an open request for the same match_id is cancelled and replaced. */
  async createBackfillRequest(request: BackfillRequest, input: ParsedEngineInput): Promise<void> {
    const changes: StoreChange[] = [];
    const replaced = this.backfillByMatch.get(request.matchId);
    if (replaced !== undefined && this.removeBackfill(replaced) && replaced !== request.id) {
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: replaced });
    }
    // The same request id re-posted for another match moves; the put below overwrites the stored one.
    this.removeBackfill(request.id);
    this.addBackfill({ request, input });
    changes.push({
      type: 'backfill.put',
      backfill: { queueId: this.queueId, backfillId: request.id, request: toBinary(BackfillRequestSchema, request) },
    });
    await this.store.commit(changes);
  }

  /** Hard removal; answers the ids that were not active requests of this queue. */
  async cancelBackfillRequests(backfillIds: readonly string[]): Promise<string[]> {
    const failed: string[] = [];
    const changes: StoreChange[] = [];
    for (const id of new Set(backfillIds)) {
      if (!this.removeBackfill(id)) {
        failed.push(id);
        continue;
      }
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: id });
    }
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return failed;
  }

  /** Empties the pool and the backfill requests, recording the removal outcomes in the same commit. */
  async clear(reason: RemovalReason): Promise<ClearResult> {
    const tickets = this.activeInArrivalOrder().map(([ticketId, position]) => this.ref(ticketId, position));
    const ticketIds = tickets.map((t) => t.ticketId);
    const backfillIds = [...this.backfills.keys()];
    for (const id of ticketIds) this.deactivate(id);
    this.backfills.clear();
    this.backfillByMatch.clear();
    const chunk = this.config.outcomes.batch_chunk_size;
    const changes: StoreChange[] = [
      ...tickets.map((ref): StoreChange => ({ type: 'ticket.delete', ref })),
      ...backfillIds.map((backfillId): StoreChange => ({ type: 'backfill.delete', queueId: this.queueId, backfillId })),
      ...records(ticketsRemoved(this.queueId, ticketIds, reason, chunk)),
      ...records(backfillRequestsRemoved(this.queueId, backfillIds, reason, chunk)),
    ];
    await (changes.length > 0 ? this.store.commit(changes) : this.store.whenDurable());
    return { ticketsCleared: ticketIds.length, backfillRequestsCleared: backfillIds.length };
  }

  /** The queue file was deleted: refuse new writes, then remove the pool with QUEUE_RETIRED. */
  async retire(): Promise<void> {
    this.state = 'retiring';
    this.stopTicking();
    await this.currentTick;
    const result = await this.clear(RemovalReason.QUEUE_RETIRED);
    this.state = 'retired';
    this.log.info({ queue: this.queueId, ...result }, 'queue retired');
  }

  /** Stops ticking; resolves once a tick in progress has committed its matches. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    this.stopTicking();
    await this.currentTick;
  }

  private activate(id: string, position: number, ticket: Ticket, input: ParsedEngineInput): void {
    // Prepared now, against the current pool, so a limit (64 host keys, 64 values per filter) refuses the
    // request before anything is stored.
    const pool = this.pool;
    const row = pool.prepare(input, ticket.rulesetIds, createdAtMs(ticket));
    this.active.set(id, position);
    // A pool rebuilt meanwhile (hot reload) was built from `active`, which already holds this ticket.
    this.withPool(() => {
      if (this.pool === pool && this.active.get(id) === position) pool.insert(id, row);
    });
  }

  /** Takes the ticket out of the pool; answers its position, or undefined when it was not active. */
  private deactivate(id: string): number | undefined {
    const position = this.active.get(id);
    if (position === undefined) return undefined;
    this.active.delete(id);
    if (this.tickInProgress) this.cancelledDuringTick.add(id);
    this.withPool(() => this.pool.remove(id));
    return position;
  }

  private ref(ticketId: string, position: number): TicketRef {
    return { queueId: this.queueId, ticketId, position };
  }

  /** A pooled or resolved ticket's bytes: from memory while its commit is in flight, else from the store. */
  private ticketBytes(ticketId: string, position: number): Uint8Array {
    const bytes = this.pending.get(ticketId) ?? this.store.readTicket(this.ref(ticketId, position))?.ticket;
    if (!bytes) throw new Error(`ticket ${ticketId} of queue ${this.queueId} has no stored record at position ${position}`);
    return bytes;
  }

  private activeTicket(id: string): Ticket {
    return fromBinary(TicketSchema, this.ticketBytes(id, this.active.get(id)!));
  }

  /** The active tickets' ids and positions, in arrival (position) order; the map itself iterates by shard. */
  private activeInArrivalOrder(): [string, number][] {
    return [...this.active].sort((a, b) => a[1] - b[1]);
  }

  /** Runs `change` on the pool's columns now, or after the tick that is reading them. */
  private withPool(change: () => void): void {
    if (this.engineRunning) this.afterTick.push(change);
    else change();
  }

  /** A stored ticket's row, into `pool`; with `evicted`, only if the configuration still admits the ticket. */
  private insertStored(pool: TicketPool, id: string, position: number, evicted?: Evictions): void {
    const ticket = fromBinary(TicketSchema, this.ticketBytes(id, position));
    try {
      const input = parseTicketEngineInput(ticket.engineInput, id, 'engine_input');
      if (evicted && !this.admits(id, ticket, input, position, evicted)) return;
      pool.insert(id, pool.prepare(input, ticket.rulesetIds, createdAtMs(ticket)));
    } catch (err) {
      this.log.error(
        { queue: this.queueId, ticket: id, err: (err as Error).message },
        'ticket no longer fits the queue configuration; it stays stored but cannot match',
      );
    }
  }

  private schedule(): void {
    if (this.state !== 'running' || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.currentTick = this.tick().finally(() => this.schedule());
    }, this.config.tick_interval_ms);
  }

  private stopTicking(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async tick(): Promise<void> {
    const now = Date.now();
    const expired = [...this.expireResolved(now), ...this.expireTickets(now), ...this.expireBackfills(now)];
    if (expired.length > 0) void this.store.commit(expired);
    if (this.pool.count === 0 || this.state !== 'running' || this.filling === this.pool) return;
    // What the engine's indices refer to (host keys, attribute values, rulesets), even if a hot reload
    // replaces the pool or the config before every result is resolved.
    const { pool, config } = this;
    const startedMs = Date.now();
    this.tickInProgress = true;
    // Backfill first: a running match's open slots go ahead of new matches.
    if (this.backfills.size > 0) await this.fillBackfills(pool, config);
    const formed =
      this.pool === pool
        ? await this.withEngine(
            () => this.runner.run(pool, Date.now(), this.seed++),
            (result) => this.matchedIds(result, pool),
          )
        : undefined;
    // One commit per match, issued (and encoded) in its slice. The next slice waits until that slice's
    // commits are durable: the tick's writes then reach the disk a slice at a time, and a CreateTicket never
    // waits behind more than one slice's flush (a whole tick's outcomes in one flush took ~20 ms).
    if (formed) {
      let sliceCommit: Promise<void> | undefined;
      await timeSliced(
        formed.length,
        (i) => {
          sliceCommit = this.resolveMatch(formed[i]!, pool, config) ?? sliceCommit;
        },
        () => sliceCommit,
      );
    }
    this.tickInProgress = false;
    this.cancelledDuringTick.clear();
    this.log.debug({ queue: this.queueId, matches: formed?.length ?? 0, pool: this.pool.count, ms: Date.now() - startedMs }, 'tick');
  }

  /** A tick's matches with their rows turned into ticket ids, in time slices (the columns stay frozen). */
  private async matchedIds(result: TickResult, pool: TicketPool): Promise<FormedMatch[]> {
    const formed: FormedMatch[] = [];
    await timeSliced(result.count, (m) => {
      const match = result.match(m);
      formed.push({ match, ids: Array.from(match.rows, (row) => pool.ids[row]!) });
    });
    return formed;
  }

  /**
   * Runs the engine over the pool's columns; changes to them wait until its row indices are turned into
   * ticket ids (by `toIds`), since those changes move rows.
   */
  private async withEngine<R, T>(run: () => Promise<R>, toIds: (result: R) => T | Promise<T>): Promise<T | undefined> {
    this.engineRunning = true;
    let result: T | undefined;
    try {
      result = await toIds(await run());
    } catch (err) {
      this.log.error({ queue: this.queueId, err }, 'engine run failed; the pool is unchanged');
    }
    this.engineRunning = false;
    for (const change of this.afterTick.splice(0)) change();
    return result;
  }

  /**
   * Fills open backfill requests from the pool: each filled request leaves with a backfill.created
   * outcome carrying its assigned tickets, which are resolved into the request's running match.
   */
  private async fillBackfills(pool: TicketPool, config: QueueConfig): Promise<void> {
    const open = [...this.backfills.values()];
    const requests = open.map(({ request, input }): EngineBackfillRequest => {
      const row = pool.prepare(input, [], createdAtMs(request));
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
    if (requests.some((q) => q.rulesetIndex < 0)) return; // a reload removed a ruleset: its requests are being orphaned
    const fills = await this.withEngine(
      () => this.runner.backfill(pool, requests, Date.now()),
      (perRequest) => perRequest.map((rows) => rows.map((row) => pool.ids[row]!)),
    );
    const changes: StoreChange[] = [];
    const nowMs = Date.now();
    fills?.forEach((ids, q) => {
      const backfill = open[q]!;
      if (ids.length === 0 || this.backfills.get(backfill.request.id) !== backfill) return;
      if (!ids.every((id) => this.active.has(id) && !this.cancelledDuringTick.has(id))) return;
      const tickets = ids.map((id) => this.activeTicket(id));
      for (const id of ids) changes.push(this.resolveTicket(id, backfill.request.matchId, nowMs));
      this.removeBackfill(backfill.request.id);
      changes.push({ type: 'backfill.delete', queueId: this.queueId, backfillId: backfill.request.id });
      const filled = create(BackfillSchema, {
        id: randomUUID(),
        request: backfill.request,
        assignedTickets: tickets,
        createdAt: timestampFromMs(nowMs),
      });
      changes.push(record(backfillCreated(this.queueId, filled)));
    });
    if (changes.length > 0) void this.store.commit(changes);
  }

  /** Moves an active ticket into a committed match: out of the pool, into `resolved`. */
  private resolveTicket(id: string, matchId: string, nowMs: number): StoreChange {
    const position = this.active.get(id)!;
    this.active.delete(id);
    this.pool.remove(id);
    this.resolved.set(id, { position, matchId, resolvedAtMs: nowMs });
    return { type: 'ticket.resolve', ref: this.ref(id, position), matchId, resolvedAtMs: nowMs };
  }

  /**
   * Moves a formed match's tickets from the pool to `resolved` and commits that with its match.created
   * outcome, together; answers the commit. A match holding a ticket that left the pool since the tick started
   * (cancelled, removed) is dropped; its other tickets stay in the pool for the next tick.
   */
  private resolveMatch({ match, ids }: FormedMatch, pool: TicketPool, config: QueueConfig): Promise<void> | undefined {
    if (!ids.every((id) => this.active.has(id) && !this.cancelledDuringTick.has(id))) {
      this.log.debug({ queue: this.queueId, tickets: ids }, 'match dropped: one of its tickets left the pool during the tick');
      return undefined;
    }
    const nowMs = Date.now();
    const matchId = randomUUID();
    const tickets = ids.map((id) => this.ticketBytes(id, this.active.get(id)!));
    const inputs = tickets.map((bytes, k) => parseTicketEngineInput(engineInputOf(bytes), ids[k]!, 'engine_input'));
    const engineOutput = buildEngineOutput(match, inputs, pool, config);
    const changes = ids.map((id) => this.resolveTicket(id, matchId, nowMs));
    const shell = create(MatchSchema, {
      id: matchId,
      engineOutput: toBinary(EngineOutputSchema, engineOutput),
      createdAt: timestampFromMs(nowMs),
      rulesetId: config.rulesets[match.rulesetIndex]!.id,
    });
    changes.push({ type: 'outcome.record', outcome: encodeMatchCreated(this.queueId, shell, tickets) });
    return this.store.commit(changes);
  }

  /**
   * Active tickets older than ticket_ttl_secs leave the pool with ticket.expired. Runs between ticks, when
   * the pool's columns hold exactly the active tickets, so their ages come from one column scan.
   */
  private expireTickets(nowMs: number): StoreChange[] {
    const oldest = nowMs - this.config.ticket_ttl_secs * 1000;
    const ids: string[] = [];
    const { arrivalMs, ids: rows, count } = this.pool;
    for (let r = 0; r < count; r++) if (arrivalMs[r]! < oldest) ids.push(rows[r]!);
    const refs = ids.map((id) => this.ref(id, this.deactivate(id)!));
    return [
      ...refs.map((ref): StoreChange => ({ type: 'ticket.delete', ref })),
      ...records(ticketsExpired(this.queueId, ids, this.config.outcomes.batch_chunk_size)),
    ];
  }

  /** Backfill requests older than backfill_ttl_secs leave with backfill.expired. */
  private expireBackfills(nowMs: number): StoreChange[] {
    const oldest = nowMs - this.config.backfill_ttl_secs * 1000;
    const ids = [...this.backfills].filter(([, b]) => createdAtMs(b.request) < oldest).map(([id]) => id);
    for (const id of ids) this.removeBackfill(id);
    return [
      ...ids.map((backfillId): StoreChange => ({ type: 'backfill.delete', queueId: this.queueId, backfillId })),
      ...records(backfillRequestsExpired(this.queueId, ids, this.config.outcomes.batch_chunk_size)),
    ];
  }

  /** Resolved tickets past terminal_retention_ttl_secs can no longer be reactivated: forget them. */
  private expireResolved(nowMs: number): StoreChange[] {
    const retentionMs = this.config.terminal_retention_ttl_secs * 1000;
    const changes: StoreChange[] = [];
    for (const shard of this.resolved.eachShard()) {
      for (const [ticketId, resolved] of shard) {
        if (nowMs - resolved.resolvedAtMs <= retentionMs) break; // a shard is in resolution order: the rest are younger
        this.resolved.delete(ticketId);
        changes.push({ type: 'ticket.delete', ref: this.ref(ticketId, resolved.position) });
      }
    }
    return changes;
  }

  private addBackfill(backfill: PoolBackfill): void {
    this.backfills.set(backfill.request.id, backfill);
    this.backfillByMatch.set(backfill.request.matchId, backfill.request.id);
  }

  private removeBackfill(id: string): boolean {
    const existing = this.backfills.get(id);
    if (!existing) return false;
    this.backfills.delete(id);
    if (this.backfillByMatch.get(existing.request.matchId) === id) this.backfillByMatch.delete(existing.request.matchId);
    return true;
  }
}
