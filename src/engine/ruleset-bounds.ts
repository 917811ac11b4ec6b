// The bounds a ruleset applies to a seed that has waited a while, and when they next widen. Temporary
// version: today's relaxation steps only (docs/engine.md "Relaxation"; Ruleset::bounds_for_wait in
// crates/engine), until the continuous expansion lands with the same two functions.
import type { RulesetConfig } from '../config/queue-config.js';

export interface RulesetBounds {
  maxSkillSpread: number;
  maxTeamImbalance: number;
  maxLatencyMs: number;
}

/** The bounds in force for a seed that has waited `waitMs`: the last step with `after_wait_secs` reached, else the base. */
export function boundsAt(ruleset: RulesetConfig, waitMs: number): RulesetBounds {
  const bounds: RulesetBounds = {
    maxSkillSpread: ruleset.max_skill_spread,
    maxTeamImbalance: ruleset.max_team_imbalance,
    maxLatencyMs: ruleset.max_latency_ms,
  };
  for (const step of ruleset.relaxation) {
    if (step.after_wait_secs * 1000 > waitMs) break;
    bounds.maxSkillSpread = step.max_skill_spread;
    bounds.maxLatencyMs = step.max_latency_ms;
  }
  return bounds;
}

/**
 * When the bounds next widen for a seed that has waited `waitMs`: the wait of the next step (`continuous` is
 * true only while a continuous expansion is still widening); undefined when they no longer widen.
 */
export function nextWidening(ruleset: RulesetConfig, waitMs: number): { atWaitMs: number; continuous: boolean } | undefined {
  const step = ruleset.relaxation.find((s) => s.after_wait_secs * 1000 > waitMs);
  return step && { atWaitMs: step.after_wait_secs * 1000, continuous: false };
}
