// The reference engine's (reference-engine.ts) candidate cost: what crates/engine/src/tick/search.rs `cost`
// computes to compare the candidates grown around one seed, in the same floating-point order.
import { range } from './reference-numbers.js';
import type { Bounds } from '../../../src/engine/ruleset-bounds.js';

/** `x / bound`, or 0 for an unbounded (or zero) bound. */
const share = (x: number, bound: number): number => (bound > 0 && bound < Infinity ? x / bound : 0);

/** One candidate as the cost reads it: per selected ticket (selection order) its skill, party size and team. */
export interface CandidateView {
  eff: readonly number[];
  party: readonly number[];
  team: readonly number[];
  /** The worst latency of the selected tickets at their best host (0 without hosts). */
  latency: number;
}

/**
 * Spread, team imbalance and the worst latency at the best host, each divided by its bound in force (a term
 * whose bound is unbounded or zero counts 0). Imbalance is the range of team sums in selection order.
 */
export function candidateCost(view: CandidateView, shape: { teams: number; teamSize: number }, norm: number, bounds: Bounds): number {
  const spread = range(view.eff) / norm;
  const teams = Math.min(shape.teams, 64);
  const sums = new Array<number>(teams).fill(0);
  view.eff.forEach((e, k) => {
    if (view.team[k]! < teams) sums[view.team[k]!]! += e * view.party[k]!;
  });
  const imbalance = teams > 1 && shape.teams <= 64 ? range(sums) / shape.teamSize / norm : 0;
  return share(spread, bounds.maxSkillSpread) + share(imbalance, bounds.maxTeamImbalance) + share(view.latency, bounds.maxLatencyMs);
}
