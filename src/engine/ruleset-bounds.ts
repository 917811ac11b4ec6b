// The bounds a ruleset puts on a candidate match as its seed waits: the relaxation steps and the continuous
// expansion (docs/engine.md "Bounds"). The same arithmetic as `Ruleset::bounds_for_wait` in
// crates/engine/src/input.rs, bit for bit: the reference engine and explain read it from here.
import type { RulesetConfig } from '../config/queue-config.js';
import type { RulesetParams } from './native.js';

/** Limits of the engine's unbounded values: u32::MAX for latency. */
const U32_MAX = 0xffff_ffff;

export interface Bounds {
  maxSkillSpread: number;
  maxTeamImbalance: number;
  maxLatencyMs: number;
  /** The match may be formed without a common acceptable host (never with require_host). */
  anyHost: boolean;
}

/** No widening: the base bounds and the relaxation steps only (Expansion::NONE). */
export const NO_EXPANSION: RulesetParams['expansion'] = {
  curve: 'none',
  overMs: Number.POSITIVE_INFINITY,
  maxSkillSpread: Number.POSITIVE_INFINITY,
  maxTeamImbalance: Number.POSITIVE_INFINITY,
  maxLatencyMs: U32_MAX,
  anyHostAfterMs: 0,
};

/** A ruleset's expansion as the engine takes it (the binding's ExpansionParams). */
export function expansionParams(r: RulesetConfig): RulesetParams['expansion'] {
  const e = r.expansion;
  return {
    curve: e.curve,
    overMs: e.over_secs * 1000,
    maxSkillSpread: e.max_skill_spread ?? Number.POSITIVE_INFINITY,
    maxTeamImbalance: e.max_team_imbalance ?? Number.POSITIVE_INFINITY,
    maxLatencyMs: e.max_latency_ms ?? r.max_latency_ms,
    anyHostAfterMs: e.any_host_after_secs * 1000,
  };
}

/** 2^k for an integer k in 0..=1023, exactly (Expansion::growth builds it from its bits too). */
function powerOfTwo(k: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(k + 1023) << 52n);
  return view.getFloat64(0);
}

/** The factor the base bounds are multiplied by at `waitMs` (Expansion::growth). */
export function growth(e: RulesetParams['expansion'], waitMs: number): number {
  const t = waitMs > 0 ? waitMs / e.overMs : 0;
  if (e.curve === 'linear') return 1 + t;
  if (e.curve !== 'exponential') return 1;
  const k = Math.floor(t);
  if (k >= 1024) return Number.MAX_VALUE;
  return powerOfTwo(k) * (1 + (t - k));
}

/** The bounds in force for a candidate whose seed has waited `waitMs` (Ruleset::bounds_for_wait). */
export function boundsForWait(rs: RulesetParams, waitMs: number): Bounds {
  let spread = rs.maxSkillSpread;
  let latency = rs.maxLatencyMs;
  for (const step of rs.relaxation) {
    if (step.afterWaitMs <= waitMs) {
      spread = step.maxSkillSpread;
      latency = step.maxLatencyMs;
    } else break;
  }
  const e = rs.expansion;
  const g = growth(e, waitMs);
  const grownLatency = Math.min(Math.floor(rs.maxLatencyMs * g), e.maxLatencyMs, U32_MAX);
  return {
    maxSkillSpread: Math.max(spread, Math.min(rs.maxSkillSpread * g, e.maxSkillSpread)),
    maxTeamImbalance: Math.max(rs.maxTeamImbalance, Math.min(rs.maxTeamImbalance * g, e.maxTeamImbalance)),
    maxLatencyMs: Math.max(latency, grownLatency),
    anyHost: !rs.requireHost && waitMs >= e.anyHostAfterMs,
  };
}

/** The widest latency bound any seed can have (Ruleset::widest_latency_ms). */
export function widestLatencyMs(rs: RulesetParams): number {
  const step = rs.relaxation.at(-1)?.maxLatencyMs ?? 0;
  const grown = rs.expansion.curve === 'none' ? 0 : rs.expansion.maxLatencyMs;
  return Math.max(rs.maxLatencyMs, step, grown);
}

/**
 * When the bounds next widen after `waitMs`: the next relaxation step's wait, or, while the expansion still
 * widens some bound (below its limit), `continuous` (they widen at every tick). Undefined once nothing
 * widens any more.
 */
export function nextWidening(rs: RulesetParams, waitMs: number): { atWaitMs: number; continuous: boolean } | undefined {
  const now = boundsForWait(rs, waitMs);
  const e = rs.expansion;
  const widening =
    e.curve !== 'none' &&
    ((now.maxSkillSpread < e.maxSkillSpread && rs.maxSkillSpread > 0) ||
      (now.maxTeamImbalance < e.maxTeamImbalance && rs.maxTeamImbalance > 0) ||
      now.maxLatencyMs < Math.min(e.maxLatencyMs, U32_MAX));
  if (widening) return { atWaitMs: waitMs, continuous: true };
  const step = rs.relaxation.find((s) => s.afterWaitMs > waitMs);
  if (step) return { atWaitMs: step.afterWaitMs, continuous: false };
  if (!rs.requireHost && !now.anyHost) return { atWaitMs: e.anyHostAfterMs, continuous: false };
  return undefined;
}
