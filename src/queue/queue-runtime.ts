// One queue's runtime: its lifecycle and the request path. Every change to the queue is a record
// (records.ts) proposed to the queue's history (queue-history.ts) and applied by one deterministic function
// (queue-state.ts). The embedded history applies it at once and commits its changes; the store applies
// commits in call order, so anything later derived from the pool (a match, a removal) is never durable
// before what it depends on. A replicated history applies it when the queue's log delivers it, on every
// replica alike. Callers are answered once their record is durable. The tick (tick.ts) and the pool rebuild
// (pool-rebuild.ts) propose records the same way; the engine's columns (pool-columns.ts) follow what each
// applied record says left and entered the pool.
import { randomUUID } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import type { Logger } from 'pino';
import type { QueueConfig } from '../config/queue-config.js';
import { failedPrecondition } from '../errors.js';
import { TicketSchema, type BackfillRequest, type Ticket } from '../gen/matchmaker/core/v1/resources_pb.js';
import { RemovalReason } from '../gen/matchmaker/outcomes/v1/outcomes_pb.js';
import { parseTicketEngineInput, type ParsedEngineInput } from '../engine/engine-input.js';
import type { PoolRow } from '../engine/ticket-pool.js';
import { engineParams, TickRunner } from '../engine/tick-runner.js';
import type { QueueSnapshot, Store } from '../store/store.js';
import { poolFull } from './admission.js';
import { PoolColumns } from './pool-columns.js';
import { PoolRebuild } from './pool-rebuild.js';
import { PoolRows } from './pool-rows.js';
import { layoutOf, type QueueContext } from './queue-context.js';
import { inArrivalOrder, withActivated, type ArrivalOrder, type QueueSnapshotData } from './queue-snapshot.js';
import { QueueState, type Applied } from './queue-state.js';
import { EmbeddedHistory, isCreate, type HistoryFactory, type QueueApplier, type QueueHistory } from './queue-history.js';
import type { QueueRecord, RecordOf, TicketAt } from './records.js';
import { noTelemetry, reportExits, type QueueTelemetry } from './queue-telemetry.js';
import { QueueInsight, type TicketLookup } from './queue-insight.js';
import { Ticker } from './tick.js';

/** Where a queue is in its life: it takes requests only while running. */
export type QueueLifecycle = 'starting' | 'running' | 'retiring' | 'retired' | 'stopped';

export interface ClearResult {
  ticketsCleared: number;
  backfillRequestsCleared: number;
}

export class QueueRuntime {
  lifecycle: QueueLifecycle = 'starting';
  /** Replaced once, before the queue runs, when a history restores a checkpoint. */
  private queue: QueueState;
  /**
   * Rows the pool is to get once the history has caught up: the queue starts from a state restored whole
   * (from the store, or a checkpoint), or from records replayed (apply), and no row is made before. `done`
   * is the log line that says they are built; `tickets`, the active tickets in arrival order as the restore
   * listed them; `activated`, the tickets records activated since (a replica replays its log).
   */
  private rowsToBuild: { done: string; tickets: ArrivalOrder; activated: TicketAt[] } | undefined;
  private readonly columns: PoolColumns;
  /** Ticket bytes whose store commit is still in flight (the store only answers for committed records). */
  private readonly pending = new Map<string, Uint8Array>();
  /** Which rows the pool gets, and when, while the queue runs. */
  private readonly rows: PoolRows;
  private readonly runner: TickRunner;
  private readonly ticker: Ticker;
  private readonly rebuild: PoolRebuild;
  private readonly history: QueueHistory;
  /** Explains a ticket and answers the queue's statistics (queue-insight.ts). */
  readonly insight: QueueInsight;
  private timer: NodeJS.Timeout | undefined;
  private currentTick: Promise<void> = Promise.resolve();

  /** `history`: where the queue's records go; by default the embedded store, this process the only copy. */
  constructor(
    readonly queueId: string,
    private configValue: QueueConfig,
    private readonly store: Store,
    private readonly log: Logger,
    history?: HistoryFactory,
    private readonly telemetry: QueueTelemetry = noTelemetry,
  ) {
    this.queue = new QueueState(queueId, (ticketId, position) => this.ticketBytes(ticketId, position));
    this.columns = new PoolColumns(layoutOf(configValue), log, queueId);
    this.runner = new TickRunner(engineParams(configValue));
    const runtime = this;
    const context: QueueContext = {
      queueId,
      log,
      get state() {
        return runtime.queue;
      },
      columns: this.columns,
      get config() {
        return runtime.configValue;
      },
      get running() {
        return runtime.lifecycle === 'running';
      },
      get leading() {
        return runtime.history.leading;
      },
      propose: (records) => this.history.propose(records),
      buildWaitingRows: () => this.rows.buildWaiting(),
      waitingTicket: (ticketId) => this.rows.waitingTicket(ticketId),
      telemetry,
      ticketBytes: (ticketId, position) => this.ticketBytes(ticketId, position),
      lendTicketBytes: (ticketId, position) => this.ticketBytes(ticketId, position, true),
    };
    this.rows = new PoolRows(context);
    this.ticker = new Ticker(context, this.runner);
    this.rebuild = new PoolRebuild(context);
    this.insight = new QueueInsight(context);
    const applier: QueueApplier = {
      apply: (record) => this.apply(record),
      committed: (records) => this.forgetPending(records),
      snapshot: () => this.queue.snapshotInSlices(),
      restore: (data) => this.restoreSnapshot(data),
      load: (stored) => this.load(stored),
    };
    this.history = history ? history(queueId, applier) : new EmbeddedHistory(queueId, applier, store);
    // A replica taking the lead runs its own version of the queue file from its term on: what that file no
    // longer admits leaves (the leader before it may have run another version, during a rollout).
    this.history.onLeading?.(() =>
      setImmediate(() => {
        if (this.lifecycle === 'running' && this.history.leading) this.checkAdmissionAsLeader();
      }),
    );
  }

  get config(): QueueConfig {
    return this.configValue;
  }

  private checkAdmissionAsLeader(): void {
    void this.rebuild.evictMisfitBackfills();
    void this.rebuild.evictMisfits("taking the lead: tickets this replica's queue file no longer admits left the pool");
  }

  /** Whether the queue can take requests now: running, and its history reachable. */
  get serving(): boolean {
    return this.lifecycle === 'running' && (this.history.reachable ?? true);
  }

  /** The replicated mode: the log position of the last entry this replica applied (undefined, embedded). */
  get logPosition(): number | undefined {
    return this.history.appliedSeq;
  }

  /** The replicated mode: the term this replica applies a leader's entries under (undefined, embedded). */
  get logTerm(): number | undefined {
    return this.history.appliedTerm;
  }

  /** Whether this copy of the queue leads it (always, embedded): it ticks, expires, and delivers outcomes. */
  get leading(): boolean {
    return this.history.leading;
  }

  /**
   * Records a change of the queue's outbox (delivery progress, a parked delivery, a stream consumer's
   * position) through the queue's history: in the replicated mode every replica then holds it.
   */
  async recordOutbox(record: RecordOf<'delivery.advance' | 'delivery.park' | 'delivery.release' | 'consumer.advance'>): Promise<void> {
    await this.history.propose([record]);
  }

  get activeTicketCount(): number {
    return this.queue.active.size;
  }

  get resolvedTicketCount(): number {
    return this.queue.resolved.size;
  }

  get backfillRequestCount(): number {
    return this.queue.backfills.size;
  }

  /**
   * Starts the queue's history, and takes requests once it has caught up: the embedded history loads the
   * stored queue (known at once: ids and positions, so duplicates and cancels are right from the first
   * request); a replicated one applies its log so far. A state restored whole has its pool rows built then,
   * in time slices, each checked against the configuration (the queue's file may have changed while the
   * service was down: what it no longer admits leaves with its outcome, as on a hot reload, rather than
   * staying in a pool it can never match in), and the engine runs once that is done. A copy taking the lead
   * checks the rest (checkAdmissionAsLeader).
   */
  start(): void {
    this.history.begin(() => {
      if (this.lifecycle !== 'starting') return;
      this.lifecycle = 'running';
      const { active, resolved, backfills } = this.queue;
      this.log.info({ queue: this.queueId, tickets: active.size, resolved: resolved.size, backfills: backfills.size }, 'queue started');
      const rowsToBuild = this.rowsToBuild;
      this.rowsToBuild = undefined;
      if (rowsToBuild === undefined) {
        if (this.history.leading) this.checkAdmissionAsLeader();
      } else {
        void this.rebuild.evictMisfitBackfills();
        void this.rebuild.fill(withActivated(rowsToBuild.tickets, rowsToBuild.activated), rowsToBuild.done, true);
      }
      this.schedule();
    });
  }

  /**
   * A valid hot-reloaded configuration. Tickets and requests that no longer fit leave the pool with their
   * outcomes (admission.ts decides: orphaned, RULESET_PARAMS_CHANGED, QUEUE_CONFIG_CHANGED): requests at
   * once, tickets while the pool is rebuilt. The engine and the pool's columns follow the new
   * configuration after the current tick.
   */
  reconfigure(config: QueueConfig): void {
    const previous = this.configValue;
    this.configValue = config;
    this.rebuild.noteReload(previous, config);
    if (this.rebuild.checksAdmission) void this.rebuild.evictMisfitBackfills();
    this.columns.withPool(() => {
      this.runner.configure(engineParams(config));
      this.rows.forgetWaiting();
      void this.rebuild.fill(
        inArrivalOrder(this.queue.activeInArrivalOrder()),
        'pool rebuilt for the new configuration',
        this.rebuild.checksAdmission,
      );
    });
  }

  /** Where a ticket is now, for the admin view: active in the pool, resolved into a match, or unknown. */
  lookupTicket(ticketId: string): TicketLookup | undefined {
    return this.insight.lookup(ticketId);
  }

  /**
   * Adds the ticket to the pool; `bytes` is the ticket as acknowledged, binary (what is stored and
   * delivered). Idempotent on the ticket id: a retry never makes a second entry.
   */
  async createTicket(ticket: Ticket, bytes: Uint8Array, input: ParsedEngineInput): Promise<void> {
    // A follower whose tables lack one of the request's values makes its waiting rows first (pool-rows.ts).
    const ready = this.rows.readyFor(input);
    if (ready) await ready;
    // A retry (or a concurrent duplicate) of a create we already issued: answer once that one is durable.
    if (this.queue.knows(ticket.id)) return this.store.whenDurable();
    // Tickets this copy has proposed but not yet applied count too (replicated: their records are on the way through the log).
    if (this.queue.active.size + this.rows.prepared.size >= this.config.limits.max_pool_tickets) throw poolFull(this.queueId, this.config);
    // Prepared now, against the current pool, so a limit (256 host keys, 256 values per filter) refuses the
    // request before anything is stored.
    const row = this.rows.prepare(ticket.id, ticket, input);
    try {
      await this.history.propose([{ type: 'ticket.create', ticketId: ticket.id, ticket: bytes }]);
    } finally {
      this.rows.prepared.drop(ticket.id, row);
    }
  }

  /**
   * Removes an active ticket. A ticket that is not in the pool (never created, already cancelled, expired
   * or removed) is not in matchmaking either, so the call succeeds: a retried cancel is safe.
   */
  async cancelTicket(ticketId: string): Promise<void> {
    const [applied] = await this.history.propose([{ type: 'ticket.cancel', ticketId }]);
    const { matchId } = applied!.result;
    if (matchId !== undefined) {
      throw failedPrecondition(`ticket ${ticketId} is already in committed match ${matchId}; the match outcome will be delivered`);
    }
  }

  /** Returns resolved tickets to the pool with their original created_at; answers the ids that could not be. */
  async reactivateTickets(ticketIds: readonly string[]): Promise<string[]> {
    const ids = [...new Set(ticketIds)];
    const resolvedSinceMs = Date.now() - this.config.terminal_retention_ttl_secs * 1000;
    // Rows are prepared first: a ticket that no longer fits the queue (its configuration changed) fails.
    const unfit = new Set<string>();
    const rows = new Map<string, PoolRow>();
    for (const id of ids) {
      const resolved = this.queue.resolved.get(id);
      if (!resolved || resolved.resolvedAtMs < resolvedSinceMs) continue;
      const ticket = fromBinary(TicketSchema, this.ticketBytes(id, resolved.position));
      try {
        rows.set(id, this.rows.prepare(id, ticket, parseTicketEngineInput(ticket.engineInput, id, 'engine_input')));
      } catch {
        unfit.add(id);
      }
    }
    const proposed = ids.filter((id) => !unfit.has(id));
    let applied: Applied<'tickets.reactivate'> | undefined;
    try {
      [applied] = await this.history.propose([{ type: 'tickets.reactivate', ticketIds: proposed, resolvedSinceMs }]);
    } finally {
      for (const [id, row] of rows) this.rows.prepared.drop(id, row);
    }
    const failed = new Set([...unfit, ...applied!.result.failedTicketIds]);
    return ids.filter((id) => failed.has(id));
  }

  /** Adds the request; an open request for the same match_id is cancelled and replaced. */
  async createBackfillRequest(request: BackfillRequest): Promise<void> {
    await this.history.propose([{ type: 'backfill.create', request }]);
  }

  /** Hard removal; answers the ids that were not active requests of this queue. */
  async cancelBackfillRequests(backfillIds: readonly string[]): Promise<string[]> {
    const [applied] = await this.history.propose([{ type: 'backfills.cancel', backfillIds }]);
    return applied!.result.failedBackfillIds;
  }

  /** Empties the pool and the backfill requests, recording the removal outcomes in the same commit. */
  async clear(reason: RemovalReason): Promise<ClearResult> {
    const [applied] = await this.history.propose([
      { type: 'pool.clear', reason, atMs: Date.now(), operationId: randomUUID(), chunkSize: this.config.outcomes.batch_chunk_size },
    ]);
    return applied!.result;
  }

  /** The queue file was deleted: refuse new writes, then remove the pool with QUEUE_RETIRED. */
  async retire(): Promise<void> {
    this.lifecycle = 'retiring';
    this.stopTicking();
    await this.currentTick;
    if (!this.history.leading) {
      // Another replica leads the queue and its file governs removals (docs/replication.md, queue files in
      // a cluster): this copy only stops. The last replica to drop the file leads by then and clears it.
      await this.history.stop();
      this.lifecycle = 'retired';
      this.log.info({ queue: this.queueId }, 'queue file removed: this replica stopped serving the queue');
      return;
    }
    // A leader keeps its history (and its lease) after the clear, so that it still delivers the removal
    // outcomes; it stops with the process, or when the queue's file returns.
    const result = await this.clear(RemovalReason.QUEUE_RETIRED);
    this.lifecycle = 'retired';
    this.log.info({ queue: this.queueId, ...result }, 'queue retired');
  }

  /** Stops ticking; resolves once a tick in progress has committed its matches. */
  async stop(): Promise<void> {
    this.lifecycle = 'stopped';
    // Ends a pass making waiting rows in slices (nothing reads this pool any more).
    this.rows.forgetWaiting();
    this.stopTicking();
    await this.currentTick;
    await this.history.stop();
  }

  /**
   * Applies a record to the queue's state and keeps the pool's columns in step. While the queue starts (a
   * replica replaying its log), rows wait: the rebuild at `running` makes the row of every ticket then
   * active, so a row made now would be thrown away with the columns it went into, and a ticket matched
   * later in the replay never needs one. Once it runs, pool-rows.ts puts them in (a copy that follows the
   * queue, later).
   */
  private apply<R extends QueueRecord>(record: R): Applied<R['type']> {
    const applied = this.queue.apply(record);
    this.insight.applied(record, applied);
    if (applied.deactivated.length > 0) this.ticker.noteLeft(applied.deactivated);
    // Until its commit settles the store cannot answer for a new ticket: its bytes are kept here.
    if (record.type === 'ticket.create' && (applied as Applied<'ticket.create'>).result.created)
      this.pending.set(record.ticketId, record.ticket);
    if (this.lifecycle !== 'starting') this.rows.follow(applied);
    else if (applied.activated.length > 0) {
      this.rowsToBuild ??= { done: 'pool built from the replication log', tickets: inArrivalOrder([]), activated: [] };
      for (const at of applied.activated) this.rowsToBuild.activated.push(at);
    }
    if (this.history.leading) reportExits(this.queueId, record, applied, this.telemetry);
    return applied;
  }

  /**
   * Replaces the state with a checkpoint's, before any record is applied (the history has given the store
   * the snapshot's records). Rows are built once the log is caught up, for every ticket then active.
   */
  private restoreSnapshot(data: QueueSnapshotData): void {
    if (this.lifecycle !== 'starting') throw new Error(`queue ${this.queueId} cannot restore a checkpoint once it runs`);
    this.queue = QueueState.fromSnapshot(this.queueId, (ticketId, position) => this.ticketBytes(ticketId, position), data);
    this.pending.clear();
    this.rowsToBuild = { done: 'pool restored from a checkpoint', tickets: data.active, activated: [] };
  }

  /** Loads the queue as the store holds it, before the first record is applied. */
  private load(stored: QueueSnapshot): void {
    if (this.lifecycle !== 'starting') throw new Error(`queue ${this.queueId} cannot load its stored state once it runs`);
    this.rowsToBuild = { done: 'pool restored', tickets: inArrivalOrder(this.queue.restore(stored)), activated: [] };
  }

  /** The store now answers for these records' new tickets: their bytes need not be kept here any longer. */
  private forgetPending(records: readonly QueueRecord[]): void {
    for (const record of records) {
      if (isCreate(record) && this.pending.get(record.ticketId) === record.ticket) this.pending.delete(record.ticketId);
    }
  }

  /** A ticket's bytes (QueueContext.ticketBytes), or `lent` (QueueContext.lendTicketBytes). */
  private ticketBytes(ticketId: string, position: number, lent = false): Uint8Array {
    const ref = { queueId: this.queueId, ticketId, position };
    const bytes = this.pending.get(ticketId) ?? (lent ? this.store.lendTicketBytes(ref) : this.store.readTicket(ref)?.ticket);
    if (!bytes) throw new Error(`ticket ${ticketId} of queue ${this.queueId} has no stored record at position ${position}`);
    return bytes;
  }

  private schedule(): void {
    if (this.lifecycle !== 'running' || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.currentTick = this.ticker.tick().finally(() => this.schedule());
    }, this.config.tick_interval_ms);
  }

  private stopTicking(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
