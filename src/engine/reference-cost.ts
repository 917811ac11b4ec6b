// The reference engine's (reference-engine.ts) candidate cost: what crates/engine/src/tick/search.rs `cost`
// computes to compare the candidates grown around one seed, in the same floating-point order.
import { range } from './reference-numbers.js';
import type { Bounds } from './ruleset-bounds.js';

/** `x / bound`, or 0 for an unbounded (or zero) bound. */
const share = (x: number, bound: number): number => (bound > 0 && bound < Infinity ? x / bound : 0);

/** One candidate as the cost reads it: per selected ticket (selection order) its skill, party size and team. */
export interface CandidateView {
  eff: readonly number[];
  party: readonly number[];
  team: readonly number[];
  /** The worst latency of the selected tickets to host h. */
  worstLatency(h: number): number;
  /** Hosts the cost may choose from (a bit per host index). */
  hosts: bigint;
}

/**
 * Spread, team imbalance and the worst latency at the best of `view.hosts`, each divided by its bound in force
 * (a term whose bound is unbounded or zero counts 0). Imbalance is the range of team sums in selection order.
 */
export function candidateCost(
  view: CandidateView,
  shape: { teams: number; teamSize: number },
  hostCount: number,
  norm: number,
  bounds: Bounds,
): number {
  const spread = range(view.eff) / norm;
  const teams = Math.min(shape.teams, 64);
  const sums = new Array<number>(teams).fill(0);
  view.eff.forEach((e, k) => {
    if (view.team[k]! < teams) sums[view.team[k]!]! += e * view.party[k]!;
  });
  const imbalance = teams > 1 && shape.teams <= 64 ? range(sums) / shape.teamSize / norm : 0;
  let latency = 0;
  if (hostCount > 0) {
    let best = 0xffff_ffff;
    for (let h = 0; h < hostCount; h++) {
      if (((view.hosts >> BigInt(h)) & 1n) === 0n) continue;
      best = Math.min(best, view.worstLatency(h));
    }
    latency = best;
  }
  return share(spread, bounds.maxSkillSpread) + share(imbalance, bounds.maxTeamImbalance) + share(latency, bounds.maxLatencyMs);
}
