// The reference engine's (reference-engine.ts) team balancing, as tick/balance.rs: a full candidate's
// tickets are repacked greedily, then improved by swaps, and the match holds only if the imbalance bound
// does. Pure: it reads the tickets' skill and party size and rewrites `team` in place.
import type { RulesetParams } from '../../../src/engine/native.js';
import { range, totalCmp } from './reference-numbers.js';

/** As MIN_SWAP_GAIN in tick/balance.rs: a balancing swap must shrink the team gap, not mirror it. */
const MIN_SWAP_GAIN = 1 - 1e-9;

/** Per skill position: effective skill and party size. */
export interface TicketSkills {
  eff: readonly number[];
  party: readonly number[];
}

/**
 * Rebalances `team` (a valid packing of the tickets at skill positions `sel` on entry) in place; returns
 * whether the imbalance bound holds. Only for full candidates with more than one team.
 */
export function balanceTeams(sel: readonly number[], team: number[], rs: RulesetParams, skills: TicketSkills, norm: number): boolean {
  const { eff, party } = skills;
  /** A ticket's weight in its team's skill sum: eff * party_size. */
  const weight = (p: number): number => eff[p]! * party[p]!;
  const len = sel.length;
  let sums = new Array<number>(rs.teams).fill(0);
  for (let i = 0; i < len; i++) sums[team[i]!]! += weight(sel[i]!);

  // (a) Greedy repacking: largest parties first, strongest first within a size (then skill position),
  // each into the team with the lowest sum that has room. Kept only if it packs and has a strictly
  // smaller range than the scan's packing.
  const order = Array.from({ length: len }, (_, i) => i).sort((a, b) => {
    const pa = sel[a]!;
    const pb = sel[b]!;
    return party[pb]! - party[pa]! || totalCmp(eff[pb]!, eff[pa]!) || pa - pb;
  });
  const altTeam = new Array<number>(len).fill(0);
  const altSums = new Array<number>(rs.teams).fill(0);
  const room = new Array<number>(rs.teams).fill(rs.teamSize);
  let packed = true;
  for (const i of order) {
    const size = party[sel[i]!]!;
    let best = -1;
    for (let t = 0; t < rs.teams; t++) if (room[t]! >= size && (best === -1 || altSums[t]! < altSums[best]!)) best = t;
    if (best === -1) {
      packed = false;
      break;
    }
    room[best]! -= size;
    altTeam[i] = best;
    altSums[best]! += weight(sel[i]!);
  }
  if (packed && range(altSums) < range(sums)) {
    for (let i = 0; i < len; i++) team[i] = altTeam[i]!;
    sums = altSums;
  }

  // (b) Improving swaps of two equal-size tickets between the strongest and the weakest team: take the
  // swap that leaves the smallest gap (first found on ties), while it strictly shrinks the gap; at most
  // 4 * len rounds.
  for (let round = 0; round < 4 * len; round++) {
    let tmax = 0;
    let tmin = 0;
    for (let t = 1; t < rs.teams; t++) {
      if (sums[t]! > sums[tmax]!) tmax = t;
      if (sums[t]! < sums[tmin]!) tmin = t;
    }
    const diff = sums[tmax]! - sums[tmin]!;
    if (tmax === tmin || diff <= 0) break;
    let best: { a: number; b: number; newDiff: number } | undefined;
    for (let a = 0; a < len; a++) {
      if (team[a] !== tmax) continue;
      for (let b = 0; b < len; b++) {
        if (team[b] !== tmin || party[sel[a]!] !== party[sel[b]!]) continue;
        const d = weight(sel[a]!) - weight(sel[b]!);
        const newDiff = Math.abs(diff - 2.0 * d);
        if (d > 0 && newDiff < diff * MIN_SWAP_GAIN && (best === undefined || newDiff < best.newDiff)) best = { a, b, newDiff };
      }
    }
    if (best === undefined) break;
    const d = weight(sel[best.a]!) - weight(sel[best.b]!);
    sums[tmax]! -= d;
    sums[tmin]! += d;
    team[best.a] = tmin;
    team[best.b] = tmax;
  }

  // Imbalance: (max team mean - min team mean) / norm, a team's mean being its sum / team_size.
  return range(sums) / rs.teamSize / norm <= rs.maxTeamImbalance;
}
