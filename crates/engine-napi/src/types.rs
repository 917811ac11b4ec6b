//! The objects JavaScript passes in (`#[napi(object)]`; napi-rs writes their TypeScript types to
//! native/index.d.cts). Queue parameters are plain numbers; pools, requests and outputs are typed
//! arrays shared with JavaScript, never copied.

use napi::bindgen_prelude::{BigUint64Array, Float64Array, Uint16Array, Uint32Array, Uint8Array};
use napi_derive::napi;

#[napi(object)]
pub struct RelaxationStepParams {
    pub after_wait_ms: f64,
    pub max_skill_spread: f64,
    pub max_latency_ms: u32,
}

/// How a ruleset's bounds widen continuously with wait (the engine's `Expansion`).
#[napi(object)]
pub struct ExpansionParams {
    /// "none", "linear" or "exponential".
    pub curve: String,
    pub over_ms: f64,
    pub max_skill_spread: f64,
    pub max_team_imbalance: f64,
    pub max_latency_ms: u32,
    pub any_host_after_ms: f64,
}

// The engine's `Ruleset` is converted from this in one place (convert.rs).
#[napi(object)]
pub struct RulesetParams {
    pub teams: u32,
    pub team_size: u32,
    pub max_skill_spread: f64,
    pub max_team_imbalance: f64,
    pub max_latency_ms: u32,
    pub require_host: bool,
    pub relaxation: Vec<RelaxationStepParams>,
    pub expansion: ExpansionParams,
}

/// A queue's engine parameters; set when the queue is configured, not per tick.
#[napi(object)]
pub struct QueueParams {
    pub mmr_normalization_ref: f64,
    pub party_synergy_bonus: f64,
    /// One per attribute filter column: "overlap" or "containment", and "continued" for the further
    /// columns (64 values each) of a filter with more than 64 values.
    pub filter_modes: Vec<String>,
    pub rulesets: Vec<RulesetParams>,
}

/// The pool's columns. Arrays may be longer than the pool (spare capacity); the first
/// `ticketCount` entries (times the filter or host count) are read.
#[napi(object)]
pub struct PoolArrays {
    pub party_size: Uint8Array,
    pub mmr_mean: Float64Array,
    pub arrival_ms: Float64Array,
    pub ruleset_mask: Uint32Array,
    pub attr_values: BigUint64Array,
    pub attr_accepts: BigUint64Array,
    pub latency_ms: Uint16Array,
    pub ticket_count: u32,
    pub filter_count: u32,
    pub host_count: u32,
}

/// What changed in the pool since the engine's last tick (the engine's `PoolChanges`): the pool's ticket
/// count then, and the rows written since. With it a tick updates the layout the last one kept.
#[napi(object)]
pub struct PoolChangeArrays {
    pub previous_count: u32,
    pub rows: Uint32Array,
}

/// Preallocated outputs, sized by the host for its pool capacity (see OutputCapacity::for_pool).
#[napi(object)]
pub struct MatchArrays {
    pub match_ruleset: Uint32Array,
    pub match_offsets: Uint32Array,
    pub match_tickets: Uint32Array,
    pub ticket_team: Uint32Array,
    pub match_preferred_host: Uint32Array,
    /// Per match, one word per 64 hosts (at least one).
    pub match_acceptable_hosts: BigUint64Array,
    pub match_accepts: BigUint64Array,
    /// When given, the tick's rule diagnostics (docs/rule-diagnostics.md): per ruleset r, at
    /// `r * 7`, the rejections by reason (skill_spread, team_imbalance, no_acceptable_host,
    /// attributes, party_size), then failed candidates, then tickets examined. Needs at least
    /// rulesets × 7 elements; every one of them is written.
    pub rule_counts: Option<Float64Array>,
    /// When given, the per-ticket refusal record (docs/rule-diagnostics.md, "Per ticket"): one byte per
    /// ticket, by pool row: 0 none (matched), 1 to 5 the reasons in `ruleCounts` order, 6
    /// not_enough_tickets. Needs at least `ticketCount` elements; the first `ticketCount` are written.
    pub ticket_refusals: Option<Uint8Array>,
}

/// A queue's open backfill requests as columns (arrays may be longer than `requestCount`).
#[napi(object)]
pub struct BackfillArrays {
    pub ruleset: Uint32Array,
    pub slots: Uint32Array,
    pub skill: Float64Array,
    pub host: Uint32Array,
    pub arrival_ms: Float64Array,
    pub attr_values: BigUint64Array,
    pub attr_accepts: BigUint64Array,
    pub request_count: u32,
}

/// Preallocated backfill output: offsets (requestCount + 1) and assigned pool rows (pool size).
#[napi(object)]
pub struct BackfillOutput {
    pub offsets: Uint32Array,
    pub assigned: Uint32Array,
}
