//! The standard matchmaking engine. Pure Rust: no napi, no I/O. The host hands it a columnar pool
//! (borrowed slices) and preallocated output buffers; see docs/engine.md.
//!
//! One call to [`run_tick`] matches one queue's pool once. Outputs go into caller-provided
//! buffers ([`MatchBuffers`], sized with [`OutputCapacity::for_pool`]); scratch memory lives in a
//! [`Workspace`] the caller keeps between ticks, so steady-state ticks do not allocate.

mod backfill;
mod diagnostics;
mod error;
mod input;
mod output;
mod tick;
mod validate;

pub use backfill::{run_backfill, BackfillBuffers, BackfillColumns, BackfillWorkspace};
pub use diagnostics::{Rejection, RuleDiagnostics, TicketRefusal};
pub use error::EngineError;
pub use input::{Bounds, Curve, Expansion, FilterMode, PoolChanges, PoolColumns, RelaxationStep, Ruleset, TickParams};
pub use output::{MatchBuffers, MatchOutput, OutputCapacity};

/// Version of the engine's semantics, reported by the host at startup.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// At most this many rulesets per queue (`ruleset_mask` is a u32).
pub const MAX_RULESETS: usize = 32;
/// At most this many hosts per queue. The acceptable-host output has one u64 per 64 hosts per match
/// ([`OutputCapacity::for_pool`]); a queue of up to 64 hosts runs on one-word host sets.
pub const MAX_HOSTS: usize = 256;
/// Distinct interned values per attribute filter column (a u64 bitset); a filter with more spans
/// several columns ([`FilterMode::Continued`]).
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
/// Reusable scratch memory. Keep one per queue (or per thread) across ticks: buffers only grow,
/// so a tick on a pool no larger than a previous one does not allocate.
#[derive(Debug, Default)]
pub struct Workspace {
    pub(crate) sorted: tick::Sorted,
    pub(crate) links: tick::Links,
    pub(crate) scratch: tick::Scratch,
    pub(crate) diagnostics: Vec<RuleDiagnostics>,
    /// One seed's rule decisions per ruleset, its tries' records and its match's output (tick/seed.rs).
    pub(crate) local: Vec<RuleDiagnostics>,
    pub(crate) tried: Vec<RuleDiagnostics>,
    pub(crate) staged: tick::Staged,
    pub(crate) threads: Option<tick::Threads>,
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

    /// Runs large pools' ticks (the layout and the seed loop) on `pool`'s threads (docs/engine.md,
    /// "Threads"). The output is the same, bit for bit, as on one thread. Several workspaces may share
    /// one pool; a pool of one thread is the same as none.
    pub fn with_threads(mut self, pool: std::sync::Arc<rayon::ThreadPool>) -> Self {
        self.threads = Some(tick::Threads::new(pool));
        self
    }

    /// Spreads a tick over the threads from `live` tickets that could be in a match (default
    /// 100,000; smaller pools tick on the caller's thread alone). Without `with_threads`, nothing.
    pub fn spread_from(mut self, live: usize) -> Self {
        if let Some(threads) = &mut self.threads {
            threads.min_live = live;
        }
        self
    }

    /// The threads a tick may use: 1 without a pool.
    pub fn threads(&self) -> usize {
        self.threads.as_ref().map_or(1, tick::Threads::count)
    }

    /// Bytes the workspace holds in the arrays that grow with the pool (its layouts, kept and working, the seed
    /// order, the links, and on threads the live slots' stamps): what a queue's engine costs per pooled ticket
    /// beside the host's columns.
    pub fn pool_bytes(&self) -> usize {
        self.sorted.bytes() + self.links.bytes() + self.threads.as_ref().map_or(0, tick::Threads::bytes)
    }

    /// Lets go of the kept layout: the next [`run_tick_changed`] lays the pool out whole (and keeps that),
    /// whatever changes it is given. For a caller that lost track of the pool's changes.
    pub fn forget_layout(&mut self) {
        self.sorted.forget();
    }

    /// Whether the last tick updated the layout the tick before it kept ([`run_tick_changed`]), rather than
    /// laying the pool out whole.
    pub fn updated_layout(&self) -> bool {
        self.sorted.updated()
    }

    /// The last successful tick's rule diagnostics, one record per ruleset of its params
    /// (docs/rule-diagnostics.md). Empty before the first tick; a tick that returns `Err` leaves
    /// them as they were.
    pub fn rule_diagnostics(&self) -> &[RuleDiagnostics] {
        &self.diagnostics
    }
}

/// Matches one queue's pool once. Validates every input first (never panics on bad input), then
/// writes matches into `out` and returns how many were formed. Per ruleset, why candidate matches
/// failed is then in [`Workspace::rule_diagnostics`]; per ticket, when `out.ticket_refusals` is given,
/// in that buffer ([`TicketRefusal`]).
pub fn run_tick(
    pool: &PoolColumns<'_>,
    params: &TickParams<'_>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'_>,
) -> Result<usize, EngineError> {
    validate::validate(pool, params, out).inspect_err(|_| ws.sorted.forget())?;
    Ok(tick::run(pool, params, None, ws, out))
}

/// [`run_tick`] on a pool that `changes` says how it changed since the last tick on `ws` (docs/engine.md,
/// "Incremental ticks"): the workspace keeps each tick's layout of the pool and updates it by the changes,
/// instead of laying the whole pool out again. The output is [`run_tick`]'s on the same pool, bit for bit.
/// The first tick on a workspace, a tick after a [`run_tick`], and a tick whose parameters change what the
/// layout holds (the party synergy bonus, a ruleset's latency bounds or `require_host`, the rulesets'
/// count, the filter or host count) lay the pool out whole.
pub fn run_tick_changed(
    pool: &PoolColumns<'_>,
    changes: &PoolChanges<'_>,
    params: &TickParams<'_>,
    ws: &mut Workspace,
    out: &mut MatchBuffers<'_>,
) -> Result<usize, EngineError> {
    // A refused tick forgets the kept layout: its caller may have let go of the changes it described.
    validate::validate(pool, params, out)
        .and_then(|()| validate::validate_changes(changes))
        .inspect_err(|_| ws.sorted.forget())?;
    Ok(tick::run(pool, params, Some(changes), ws, out))
}
