// How good a formed match is, in the units of the ruleset's bounds (docs/engine.md: effective skill,
// balance): its skill spread and team imbalance, divided by mmr_normalization_ref, and how long each of
// its tickets waited. Read from the pool's columns, so it must run while the match's rows are unchanged.
import type { QueueConfig } from '../config/queue-config.js';
import type { EngineMatch } from './tick-runner.js';
import type { TicketPool } from './ticket-pool.js';

export interface MatchQuality {
  skillSpread: number;
  teamImbalance: number;
  /** Per ticket of the match, in match order. */
  waitsMs: number[];
  players: number;
}

export function matchQuality(match: EngineMatch, pool: TicketPool, config: QueueConfig, nowMs: number): MatchQuality {
  const ruleset = config.rulesets[match.rulesetIndex]!;
  const { mmr_normalization_ref: norm, party_synergy_bonus: bonus } = config.engine;
  const teamSums = new Array<number>(ruleset.teams).fill(0);
  const waitsMs: number[] = [];
  let lo = Infinity;
  let hi = -Infinity;
  let players = 0;
  match.rows.forEach((row, i) => {
    const size = pool.partySize[row]!;
    const effective = pool.mmrMean[row]! + bonus * (size - 1);
    lo = Math.min(lo, effective);
    hi = Math.max(hi, effective);
    const team = match.teams[i]!;
    teamSums[team] = teamSums[team]! + effective * size;
    players += size;
    waitsMs.push(Math.max(0, nowMs - pool.arrivalMs[row]!));
  });
  const means = teamSums.map((sum) => sum / ruleset.team_size);
  return {
    skillSpread: players === 0 ? 0 : (hi - lo) / norm,
    teamImbalance: means.length < 2 ? 0 : (Math.max(...means) - Math.min(...means)) / norm,
    waitsMs,
    players,
  };
}
