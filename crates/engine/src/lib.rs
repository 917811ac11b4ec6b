//! The standard matchmaking engine. Pure Rust: no napi, no I/O. The host hands it a columnar pool
//! (borrowed slices) and preallocated output buffers; see docs/engine.md.
//!
//! One call to [`run_tick`] matches one queue's pool once. Outputs go into caller-provided
//! buffers ([`MatchBuffers`], sized with [`OutputCapacity::for_pool`]); scratch memory lives in a
//! [`Workspace`] the caller keeps between ticks, so steady-state ticks do not allocate.

mod backfill;
mod error;
mod tick;

pub use backfill::{run_backfill, BackfillBuffers, BackfillColumns, BackfillWorkspace};
pub use error::EngineError;

/// Version of the engine's semantics, reported by the host at startup.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// At most this many rulesets per queue (`ruleset_mask` is a u32).
pub const MAX_RULESETS: usize = 32;
/// At most this many hosts per queue (the acceptable-host output is a u64 bitmask).
pub const MAX_HOSTS: usize = 64;
/// At most this many distinct interned values per attribute filter (bitsets are u64).
pub const MAX_FILTER_VALUES: usize = 64;
/// Upper bound on `teams * team_size` of a ruleset; keeps per-candidate work bounded.
pub const MAX_PLAYERS_PER_MATCH: u32 = 1024;
/// `match_preferred_host` value when a match has no host.
pub const NO_HOST: u32 = u32::MAX;

/// Queue-config default of `mmr_normalization_ref` (suits mmr on a 0.0–1.0 scale).
pub const DEFAULT_MMR_NORMALIZATION_REF: f64 = 0.1;
/// Queue-config default of `party_synergy_bonus`.
pub const DEFAULT_PARTY_SYNERGY_BONUS: f64 = 0.0;
/// Queue-config default latency the host assumes for an unmeasured (player, host) pair.
/// The engine never applies it itself: the host bakes it into `latency_ms`.
pub const DEFAULT_LATENCY_MS: u16 = 150;

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

/// Minimum lengths of the [`MatchBuffers`] slices for a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputCapacity {
    /// `match_ruleset`, `match_preferred_host`, `match_acceptable_hosts`.
    pub matches: usize,
    /// `match_offsets` (= matches + 1).
    pub offsets: usize,
    /// `match_tickets`, `ticket_team`.
    pub tickets: usize,
    /// `match_accepts` (= matches * F).
    pub accepts: usize,
}

impl OutputCapacity {
    /// Worst case: every ticket alone in its own match (a 1x1 ruleset of solos).
    /// `host_count` does not change the sizes (hosts are a u64 mask per match) but is taken so
    /// callers need not know that.
    pub fn for_pool(tickets: usize, filter_count: usize, host_count: usize) -> Self {
        let _ = host_count;
        OutputCapacity {
            matches: tickets,
            offsets: tickets + 1,
            tickets,
            accepts: tickets.saturating_mul(filter_count),
        }
    }
}

/// Caller-owned output. Match m's tickets are
/// `match_tickets[match_offsets[m]..match_offsets[m+1]]`, their teams the same range of
/// `ticket_team`, its accept intersections `match_accepts[m*F..(m+1)*F]`.
#[derive(Debug)]
pub struct MatchBuffers<'a> {
    pub match_ruleset: &'a mut [u32],
    pub match_offsets: &'a mut [u32],
    /// Pool indices.
    pub match_tickets: &'a mut [u32],
    /// Team index (0..teams) of the ticket at the same position of `match_tickets`.
    pub ticket_team: &'a mut [u32],
    /// Host index, or [`NO_HOST`].
    pub match_preferred_host: &'a mut [u32],
    /// Bit h = host h acceptable to every ticket of the match.
    pub match_acceptable_hosts: &'a mut [u64],
    /// Per match, per filter: AND of the tickets' `attr_accepts`.
    pub match_accepts: &'a mut [u64],
}

/// Owned output vectors sized for a pool; convenient for tests, benches and Rust callers.
#[derive(Clone, Debug, Default)]
pub struct MatchOutput {
    pub match_ruleset: Vec<u32>,
    pub match_offsets: Vec<u32>,
    pub match_tickets: Vec<u32>,
    pub ticket_team: Vec<u32>,
    pub match_preferred_host: Vec<u32>,
    pub match_acceptable_hosts: Vec<u64>,
    pub match_accepts: Vec<u64>,
}

impl MatchOutput {
    pub fn with_capacity(cap: OutputCapacity) -> Self {
        MatchOutput {
            match_ruleset: vec![0; cap.matches],
            match_offsets: vec![0; cap.offsets],
            match_tickets: vec![0; cap.tickets],
            ticket_team: vec![0; cap.tickets],
            match_preferred_host: vec![0; cap.matches],
            match_acceptable_hosts: vec![0; cap.matches],
            match_accepts: vec![0; cap.accepts],
        }
    }

    pub fn buffers(&mut self) -> MatchBuffers<'_> {
        MatchBuffers {
            match_ruleset: &mut self.match_ruleset,
            match_offsets: &mut self.match_offsets,
            match_tickets: &mut self.match_tickets,
            ticket_team: &mut self.ticket_team,
            match_preferred_host: &mut self.match_preferred_host,
            match_acceptable_hosts: &mut self.match_acceptable_hosts,
            match_accepts: &mut self.match_accepts,
        }
    }
}

/// Reusable scratch memory. Keep one per queue (or per thread) across ticks: buffers only grow,
/// so a tick on a pool no larger than a previous one does not allocate.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) sorted: tick::Sorted,
    pub(crate) links: tick::Links,
    pub(crate) scratch: tick::Scratch,
}

impl Workspace {
    pub fn new() -> Self {
        Self::default()
    }

    /// Preallocates for pools of up to `tickets` tickets with `filter_count` filters and
    /// `host_count` hosts.
    pub fn with_capacity(tickets: usize, filter_count: usize, host_count: usize) -> Self {
        let mut ws = Self::default();
        ws.sorted.reserve(tickets, filter_count, host_count);
        ws.links.reserve(tickets);
        ws
    }
}

/// Matches one queue's pool once. Validates every input first (never panics on bad input), then
/// writes matches into `out` and returns how many were formed.
pub fn run_tick(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'_>,
) -> Result<usize, EngineError> {
    validate(pool, params, out)?;
    Ok(tick::run(pool, params, ws, out))
}

fn check_len(column: &'static str, expected: usize, actual: usize) -> Result<(), EngineError> {
    if expected == actual {
        Ok(())
    } else {
        Err(EngineError::ColumnLength { column, expected, actual })
    }
}

fn check_buf(buffer: &'static str, required: usize, actual: usize) -> Result<(), EngineError> {
    if actual >= required {
        Ok(())
    } else {
        Err(EngineError::BufferTooSmall { buffer, required, actual })
    }
}

fn validate(pool: &PoolColumns<'_>, params: &TickParams<'_>, out: &MatchBuffers<'_>) -> Result<(), EngineError> {
    let n = pool.len();
    // Indices are written as u32.
    if n >= u32::MAX as usize {
        return Err(EngineError::InvalidParam { name: "pool", reason: "too many tickets for u32 indices" });
    }
    let f = pool.filter_count;
    let h = pool.host_count;
    if h > MAX_HOSTS {
        return Err(EngineError::TooManyHosts { count: h });
    }
    if params.filters.len() != f {
        return Err(EngineError::FilterCount { pool: f, params: params.filters.len() });
    }
    let nf = n
        .checked_mul(f)
        .ok_or(EngineError::InvalidParam { name: "filter_count", reason: "n * filter_count overflows" })?;
    check_len("mmr_mean", n, pool.mmr_mean.len())?;
    check_len("arrival_ms", n, pool.arrival_ms.len())?;
    check_len("ruleset_mask", n, pool.ruleset_mask.len())?;
    check_len("attr_values", nf, pool.attr_values.len())?;
    check_len("attr_accepts", nf, pool.attr_accepts.len())?;
    check_len("latency_ms", n * h, pool.latency_ms.len())?;

    if !(params.mmr_normalization_ref.is_finite() && params.mmr_normalization_ref > 0.0) {
        return Err(EngineError::InvalidParam { name: "mmr_normalization_ref", reason: "must be finite and > 0" });
    }
    if !params.party_synergy_bonus.is_finite() {
        return Err(EngineError::InvalidParam { name: "party_synergy_bonus", reason: "must be finite" });
    }
    if !params.now_ms.is_finite() {
        return Err(EngineError::InvalidParam { name: "now_ms", reason: "must be finite" });
    }
    if params.rulesets.len() > MAX_RULESETS {
        return Err(EngineError::TooManyRulesets { count: params.rulesets.len() });
    }
    for (r, rs) in params.rulesets.iter().enumerate() {
        validate_ruleset(r, rs)?;
    }
    for i in 0..n {
        if pool.party_size[i] == 0 {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "party_size is 0" });
        }
        if !pool.mmr_mean[i].is_finite() {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "mmr_mean is not finite" });
        }
        if !pool.arrival_ms[i].is_finite() {
            return Err(EngineError::InvalidTicket { ticket: i, reason: "arrival_ms is not finite" });
        }
    }

    let cap = OutputCapacity::for_pool(n, f, h);
    check_buf("match_ruleset", cap.matches, out.match_ruleset.len())?;
    check_buf("match_offsets", cap.offsets, out.match_offsets.len())?;
    check_buf("match_tickets", cap.tickets, out.match_tickets.len())?;
    check_buf("ticket_team", cap.tickets, out.ticket_team.len())?;
    check_buf("match_preferred_host", cap.matches, out.match_preferred_host.len())?;
    check_buf("match_acceptable_hosts", cap.matches, out.match_acceptable_hosts.len())?;
    check_buf("match_accepts", cap.accepts, out.match_accepts.len())?;
    Ok(())
}

fn validate_ruleset(r: usize, rs: &Ruleset<'_>) -> Result<(), EngineError> {
    let bad = |reason| Err(EngineError::InvalidRuleset { ruleset: r, reason });
    if rs.teams == 0 || rs.team_size == 0 {
        return bad("teams and team_size must be >= 1");
    }
    if rs.teams.checked_mul(rs.team_size).is_none_or(|p| p > MAX_PLAYERS_PER_MATCH) {
        return bad("teams * team_size exceeds MAX_PLAYERS_PER_MATCH (1024)");
    }
    if rs.max_skill_spread.is_nan() || rs.max_skill_spread < 0.0 {
        return bad("max_skill_spread must be >= 0");
    }
    if rs.max_team_imbalance.is_nan() || rs.max_team_imbalance < 0.0 {
        return bad("max_team_imbalance must be >= 0");
    }
    let mut prev = (f64::NEG_INFINITY, rs.max_skill_spread, rs.max_latency_ms);
    for step in rs.relaxation {
        if !step.after_wait_ms.is_finite() {
            return bad("relaxation after_wait_ms must be finite");
        }
        if step.after_wait_ms < prev.0 {
            return bad("relaxation steps must be sorted by after_wait_ms");
        }
        if step.max_skill_spread.is_nan() || step.max_skill_spread < prev.1 {
            return bad("relaxation steps may only widen max_skill_spread");
        }
        if step.max_latency_ms < prev.2 {
            return bad("relaxation steps may only widen max_latency_ms");
        }
        prev = (step.after_wait_ms, step.max_skill_spread, step.max_latency_ms);
    }
    Ok(())
}
