// The matchmakers the simulator compares, driven tick by tick on the same arrivals:
//  - EngineSystem: the real native engine in-process (TicketPool + TickRunner), ticked the way
//    QueueRuntime ticks it, with the simulated clock as now and as arrival times.
//  - BaselineSystem: naive first-come-first-served team filling.
//  - LatencyAwareFcfs: first-come, but a match only takes tickets that share an acceptable host and pass the
//    attribute filters (issue 19's baseline).
import { performance } from 'node:perf_hooks';
import type { QueueConfig } from '../../src/config/queue-config.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { allMatches, engineParams, TickRunner } from '../../src/engine/tick-runner.js';
import { bestHost, boundsForWait, Metrics, pairCompatible, type FormedMatch } from './metrics.js';
import type { PopulationModel, SimTicket } from './population.js';

export interface MatchSystem {
  readonly metrics: Metrics;
  /** Adds the tick's arrivals, expires tickets older than the TTL, forms matches at `nowMs`. */
  tick(nowMs: number, arrivals: readonly SimTicket[], tickIndex: number): Promise<void>;
  waiting(): Iterable<SimTicket>;
  /** Tickets waiting now. */
  waitingCount(): number;
}

/** Waiting tickets in arrival order (Map insertion order), with TTL expiry from the front. */
class WaitingList {
  readonly byId = new Map<string, SimTicket>();

  add(t: SimTicket): void {
    this.byId.set(t.id, t);
  }

  /** Removes and returns the tickets whose wait reached `ttlMs`. Arrival order = insertion order. */
  expire(nowMs: number, ttlMs: number): SimTicket[] {
    const out: SimTicket[] = [];
    for (const t of this.byId.values()) {
      if (nowMs - t.arrivalMs < ttlMs) break;
      out.push(t);
    }
    for (const t of out) this.byId.delete(t.id);
    return out;
  }

  /** A baseline's tick start: the arrivals join, the tickets at the TTL leave; answers the pool's size. */
  admit(arrivals: readonly SimTicket[], nowMs: number, ttlMs: number, metrics: Metrics): number {
    for (const t of arrivals) {
      this.add(t);
      metrics.arrived(t);
    }
    for (const t of this.expire(nowMs, ttlMs)) metrics.expired(t);
    return this.byId.size;
  }
}

export class EngineSystem implements MatchSystem {
  readonly metrics: Metrics;
  private readonly pool: TicketPool;
  private readonly runner: TickRunner;
  private readonly list = new WaitingList();
  private readonly ttlMs: number;
  /** Host key -> model host index. */
  private readonly hostMap = new Map<string, number>();

  constructor(
    readonly config: QueueConfig,
    private readonly model: PopulationModel,
    private readonly seed: number,
  ) {
    this.metrics = new Metrics(config, model, true);
    this.pool = new TicketPool({
      filters: config.engine.attribute_filters,
      rulesetIds: config.rulesets.map((r) => r.id),
      defaultLatencyMs: config.engine.default_latency_ms,
    });
    this.runner = new TickRunner(engineParams(config));
    this.ttlMs = config.ticket_ttl_secs * 1000;
  }

  async tick(nowMs: number, arrivals: readonly SimTicket[], tickIndex: number): Promise<void> {
    for (const t of arrivals) {
      // Empty ruleset_ids: the ticket competes in every ruleset of the queue.
      this.pool.insert(t.id, this.pool.prepare(t.input, [], t.arrivalMs));
      this.list.add(t);
      this.metrics.arrived(t);
    }
    for (const t of this.list.expire(nowMs, this.ttlMs)) {
      this.pool.remove(t.id);
      this.metrics.expired(t);
    }
    const poolSize = this.pool.count;
    if (poolSize === 0) {
      this.metrics.tick(0, 0);
      return;
    }
    const started = performance.now();
    // Same seed sequence shape as QueueRuntime (seed++ per tick), offset by the run's seed.
    const result = await this.runner.run(this.pool, nowMs, (this.seed * 1_000_003 + tickIndex) >>> 0);
    const matches = allMatches(result);
    const elapsed = performance.now() - started;
    // Rows -> ids before any row moves (swap-remove), as QueueRuntime does.
    const resolved = matches.map((m) => ({ m, ids: Array.from(m.rows, (row) => this.pool.idAt(row)) }));
    for (const { m, ids } of resolved) {
      const tickets = ids.map((id) => this.list.byId.get(id)!);
      for (const id of ids) {
        this.pool.remove(id);
        this.list.byId.delete(id);
      }
      const formed: FormedMatch = {
        rulesetIndex: m.rulesetIndex,
        tickets,
        teams: Array.from(m.teams),
        host: m.preferredHost === undefined ? undefined : this.hostOf(result.keys.hosts[m.preferredHost]),
        hostAcceptable: m.acceptableHosts.some((word) => word !== 0n),
      };
      this.metrics.match(formed, nowMs);
    }
    this.metrics.tick(poolSize, elapsed);
  }

  waiting(): Iterable<SimTicket> {
    return this.list.byId.values();
  }

  waitingCount(): number {
    return this.list.byId.size;
  }

  /** The model's index of a host key the engine chose (the pool's indices are reused as hosts come and go). */
  private hostOf(key: string | undefined): number {
    let h = key === undefined ? undefined : this.hostMap.get(key);
    if (h === undefined) {
      h = this.model.hosts.findIndex((host) => host.key === key);
      if (h < 0 || key === undefined) throw new Error(`engine chose unknown host "${key}"`);
      this.hostMap.set(key, h);
    }
    return h;
  }
}

/**
 * Naive FCFS: every tick, walk the waiting tickets in arrival order. Each ruleset has one forming match;
 * a ticket joins the forming match of the first ruleset (config order, as the engine tries them) with a team
 * that has room for its whole party, first team first. A ticket that fits nowhere is deferred, and deferred
 * tickets get first pick of the next forming match of that ruleset. A full match is emitted; forming matches
 * still partial at the end of the walk are abandoned (their tickets keep waiting for the next tick). Skill,
 * latency and attributes are ignored; the host is the one minimising the match's worst latency.
 */
export class BaselineSystem implements MatchSystem {
  readonly metrics: Metrics;
  private readonly list = new WaitingList();
  private readonly ttlMs: number;
  private readonly largestTeam: number;

  constructor(
    private readonly config: QueueConfig,
    model: PopulationModel,
  ) {
    this.metrics = new Metrics(config, model, false);
    this.ttlMs = config.ticket_ttl_secs * 1000;
    this.largestTeam = Math.max(...config.rulesets.map((r) => r.team_size));
  }

  async tick(nowMs: number, arrivals: readonly SimTicket[]): Promise<void> {
    const poolSize = this.list.admit(arrivals, nowMs, this.ttlMs, this.metrics);
    const started = performance.now();

    const rulesets = this.config.rulesets;
    const fresh = (r: number): Forming => ({
      room: new Array<number>(rulesets[r]!.teams).fill(rulesets[r]!.team_size),
      tickets: [],
      teams: [],
    });
    const open = rulesets.map((_, r) => fresh(r));
    let deferred: SimTicket[] = [];
    /** Puts t into a team of ruleset r's forming match; a match that becomes full is emitted and reopened. */
    const add = (r: number, t: SimTicket): 'no' | 'added' | 'filled' => {
      const m = open[r]!;
      const team = m.room.findIndex((free) => free >= t.partySize);
      if (team < 0) return 'no';
      m.room[team] = m.room[team]! - t.partySize;
      m.tickets.push(t);
      m.teams.push(team);
      if (!m.room.every((free) => free === 0)) return 'added';
      for (const x of m.tickets) this.list.byId.delete(x.id);
      this.metrics.match({ rulesetIndex: r, tickets: m.tickets, teams: m.teams, host: bestHost(m.tickets) }, nowMs);
      open[r] = fresh(r);
      return 'filled';
    };
    /** Ruleset r has a new forming match: the deferred tickets, oldest first, get first pick. */
    const refill = (r: number): void => {
      for (;;) {
        let filled = false;
        const rest: SimTicket[] = [];
        for (const d of deferred) {
          const res = d.partySize <= rulesets[r]!.team_size ? add(r, d) : 'no';
          if (res === 'no') rest.push(d);
          else if (res === 'filled') filled = true;
        }
        deferred = rest;
        if (!filled) return;
      }
    };
    for (const t of [...this.list.byId.values()]) {
      // A party larger than every team never matches: it only waits for expiry.
      if (t.partySize > this.largestTeam) continue;
      let placed = false;
      for (let r = 0; r < rulesets.length && !placed; r++) {
        if (t.partySize > rulesets[r]!.team_size) continue;
        const res = add(r, t);
        if (res === 'no') continue;
        placed = true;
        if (res === 'filled') refill(r);
      }
      if (!placed) deferred.push(t);
    }
    this.metrics.tick(poolSize, performance.now() - started);
  }

  waiting(): Iterable<SimTicket> {
    return this.list.byId.values();
  }

  waitingCount(): number {
    return this.list.byId.size;
  }
}

interface Forming {
  room: number[];
  tickets: SimTicket[];
  teams: number[];
}

/** A match the latency-aware baseline is filling. */
interface OpenMatch {
  rulesetIndex: number;
  /** Free places per team. */
  room: number[];
  tickets: SimTicket[];
  teams: number[];
  /** Per host, the worst latency of the tickets so far. */
  worst: Uint16Array;
  /** Arrival of its first ticket: the walk is in arrival order, so its oldest. */
  oldestMs: number;
}

/**
 * Latency-aware first-come (issue 19's "first-come, latency-aware" baseline). Every tick it walks the waiting
 * tickets in arrival order and keeps any number of forming matches per ruleset. A ticket joins the first
 * forming match (rulesets in config order, then oldest match first) that it fits: its party fits a team
 * (first team with room), it is attribute-compatible with every ticket already there (docs/engine.md
 * "Attributes"; unspecified = compatible), and the match keeps a host where every ticket's latency is at most
 * the ruleset's max_latency_ms in force (relaxed by the oldest ticket's wait, as the engine's
 * `bounds_for_wait`). Otherwise it opens a new forming match in the first ruleset where its party fits and it
 * has an acceptable host of its own (else it waits). A full match is emitted on the host minimising its worst latency (an acceptable
 * one). Forming matches still partial at the end of the walk are abandoned; their tickets wait for the next
 * tick. Skill is ignored, and the latency bound holds whatever require_host says.
 */
export class LatencyAwareFcfs implements MatchSystem {
  readonly metrics: Metrics;
  private readonly list = new WaitingList();
  private readonly ttlMs: number;

  constructor(
    private readonly config: QueueConfig,
    private readonly model: PopulationModel,
  ) {
    this.metrics = new Metrics(config, model, false);
    this.ttlMs = config.ticket_ttl_secs * 1000;
  }

  async tick(nowMs: number, arrivals: readonly SimTicket[]): Promise<void> {
    const poolSize = this.list.admit(arrivals, nowMs, this.ttlMs, this.metrics);
    const started = performance.now();
    for (const m of this.formMatches(nowMs, [...this.list.byId.values()])) {
      for (const t of m.tickets) this.list.byId.delete(t.id);
      this.metrics.match(m, nowMs);
    }
    this.metrics.tick(poolSize, performance.now() - started);
  }

  /** One walk over `tickets` (in arrival order) at `nowMs`: the full matches it forms. Pure. */
  formMatches(nowMs: number, tickets: readonly SimTicket[]): FormedMatch[] {
    const rulesets = this.config.rulesets;
    const filters = this.config.engine.attribute_filters.length;
    const hostCount = this.model.hosts.length;
    const open: OpenMatch[][] = rulesets.map(() => []);
    const formed: FormedMatch[] = [];
    const latencyBound = (r: number, oldestMs: number) => boundsForWait(rulesets[r]!, nowMs - oldestMs).latency;
    /** Some host keeps every latency (the match's worst so far and t's) within `bound`. */
    const sharesHost = (worst: Uint16Array | undefined, t: SimTicket, bound: number) => {
      for (let h = 0; h < hostCount; h++) if (Math.max(worst?.[h] ?? 0, t.latency[h]!) <= bound) return true;
      return false;
    };
    const place = (m: OpenMatch, t: SimTicket, team: number) => {
      m.room[team] = m.room[team]! - t.partySize;
      m.tickets.push(t);
      m.teams.push(team);
      for (let h = 0; h < hostCount; h++) m.worst[h] = Math.max(m.worst[h]!, t.latency[h]!);
    };

    for (const t of tickets) {
      let joined: { r: number; i: number } | undefined;
      for (let r = 0; r < rulesets.length && !joined; r++) {
        if (t.partySize > rulesets[r]!.team_size) continue;
        for (let i = 0; i < open[r]!.length; i++) {
          const m = open[r]![i]!;
          const team = m.room.findIndex((free) => free >= t.partySize);
          if (team < 0) continue;
          let compatible = true;
          for (let f = 0; f < filters && compatible; f++) compatible = m.tickets.every((x) => pairCompatible(this.config, f, x, t));
          if (!compatible || !sharesHost(m.worst, t, latencyBound(r, m.oldestMs))) continue;
          place(m, t, team);
          joined = { r, i };
          break;
        }
      }
      if (joined) {
        const m = open[joined.r]![joined.i]!;
        if (m.room.every((free) => free === 0)) {
          open[joined.r]!.splice(joined.i, 1);
          formed.push({ rulesetIndex: m.rulesetIndex, tickets: m.tickets, teams: m.teams, host: bestHost(m.tickets) });
        }
        continue;
      }
      // A new forming match, in the first ruleset where the party fits and has an acceptable host of its own.
      const r = rulesets.findIndex((rs, i) => t.partySize <= rs.team_size && sharesHost(undefined, t, latencyBound(i, t.arrivalMs)));
      if (r < 0) continue;
      const ruleset = rulesets[r]!;
      const m: OpenMatch = {
        rulesetIndex: r,
        room: new Array<number>(ruleset.teams).fill(ruleset.team_size),
        tickets: [],
        teams: [],
        worst: new Uint16Array(hostCount),
        oldestMs: t.arrivalMs,
      };
      place(m, t, 0);
      if (m.room.every((free) => free === 0)) {
        formed.push({ rulesetIndex: r, tickets: m.tickets, teams: m.teams, host: bestHost(m.tickets) });
      } else {
        open[r]!.push(m);
      }
    }
    return formed;
  }

  waiting(): Iterable<SimTicket> {
    return this.list.byId.values();
  }

  waitingCount(): number {
    return this.list.byId.size;
  }
}
