//! What a tick reads: one queue's pool as columns, and the queue's parameters and rulesets.

/// How the tickets' attribute bitsets of one filter are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterMode {
    /// Compatible when `values_a & values_b != 0`.
    Overlap,
    /// Compatible when `values_a ⊆ accepts_b` and `values_b ⊆ accepts_a`.
    Containment,
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
}

impl Ruleset<'_> {
    /// Players in one match of this ruleset.
    pub fn players_per_match(&self) -> u32 {
        self.teams.saturating_mul(self.team_size)
    }

    /// (max_skill_spread, max_latency_ms) in force when the oldest ticket has waited `wait_ms`.
    pub fn bounds_for_wait(&self, wait_ms: f64) -> (f64, u32) {
        // Validation guarantees steps are sorted and only widen, so the last applicable step wins.
        let mut bounds = (self.max_skill_spread, self.max_latency_ms);
        for step in self.relaxation {
            if step.after_wait_ms <= wait_ms {
                bounds = (step.max_skill_spread, step.max_latency_ms);
            } else {
                break;
            }
        }
        bounds
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

/// Queue-level parameters of one tick.
#[derive(Clone, Copy, Debug)]
pub struct TickParams<'a> {
    /// Raw mmr difference that counts as 1.0 normalized unit; > 0. Default 0.1.
    pub mmr_normalization_ref: f64,
    /// Raw mmr added per extra party member to the effective skill. Default 0.0.
    pub party_synergy_bonus: f64,
    /// Mode of each attribute filter; length must equal the pool's `filter_count`.
    pub filters: &'a [FilterMode],
    /// At most 32.
    pub rulesets: &'a [Ruleset<'a>],
    /// Current time, epoch ms; wait of a ticket = now_ms - arrival_ms.
    pub now_ms: f64,
    /// Breaks ties between tickets of equal arrival time; same seed + same input = same output.
    pub seed: u64,
}
