// What the simulator measures, identically for the engine and the baselines: per formed match (skill spread,
// team imbalance, host latency, the hard bounds in force) and per ticket (wait, expiry), plus per-segment
// breakdowns that expose who waits.
import type { QueueConfig, RulesetConfig } from '../../src/config/queue-config.js';
import { boundsForWait as engineBounds } from '../../src/engine/ruleset-bounds.js';
import { rulesetParams } from '../../src/engine/tick-runner.js';
import type { PopulationModel, SimTicket } from './population.js';

/** A formed match as any system reports it: its tickets, each ticket's team, and the chosen host. */
export interface FormedMatch {
  rulesetIndex: number;
  tickets: SimTicket[];
  teams: number[];
  /** Host index in the population model's hosts; undefined when the engine named none. */
  host: number | undefined;
  /** The engine: false when no host was acceptable to every ticket (its preferred host then only has the lowest
   *  worst latency). */
  hostAcceptable?: boolean;
}

export interface Segment {
  name: string;
  test: (t: SimTicket) => boolean;
}

/** Party sizes, the model's regions, mmr tails, and two-mode tickets where the model has them. */
export function segmentsFor(model: PopulationModel): Segment[] {
  return [
    ...model.partySizes.map(({ size: n }) => ({ name: n === 1 ? 'solo' : `party of ${n}`, test: (t: SimTicket) => t.partySize === n })),
    ...model.regions.map((r, i) => ({ name: r.key, test: (t: SimTicket) => t.region === i })),
    { name: 'mmr < 0.2', test: (t: SimTicket) => t.mmrMean < 0.2 },
    { name: 'mmr 0.2-0.8', test: (t: SimTicket) => t.mmrMean >= 0.2 && t.mmrMean <= 0.8 },
    { name: 'mmr > 0.8', test: (t: SimTicket) => t.mmrMean > 0.8 },
    ...(model.twoModesShare > 0 ? [{ name: model.twoModesLabel, test: (t: SimTicket) => t.twoModes }] : []),
  ];
}

/** Matches breaking a hard bound in force when they formed, in all and per bound (a match may break several). */
export interface Violations {
  matches: number;
  /** A team not exactly team_size players. */
  teams: number;
  /** Skill spread over the bound in force (relaxed by the oldest ticket's wait). */
  spread: number;
  imbalance: number;
  /** require_host and the chosen host over the latency bound in force (or no host); for the engine also a
   *  preferred host over the bound whatever require_host says (the engine only names acceptable hosts). */
  host: number;
  /** Two tickets an attribute filter forbids together. */
  attributes: number;
}

class SegmentStats {
  players = 0;
  matched = 0;
  expired = 0;
  waits: number[] = [];
}

export interface Summary {
  arrivedPlayers: number;
  arrivedTickets: number;
  matches: number;
  matchesByRuleset: Record<string, number>;
  playersMatched: number;
  ticketsMatched: number;
  expiredPlayers: number;
  expiredTickets: number;
  waitingAtEndPlayers: number;
  waitingAtEndTickets: number;
  /** Per matched player, seconds (a party of 5 counts five times). */
  waitSecs: Dist;
  /** Per matched ticket, seconds. */
  waitSecsPerTicket: Dist;
  /** max - min effective mmr over the match's tickets (raw mmr units). */
  skillSpread: Dist;
  /** max - min team mean effective mmr (raw units; party-size-weighted means). */
  teamImbalance: Dist;
  /** The match's worst ticket latency to the chosen host (ms). */
  hostLatencyMs: Dist;
  /** The first ruleset's base max_latency_ms (for labels; each match is judged by its own ruleset's). */
  hostOverMs: number;
  /** Matches whose host (the best one when the engine named none) has some ticket over the match's ruleset's
   *  base max_latency_ms, relaxation ignored. */
  hostOverLatency: number;
  hostOverLatencyShare: number;
  /** Engine matches formed with no acceptable host (require_host false); their latency is the best host's. */
  matchesWithoutHost: number;
  /** Matches that pair tickets an attribute filter forbids (expected 0 for the engine). */
  attributeViolations: number;
  /** Matches breaking a hard bound in force (expected 0 for the engine). */
  violations: Violations;
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
  arrivedPlayers = 0;
  arrivedTickets = 0;
  matches = 0;
  readonly matchesByRuleset: number[];
  playersMatched = 0;
  ticketsMatched = 0;
  expiredPlayers = 0;
  expiredTickets = 0;
  private readonly waits: number[] = [];
  private readonly ticketWaits: number[] = [];
  private readonly spreads: number[] = [];
  private readonly imbalances: number[] = [];
  private readonly hostLatencies: number[] = [];
  private readonly poolSizes: number[] = [];
  private readonly tickTimes: number[] = [];
  hostOverLatency = 0;
  matchesWithoutHost = 0;
  attributeViolations = 0;
  readonly violations: Violations = { matches: 0, teams: 0, spread: 0, imbalance: 0, host: 0, attributes: 0 };
  private readonly segmentDefs: readonly Segment[];
  private readonly segments: SegmentStats[];
  private readonly norm: number;
  /** The "host > X ms" label: the first ruleset's base max_latency_ms. */
  readonly latencyThreshold: number;

  constructor(
    private readonly config: QueueConfig,
    model: PopulationModel,
    /** The engine: its preferred host, when it names one, must be acceptable whatever require_host says. */
    private readonly isEngine: boolean,
  ) {
    this.matchesByRuleset = config.rulesets.map(() => 0);
    this.norm = config.engine.mmr_normalization_ref;
    this.latencyThreshold = config.rulesets[0]!.max_latency_ms;
    this.segmentDefs = segmentsFor(model);
    this.segments = this.segmentDefs.map(() => new SegmentStats());
  }

  arrived(t: SimTicket): void {
    this.arrivedTickets++;
    this.arrivedPlayers += t.partySize;
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
      this.ticketWaits.push(waitSecs);
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
    if (host === undefined || m.hostAcceptable === false) this.matchesWithoutHost++;
    if (host === undefined) host = bestHost(m.tickets);
    const latency = cost(host);
    this.hostLatencies.push(latency);
    if (latency > ruleset.max_latency_ms) this.hostOverLatency++;

    const badAttributes = !attributesCompatible(this.config, m.tickets);
    if (badAttributes) this.attributeViolations++;

    const bounds = boundsForWait(ruleset, nowMs - oldest);
    const eps = 1e-9;
    const v = this.violations;
    const badTeams = teamPlayers.some((n) => n !== ruleset.team_size);
    const badSpread = spread / this.norm > bounds.spread + eps;
    const badImbalance = imbalance / this.norm > bounds.imbalance + eps;
    const hostBroken = m.host === undefined || latency > bounds.latency;
    const claimedAcceptable = this.isEngine && m.host !== undefined && m.hostAcceptable !== false;
    const badHost = (ruleset.require_host && hostBroken) || (claimedAcceptable && latency > bounds.latency);
    if (badTeams) v.teams++;
    if (badSpread) v.spread++;
    if (badImbalance) v.imbalance++;
    if (badHost) v.host++;
    if (badAttributes) v.attributes++;
    if (badTeams || badSpread || badImbalance || badHost || badAttributes) v.matches++;
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
      arrivedPlayers: this.arrivedPlayers,
      arrivedTickets: this.arrivedTickets,
      matches: this.matches,
      matchesByRuleset: Object.fromEntries(this.config.rulesets.map((r, i) => [r.id, this.matchesByRuleset[i]!])),
      playersMatched: this.playersMatched,
      ticketsMatched: this.ticketsMatched,
      expiredPlayers: this.expiredPlayers,
      expiredTickets: this.expiredTickets,
      waitingAtEndPlayers: waitingPlayers,
      waitingAtEndTickets: waitingTickets,
      waitSecs: dist(this.waits),
      waitSecsPerTicket: dist(this.ticketWaits),
      skillSpread: dist(this.spreads),
      teamImbalance: dist(this.imbalances),
      hostLatencyMs,
      hostOverMs: this.latencyThreshold,
      hostOverLatency: this.hostOverLatency,
      hostOverLatencyShare: this.matches === 0 ? NaN : this.hostOverLatency / this.matches,
      matchesWithoutHost: this.matchesWithoutHost,
      attributeViolations: this.attributeViolations,
      violations: { ...this.violations },
      poolTickets: dist(this.poolSizes),
      tickMs: dist(this.tickTimes),
      segments: this.segmentDefs.map((seg, i) => {
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
    this.segmentDefs.forEach((seg, i) => {
      if (seg.test(t)) f(this.segments[i]!);
    });
  }
}

/** The host minimising the match's worst ticket latency (ties: lowest index). */
export function bestHost(tickets: readonly SimTicket[]): number {
  let best = 0;
  let bestCost = Infinity;
  const hosts = tickets[0]?.latency.length ?? 0;
  for (let h = 0; h < hosts; h++) {
    let cost = 0;
    for (const t of tickets) cost = Math.max(cost, t.latency[h]!);
    if (cost < bestCost) {
      bestCost = cost;
      best = h;
    }
  }
  return best;
}

/** The bounds in force when the oldest ticket has waited `waitMs`: the engine's own (src/engine/ruleset-bounds.ts),
 *  relaxation steps and continuous expansion included. */
export function boundsForWait(ruleset: RulesetConfig, waitMs: number): { spread: number; latency: number; imbalance: number } {
  const b = engineBounds(rulesetParams(ruleset), waitMs);
  return { spread: b.maxSkillSpread, latency: b.maxLatencyMs, imbalance: b.maxTeamImbalance };
}

/** docs/engine.md "Attributes": two tickets compatible under filter f (unspecified = compatible with everyone). */
export function pairCompatible(config: QueueConfig, f: number, a: SimTicket, b: SimTicket): boolean {
  const x = a.attrs[f];
  const y = b.attrs[f];
  if (!x || !y) return true;
  if (config.engine.attribute_filters[f]!.mode === 'containment') return subset(x.values, y.accepts) && subset(y.values, x.accepts);
  for (const v of x.values) if (y.values.has(v)) return true;
  return false;
}

/** Every pair of tickets compatible under every filter. */
export function attributesCompatible(config: QueueConfig, tickets: readonly SimTicket[]): boolean {
  const filters = config.engine.attribute_filters.length;
  for (let f = 0; f < filters; f++) {
    for (let i = 0; i < tickets.length; i++) {
      for (let j = i + 1; j < tickets.length; j++) if (!pairCompatible(config, f, tickets[i]!, tickets[j]!)) return false;
    }
  }
  return true;
}

const subset = (a: Set<string>, b: Set<string>) => [...a].every((v) => b.has(v));
