// What the simulator measures, identically for the engine and the baseline: per formed match (skill spread,
// team imbalance, host latency, constraint checks) and per ticket (wait, expiry), plus per-segment
// breakdowns that expose who waits.
import type { QueueConfig } from '../../src/config/queue-config.js';
import { REGIONS, type SimTicket } from './population.js';

/** A formed match as either system reports it: its tickets, each ticket's team, and the chosen host. */
export interface FormedMatch {
  rulesetIndex: number;
  tickets: SimTicket[];
  teams: number[];
  /** Host index in REGIONS order; undefined when the engine found no acceptable host. */
  host: number | undefined;
}

export interface Segment {
  name: string;
  test: (t: SimTicket) => boolean;
}

export const SEGMENTS: readonly Segment[] = [
  ...[1, 2, 3, 4, 5].map((n) => ({ name: n === 1 ? 'solo' : `party of ${n}`, test: (t: SimTicket) => t.partySize === n })),
  ...REGIONS.map((r, i) => ({ name: r.key, test: (t: SimTicket) => t.region === i })),
  { name: 'mmr < 0.2', test: (t: SimTicket) => t.mmrMean < 0.2 },
  { name: 'mmr 0.2-0.8', test: (t: SimTicket) => t.mmrMean >= 0.2 && t.mmrMean <= 0.8 },
  { name: 'mmr > 0.8', test: (t: SimTicket) => t.mmrMean > 0.8 },
  { name: 'two game modes', test: (t: SimTicket) => t.twoModes },
];

class SegmentStats {
  players = 0;
  matched = 0;
  expired = 0;
  waits: number[] = [];
}

export interface Summary {
  matches: number;
  matchesByRuleset: Record<string, number>;
  playersMatched: number;
  ticketsMatched: number;
  expiredPlayers: number;
  expiredTickets: number;
  waitingAtEndPlayers: number;
  waitingAtEndTickets: number;
  /** Per matched player, seconds. */
  waitSecs: Dist;
  /** max - min effective mmr over the match's tickets (raw mmr units). */
  skillSpread: Dist;
  /** max - min team mean effective mmr (raw units; party-size-weighted means). */
  teamImbalance: Dist;
  /** The match's worst ticket latency to the chosen host (ms). */
  hostLatencyMs: Dist;
  hostOverMs: number;
  matchesOverLatency: number;
  shareOverLatency: number;
  /** Engine matches formed with no acceptable host (require_host false); their latency is the best host's. */
  matchesWithoutHost: number;
  /** Matches that pair tickets an attribute filter forbids (expected 0 for the engine). */
  attributeViolations: number;
  /** Engine only: matches breaking team sizes, spread, imbalance or (require_host) latency bounds. */
  constraintViolations: number;
  poolTickets: Dist;
  tickMs: Dist;
  segments: {
    name: string;
    players: number;
    matched: number;
    expired: number;
    matchedShare: number;
    expiredShare: number;
    waitP50: number;
    waitP95: number;
  }[];
}

/** The raw values behind a Summary's distributions, for the report's charts (bench/simulator/charts.ts). */
export interface Samples {
  /** Per matched player, seconds. */
  waitSecs: readonly number[];
  /** Per match, raw mmr units. */
  skillSpread: readonly number[];
  teamImbalance: readonly number[];
  /** Per match, ms. */
  hostLatencyMs: readonly number[];
  /** Per tick, tickets in the pool when the tick began. */
  poolTickets: readonly number[];
}

export interface Dist {
  count: number;
  mean: number;
  p50: number;
  p95: number;
  max: number;
}

export function dist(values: ArrayLike<number>): Dist {
  const n = values.length;
  if (n === 0) return { count: 0, mean: NaN, p50: NaN, p95: NaN, max: NaN };
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (let i = 0; i < n; i++) sum += sorted[i]!;
  // Nearest rank.
  const q = (p: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))]!;
  return { count: n, mean: sum / n, p50: q(0.5), p95: q(0.95), max: sorted[n - 1]! };
}

export class Metrics {
  matches = 0;
  readonly matchesByRuleset: number[];
  playersMatched = 0;
  ticketsMatched = 0;
  expiredPlayers = 0;
  expiredTickets = 0;
  private readonly waits: number[] = [];
  private readonly spreads: number[] = [];
  private readonly imbalances: number[] = [];
  private readonly hostLatencies: number[] = [];
  private readonly poolSizes: number[] = [];
  private readonly tickTimes: number[] = [];
  matchesOverLatency = 0;
  matchesWithoutHost = 0;
  attributeViolations = 0;
  constraintViolations = 0;
  private readonly segments = SEGMENTS.map(() => new SegmentStats());
  private readonly norm: number;
  /** The "host > X ms" threshold: the first ruleset's base max_latency_ms. */
  readonly latencyThreshold: number;

  constructor(
    private readonly config: QueueConfig,
    /** Check the engine's contract on every match (off for the baseline, which ignores it by design). */
    private readonly checkContract: boolean,
  ) {
    this.matchesByRuleset = config.rulesets.map(() => 0);
    this.norm = config.engine.mmr_normalization_ref;
    this.latencyThreshold = config.rulesets[0]!.max_latency_ms;
  }

  arrived(t: SimTicket): void {
    this.forSegments(t, (s) => (s.players += t.partySize));
  }

  expired(t: SimTicket): void {
    this.expiredTickets++;
    this.expiredPlayers += t.partySize;
    this.forSegments(t, (s) => (s.expired += t.partySize));
  }

  tick(poolTickets: number, tickMs: number): void {
    this.poolSizes.push(poolTickets);
    this.tickTimes.push(tickMs);
  }

  match(m: FormedMatch, nowMs: number): void {
    const ruleset = this.config.rulesets[m.rulesetIndex]!;
    this.matches++;
    this.matchesByRuleset[m.rulesetIndex]!++;
    let lo = Infinity;
    let hi = -Infinity;
    let oldest = Infinity;
    const teamSums = new Array<number>(ruleset.teams).fill(0);
    const teamPlayers = new Array<number>(ruleset.teams).fill(0);
    m.tickets.forEach((t, i) => {
      const waitSecs = (nowMs - t.arrivalMs) / 1000;
      for (let p = 0; p < t.partySize; p++) this.waits.push(waitSecs);
      this.forSegments(t, (s) => {
        s.matched += t.partySize;
        for (let p = 0; p < t.partySize; p++) s.waits.push(waitSecs);
      });
      this.playersMatched += t.partySize;
      this.ticketsMatched++;
      lo = Math.min(lo, t.eff);
      hi = Math.max(hi, t.eff);
      oldest = Math.min(oldest, t.arrivalMs);
      const team = m.teams[i]!;
      teamSums[team] = teamSums[team]! + t.eff * t.partySize;
      teamPlayers[team] = teamPlayers[team]! + t.partySize;
    });
    const spread = hi - lo;
    const means = teamSums.map((s) => s / ruleset.team_size);
    const imbalance = Math.max(...means) - Math.min(...means);
    this.spreads.push(spread);
    this.imbalances.push(imbalance);

    const cost = (h: number) => m.tickets.reduce((worst, t) => Math.max(worst, t.latency[h]!), 0);
    let host = m.host;
    if (host === undefined) {
      this.matchesWithoutHost++;
      host = bestHost(m.tickets);
    }
    const latency = cost(host);
    this.hostLatencies.push(latency);
    if (latency > this.latencyThreshold) this.matchesOverLatency++;

    if (!attributesCompatible(this.config, m.tickets)) this.attributeViolations++;

    if (this.checkContract) {
      const bounds = boundsForWait(ruleset, nowMs - oldest);
      const eps = 1e-9;
      const badTeams = teamPlayers.some((n) => n !== ruleset.team_size);
      const badSpread = spread / this.norm > bounds.spread + eps;
      const badImbalance = imbalance / this.norm > ruleset.max_team_imbalance + eps;
      const badHost = (ruleset.require_host && m.host === undefined) || (m.host !== undefined && latency > bounds.latency);
      if (badTeams || badSpread || badImbalance || badHost) this.constraintViolations++;
    }
  }

  summary(waiting: Iterable<SimTicket>): Summary {
    let waitingPlayers = 0;
    let waitingTickets = 0;
    for (const t of waiting) {
      waitingPlayers += t.partySize;
      waitingTickets++;
    }
    const hostLatencyMs = dist(this.hostLatencies);
    return {
      matches: this.matches,
      matchesByRuleset: Object.fromEntries(this.config.rulesets.map((r, i) => [r.id, this.matchesByRuleset[i]!])),
      playersMatched: this.playersMatched,
      ticketsMatched: this.ticketsMatched,
      expiredPlayers: this.expiredPlayers,
      expiredTickets: this.expiredTickets,
      waitingAtEndPlayers: waitingPlayers,
      waitingAtEndTickets: waitingTickets,
      waitSecs: dist(this.waits),
      skillSpread: dist(this.spreads),
      teamImbalance: dist(this.imbalances),
      hostLatencyMs,
      hostOverMs: this.latencyThreshold,
      matchesOverLatency: this.matchesOverLatency,
      shareOverLatency: this.matches === 0 ? NaN : this.matchesOverLatency / this.matches,
      matchesWithoutHost: this.matchesWithoutHost,
      attributeViolations: this.attributeViolations,
      constraintViolations: this.constraintViolations,
      poolTickets: dist(this.poolSizes),
      tickMs: dist(this.tickTimes),
      segments: SEGMENTS.map((seg, i) => {
        const s = this.segments[i]!;
        const w = dist(s.waits);
        return {
          name: seg.name,
          players: s.players,
          matched: s.matched,
          expired: s.expired,
          matchedShare: s.players === 0 ? NaN : s.matched / s.players,
          expiredShare: s.players === 0 ? NaN : s.expired / s.players,
          waitP50: w.p50,
          waitP95: w.p95,
        };
      }),
    };
  }

  samples(): Samples {
    return {
      waitSecs: this.waits,
      skillSpread: this.spreads,
      teamImbalance: this.imbalances,
      hostLatencyMs: this.hostLatencies,
      poolTickets: this.poolSizes,
    };
  }

  private forSegments(t: SimTicket, f: (s: SegmentStats) => void): void {
    SEGMENTS.forEach((seg, i) => {
      if (seg.test(t)) f(this.segments[i]!);
    });
  }
}

/** The host minimising the match's worst ticket latency (ties: lowest index). */
export function bestHost(tickets: readonly SimTicket[]): number {
  let best = 0;
  let bestCost = Infinity;
  for (let h = 0; h < REGIONS.length; h++) {
    let cost = 0;
    for (const t of tickets) cost = Math.max(cost, t.latency[h]!);
    if (cost < bestCost) {
      bestCost = cost;
      best = h;
    }
  }
  return best;
}

/** docs/engine.md: the bounds of the last relaxation step whose after_wait <= wait. */
function boundsForWait(ruleset: QueueConfig['rulesets'][number], waitMs: number): { spread: number; latency: number } {
  let spread = ruleset.max_skill_spread;
  let latency = ruleset.max_latency_ms;
  for (const step of ruleset.relaxation) {
    if (step.after_wait_secs * 1000 <= waitMs) {
      spread = step.max_skill_spread;
      latency = step.max_latency_ms;
    }
  }
  return { spread, latency };
}

/** Every pair of tickets compatible under every filter (unspecified = compatible with everyone). */
function attributesCompatible(config: QueueConfig, tickets: readonly SimTicket[]): boolean {
  const filters = config.engine.attribute_filters;
  for (let f = 0; f < filters.length; f++) {
    const containment = filters[f]!.mode === 'containment';
    for (let i = 0; i < tickets.length; i++) {
      const a = tickets[i]!.attrs[f];
      if (!a) continue;
      for (let j = i + 1; j < tickets.length; j++) {
        const b = tickets[j]!.attrs[f];
        if (!b) continue;
        const ok = containment ? subset(a.values, b.accepts) && subset(b.values, a.accepts) : [...a.values].some((v) => b.values.has(v));
        if (!ok) return false;
      }
    }
  }
  return true;
}

const subset = (a: Set<string>, b: Set<string>) => [...a].every((v) => b.has(v));
