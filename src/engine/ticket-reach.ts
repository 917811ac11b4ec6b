// Which waiting tickets one ticket could be matched with, rule by rule (docs/explain-and-statistics.md): for
// each ruleset it competes in, the bounds in force for its wait, when they next widen, and how many other
// tickets of the pool pass each of the engine's pairwise rules alone and all of them together. A pure function
// of the pool's columns, O(pool) per call; computed on demand, never by the tick.
import type { QueueConfig } from '../config/queue-config.js';
import { type Bounds, boundsForWait, nextWidening } from './ruleset-bounds.js';
import { engineParams } from './tick-runner.js';
import type { TicketPool } from './ticket-pool.js';

/** Other waiting tickets of a ruleset, and of those how many pass each rule alone, and all together. */
export interface RuleCounts {
  /** Waiting tickets (this one aside) that compete in the ruleset. */
  inRuleset: number;
  /** Its party and theirs fit one match: in one team (a 1-team ruleset) or each in a team of its own. */
  partyFits: number;
  /** Their effective skill is within the spread bound in force of this ticket's. */
  skillWithinSpread: number;
  /** Compatible on every attribute filter. */
  attributesCompatible: number;
  /** Some host is within the latency bound in force for both. */
  acceptableHost: number;
  /** Pass every rule above; the host rule only while it is in force (`hostRequired`). */
  all: number;
  /** Players in the tickets counted in `all`. */
  playersAll: number;
}

export interface RulesetReach {
  rulesetIndex: number;
  /** The bounds the ruleset applies to this ticket as a seed, for its wait (steps and expansion). */
  bounds: Bounds;
  requireHost: boolean;
  /**
   * Whether a match needs a common acceptable host now: with require_host always; without it, until the
   * seed may form one without (`bounds.anyHost`), and only when the queue has host keys at all.
   */
  hostRequired: boolean;
  /** When they widen next (a wait, from the ticket's creation); undefined when they no longer do. */
  nextWidening: { atWaitMs: number; continuous: boolean } | undefined;
  /** Players a match of the ruleset still needs beside this ticket's party. */
  playersNeeded: number;
  counts: RuleCounts;
}

/** The ticket at `row` against every other ticket of the pool, per ruleset it competes in, at `nowMs`. */
export function ticketReach(pool: TicketPool, row: number, config: QueueConfig, nowMs: number): RulesetReach[] {
  const { partySize, mmrMean, rulesetMask, attrValues, attrAccepts, latencyMs, count: n, filterCount: F, hostCount: H } = pool;
  const { mmr_normalization_ref: norm, party_synergy_bonus: bonus, attribute_filters: filters } = config.engine;
  const eff = (i: number) => mmrMean[i]! + bonus * (partySize[i]! - 1);
  const mine = eff(row);
  const party = partySize[row]!;
  const waitMs = nowMs - pool.arrivalMs[row]!;

  // Attributes do not depend on the ruleset: one pass. Per filter (its columns, 64 values each): overlap =
  // values meet in some column; containment = in every column, each side's values are within the other's
  // accepts (unspecified values are all-ones or zero, as the pool stores them). The u64 columns are read as
  // two u32 halves (little-endian), so no bigint is made per ticket.
  const halves = (a: BigUint64Array) => new Uint32Array(a.buffer, a.byteOffset, a.length * 2);
  const [values, accepts] = [halves(attrValues), halves(attrAccepts)];
  const spans = pool.filterSpans().map(({ start, width }, f) => ({
    from: 2 * start,
    to: 2 * (start + width),
    containment: filters[f]!.mode === 'containment',
  }));
  const compatible = new Uint8Array(n);
  const me = 2 * row * F;
  for (let i = 0; i < n; i++) {
    const them = 2 * i * F;
    let ok = true;
    for (let s = 0; s < spans.length && ok; s++) {
      const { from, to, containment } = spans[s]!;
      let meet = false;
      for (let w = from; w < to; w++) {
        const [mine, theirs] = [values[me + w]!, values[them + w]!];
        if (containment) ok &&= ((mine & ~accepts[them + w]!) | (theirs & ~accepts[me + w]!)) === 0;
        else meet ||= (mine & theirs) !== 0;
      }
      if (!containment) ok = meet;
    }
    compatible[i] = ok ? 1 : 0;
  }

  const reach: RulesetReach[] = [];
  engineParams(config).rulesets.forEach((rs, r) => {
    if (((rulesetMask[row]! >>> r) & 1) === 0) return;
    const bounds = boundsForWait(rs, waitMs);
    const hostRequired = rs.requireHost || (H > 0 && !bounds.anyHost);
    // This ticket's hosts within the bound: a candidate passes when it is within the bound of one of them. A
    // column whose host lost its last ticket since the tick still reads as a host's until the next one.
    const hosts: number[] = [];
    for (let h = 0; h < H; h++) if (pool.isHost(h) && latencyMs[row * H + h]! <= bounds.maxLatencyMs) hosts.push(h);
    const counts: RuleCounts = {
      inRuleset: 0,
      partyFits: 0,
      skillWithinSpread: 0,
      attributesCompatible: 0,
      acceptableHost: 0,
      all: 0,
      playersAll: 0,
    };
    for (let i = 0; i < n; i++) {
      if (i === row || ((rulesetMask[i]! >>> r) & 1) === 0) continue;
      counts.inRuleset++;
      const size = partySize[i]!;
      const fits = party <= rs.teamSize && (rs.teams === 1 ? party + size <= rs.teamSize : size <= rs.teamSize);
      const skill = Math.abs(eff(i) - mine) / norm <= bounds.maxSkillSpread;
      const attrs = compatible[i] === 1;
      let host = false;
      for (let k = 0; k < hosts.length && !host; k++) host = latencyMs[i * H + hosts[k]!]! <= bounds.maxLatencyMs;
      counts.partyFits += Number(fits);
      counts.skillWithinSpread += Number(skill);
      counts.attributesCompatible += Number(attrs);
      counts.acceptableHost += Number(host);
      if (fits && skill && attrs && (host || !hostRequired)) {
        counts.all++;
        counts.playersAll += size;
      }
    }
    reach.push({
      rulesetIndex: r,
      bounds,
      requireHost: rs.requireHost,
      hostRequired,
      nextWidening: nextWidening(rs, waitMs),
      playersNeeded: Math.max(0, rs.teams * rs.teamSize - party),
      counts,
    });
  });
  return reach;
}
