//! What a tick reads: one queue's pool as columns, and the queue's parameters and rulesets.

/// How the tickets' attribute bitsets of one filter are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Compatible when `values_a & values_b != 0`.
    Overlap,
    /// Compatible when `values_a ⊆ accepts_b` and `values_b ⊆ accepts_a`.
    Containment,
    /// The next 64 values of the filter in the column before (a filter with more than 64 distinct
    /// values spans several columns, its mode in the first; see [`filter_groups`]). Its tickets are
    /// compared over all the filter's columns at once: overlap when any column's values meet,
    /// containment when every column's are contained.
    Continued,
}

/// The attribute filters as column groups `(first column, columns, mode)`: each filter's column and
/// the [`FilterMode::Continued`] columns after it. `validate` refuses a leading `Continued`.
pub(crate) fn filter_groups(modes: &[FilterMode]) -> impl Iterator<Item = (usize, usize, FilterMode)> + '_ {
    let mut k = 0;
    std::iter::from_fn(move || {
        let mode = *modes.get(k)?;
        let start = k;
        k += 1;
        while modes.get(k) == Some(&FilterMode::Continued) {
            k += 1;
        }
        Some((start, k - start, mode))
    })
}

/// Whether two tickets' rows of one filter (its columns' values and accepts) are compatible under
/// `mode` (the filter's first column's; never `Continued`).
pub(crate) fn compatible(
    mode: FilterMode,
    values_a: &[u64],
    accepts_a: &[u64],
    values_b: &[u64],
    accepts_b: &[u64],
) -> bool {
    match mode {
        FilterMode::Overlap => values_a.iter().zip(values_b).any(|(&a, &b)| a & b != 0),
        _ => values_a
            .iter()
            .zip(accepts_a)
            .zip(values_b.iter().zip(accepts_b))
            .fold(true, |ok, ((&va, &aa), (&vb, &ab))| ok & ((va & !ab) | (vb & !aa) == 0)),
    }
}

/// Bounds that replace the ruleset's base bounds once the oldest ticket of a candidate match
/// has waited `after_wait_ms`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RelaxationStep {
    pub after_wait_ms: f64,
    /// Normalized units, like [`Ruleset::max_skill_spread`].
    pub max_skill_spread: f64,
    pub max_latency_ms: u32,
}

/// How a ruleset's bounds widen continuously with the seed's wait, besides the relaxation steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    /// No continuous widening: only the relaxation steps.
    None,
    /// Each bound grows by its base value every `over_ms`: `base * (1 + wait / over_ms)`.
    Linear,
    /// Each bound doubles every `over_ms`, linearly between doublings:
    /// `base * 2^k * (1 + f)` where `wait / over_ms = k + f`, k an integer and `0 <= f < 1`.
    /// Exact in IEEE arithmetic (no `pow`), so every implementation computes the same bits.
    Exponential,
}

/// Continuous widening of a ruleset's bounds with the seed's wait (docs/engine.md "Bounds").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expansion {
    pub curve: Curve,
    /// The knob: how much wait a ticket spends for quality before its bounds double (exponential)
    /// or grow by their base (linear). > 0 and finite unless `curve` is `None`.
    pub over_ms: f64,
    /// Limits the widening never passes (>= the base; `inf` or `u32::MAX`: unbounded). A relaxation
    /// step above a limit still applies: the bound in force is the wider of the two.
    pub max_skill_spread: f64,
    pub max_team_imbalance: f64,
    pub max_latency_ms: u32,
    /// Without `require_host`: a seed first looks for a match with a common acceptable host; only once
    /// it has waited this long may it form one without (latency is then only minimised).
    pub any_host_after_ms: f64,
}

impl Expansion {
    /// No widening: the bounds are the base and the relaxation steps'.
    pub const NONE: Expansion = Expansion {
        curve: Curve::None,
        over_ms: f64::INFINITY,
        max_skill_spread: f64::INFINITY,
        max_team_imbalance: f64::INFINITY,
        max_latency_ms: u32::MAX,
        any_host_after_ms: 0.0,
    };

    /// The factor the bounds are multiplied by at `wait_ms` (1 at no wait; >= 1, non-decreasing).
    pub fn growth(&self, wait_ms: f64) -> f64 {
        let t = if wait_ms > 0.0 { wait_ms / self.over_ms } else { 0.0 };
        match self.curve {
            Curve::None => 1.0,
            Curve::Linear => 1.0 + t,
            Curve::Exponential => {
                if t >= 1024.0 {
                    // Finite, so that a bound of 0 stays 0 (0 * inf would be NaN).
                    return f64::MAX;
                }
                // floor(t) for 0 <= t < 1024 (a cast truncates, which is floor here; no libm call).
                let k = t as u64;
                // 2^k exactly, from its bits.
                f64::from_bits((k + 1023) << 52) * (1.0 + (t - k as f64))
            }
        }
    }
}

/// The bounds in force for a candidate match whose seed has waited a given time
/// ([`Ruleset::bounds_for_wait`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub max_skill_spread: f64,
    pub max_team_imbalance: f64,
    pub max_latency_ms: u32,
    /// The match may be formed without a common acceptable host.
    pub any_host: bool,
}

/// One ruleset of the queue (index = bit in `ruleset_mask`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ruleset<'a> {
    /// Number of teams, >= 1.
    pub teams: u32,
    /// Players per team, >= 1; every team is filled exactly.
    pub team_size: u32,
    /// Bound on (max effective skill - min effective skill) / mmr_normalization_ref over the
    /// match's tickets.
    pub max_skill_spread: f64,
    /// Bound on (max team mean skill - min team mean skill) / mmr_normalization_ref, where a
    /// team's mean is the party-size-weighted mean of its tickets' effective skill. Not relaxed.
    pub max_team_imbalance: f64,
    /// A host is acceptable when every ticket's latency to it is <= this.
    pub max_latency_ms: u32,
    /// When true a match without an acceptable host is not formed.
    pub require_host: bool,
    /// Sorted by `after_wait_ms`, each step at least as wide as the previous and the base.
    pub relaxation: &'a [RelaxationStep],
    /// Continuous widening with wait; [`Expansion::NONE`] for steps only.
    pub expansion: Expansion,
}

impl Ruleset<'_> {
    /// Players in one match of this ruleset.
    pub fn players_per_match(&self) -> u32 {
        self.teams.saturating_mul(self.team_size)
    }

    /// The bounds in force when the seed of a candidate has waited `wait_ms`: per bound, the wider of
    /// the last relaxation step that applies (else the base) and the base grown by the expansion
    /// curve up to its limit. Non-decreasing in `wait_ms`.
    pub fn bounds_for_wait(&self, wait_ms: f64) -> Bounds {
        // Validation guarantees steps are sorted and only widen, so the last applicable step wins.
        let (mut spread, mut latency) = (self.max_skill_spread, self.max_latency_ms);
        for step in self.relaxation {
            if step.after_wait_ms <= wait_ms {
                (spread, latency) = (step.max_skill_spread, step.max_latency_ms);
            } else {
                break;
            }
        }
        let e = &self.expansion;
        let g = e.growth(wait_ms);
        let grown_latency = (f64::from(self.max_latency_ms) * g).floor().min(f64::from(e.max_latency_ms)) as u32;
        Bounds {
            max_skill_spread: spread.max((self.max_skill_spread * g).min(e.max_skill_spread)),
            max_team_imbalance: self.max_team_imbalance.max((self.max_team_imbalance * g).min(e.max_team_imbalance)),
            max_latency_ms: latency.max(grown_latency),
            any_host: !self.require_host && wait_ms >= e.any_host_after_ms,
        }
    }

    /// The widest latency bound any seed can have (the last step's, or the expansion's limit).
    pub fn widest_latency_ms(&self) -> u32 {
        let step = self.relaxation.last().map_or(0, |s| s.max_latency_ms);
        let grown = if self.expansion.curve == Curve::None { 0 } else { self.expansion.max_latency_ms };
        self.max_latency_ms.max(step).max(grown)
    }
}

/// One queue's active pool as columns; n = `party_size.len()`, F = `filter_count`,
/// H = `host_count`.
#[derive(Clone, Copy, Debug)]
pub struct PoolColumns<'a> {
    /// (n) players in the ticket, >= 1.
    pub party_size: &'a [u8],
    /// (n) mean raw mmr of the party's players.
    pub mmr_mean: &'a [f64],
    /// (n) ticket creation time, epoch ms.
    pub arrival_ms: &'a [f64],
    /// (n) bit r = ticket competes in ruleset r ("empty = all" already expanded by the host).
    pub ruleset_mask: &'a [u32],
    /// (n*F, row-major) interned values of filter f: bit v = value v.
    pub attr_values: &'a [u64],
    /// (n*F, row-major) interned accepted values of filter f.
    pub attr_accepts: &'a [u64],
    /// (n*H, row-major) worst player round-trip to host h, default already applied.
    pub latency_ms: &'a [u16],
    pub filter_count: usize,
    pub host_count: usize,
}

impl PoolColumns<'_> {
    /// Number of tickets.
    pub fn len(&self) -> usize {
        self.party_size.len()
    }

    pub fn is_empty(&self) -> bool {
        self.party_size.is_empty()
    }
}

/// What changed in a pool since the last tick that ran on the same [`crate::Workspace`] through
/// [`crate::run_tick_changed`]: the pool's length then, and every row written since (a ticket added, or
/// moved into a row by a swap-remove), in any order, duplicates allowed. Rows at and past
/// `previous_len` are new whether listed or not; rows past the pool's length now are gone (a listed row
/// past both was written and removed since, and is ignored). A row neither listed nor past either length
/// must hold what it held at that tick.
#[derive(Clone, Copy, Debug)]
pub struct PoolChanges<'a> {
    pub previous_len: usize,
    pub rows: &'a [u32],
}

/// Queue-level parameters of one tick.
#[derive(Clone, Copy, Debug)]
pub struct TickParams<'a> {
    /// Raw mmr difference that counts as 1.0 normalized unit; > 0. Default 0.1.
    pub mmr_normalization_ref: f64,
    /// Raw mmr added per extra party member to the effective skill. Default 0.0.
    pub party_synergy_bonus: f64,
    /// Mode of each attribute filter column (`Continued` for a filter's columns after its first);
    /// length must equal the pool's `filter_count`.
    pub filters: &'a [FilterMode],
    /// At most 32.
    pub rulesets: &'a [Ruleset<'a>],
    /// Current time, epoch ms; wait of a ticket = now_ms - arrival_ms.
    pub now_ms: f64,
    /// Breaks ties between tickets of equal arrival time; same seed + same input = same output.
    pub seed: u64,
}

impl TickParams<'_> {
    /// A ticket's effective skill: its party's mean mmr plus the party synergy bonus per extra member.
    #[inline]
    pub(crate) fn effective_skill(&self, mmr_mean: f64, party_size: u8) -> f64 {
        mmr_mean + self.party_synergy_bonus * f64::from(party_size - 1)
    }
}
