// The two matchmakers the simulator compares, driven tick by tick on the same arrivals:
//  - EngineSystem: the real native engine in-process (TicketPool + TickRunner), ticked the way
//    QueueRuntime ticks it, with the simulated clock as now and as arrival times.
//  - BaselineSystem: naive first-come-first-served team filling.
import { performance } from 'node:perf_hooks';
import type { QueueConfig } from '../../src/config/queue-config.js';
import { TicketPool } from '../../src/engine/ticket-pool.js';
import { allMatches, engineParams, TickRunner } from '../../src/engine/tick-runner.js';
import { bestHost, Metrics, type FormedMatch } from './metrics.js';
import { REGIONS, type SimTicket } from './population.js';

export interface MatchSystem {
  readonly metrics: Metrics;
  /** Adds the tick's arrivals, expires tickets older than the TTL, forms matches at `nowMs`. */
  tick(nowMs: number, arrivals: readonly SimTicket[], tickIndex: number): Promise<void>;
  waiting(): Iterable<SimTicket>;
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
}

export class EngineSystem implements MatchSystem {
  readonly metrics: Metrics;
  private readonly pool: TicketPool;
  private readonly runner: TickRunner;
  private readonly list = new WaitingList();
  private readonly ttlMs: number;
  /** Pool host index -> REGIONS index (the pool interns host keys in order of first appearance). */
  private readonly hostMap: number[] = [];

  constructor(
    readonly config: QueueConfig,
    private readonly seed: number,
  ) {
    this.metrics = new Metrics(config, true);
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
    const matches = allMatches(await this.runner.run(this.pool, nowMs, (this.seed * 1_000_003 + tickIndex) >>> 0));
    const elapsed = performance.now() - started;
    // Rows -> ids before any row moves (swap-remove), as QueueRuntime does.
    const resolved = matches.map((m) => ({ m, ids: Array.from(m.rows, (row) => this.pool.ids[row]!) }));
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
        host: m.preferredHost === undefined ? undefined : this.regionOf(m.preferredHost),
      };
      this.metrics.match(formed, nowMs);
    }
    this.metrics.tick(poolSize, elapsed);
  }

  waiting(): Iterable<SimTicket> {
    return this.list.byId.values();
  }

  private regionOf(poolHost: number): number {
    let r = this.hostMap[poolHost];
    if (r === undefined) {
      const key = this.pool.hosts.keys[poolHost]!;
      r = REGIONS.findIndex((reg) => reg.key === key);
      if (r < 0) throw new Error(`engine chose unknown host "${key}"`);
      this.hostMap[poolHost] = r;
    }
    return r;
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

  constructor(private readonly config: QueueConfig) {
    this.metrics = new Metrics(config, false);
    this.ttlMs = config.ticket_ttl_secs * 1000;
    this.largestTeam = Math.max(...config.rulesets.map((r) => r.team_size));
  }

  async tick(nowMs: number, arrivals: readonly SimTicket[]): Promise<void> {
    for (const t of arrivals) {
      this.list.add(t);
      this.metrics.arrived(t);
    }
    for (const t of this.list.expire(nowMs, this.ttlMs)) this.metrics.expired(t);
    const poolSize = this.list.byId.size;
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
}

interface Forming {
  room: number[];
  tickets: SimTicket[];
  teams: number[];
}
