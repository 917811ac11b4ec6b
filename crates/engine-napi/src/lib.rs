//! napi-rs binding of `matchmaker-engine`. It only converts: JavaScript typed arrays become the engine's
//! borrowed column slices and output buffers (no copy), queue parameters become engine params once per
//! configuration change, and engine errors become `napi::Error` in one place.
use std::sync::{Arc, Mutex};

use matchmaker_engine::{
    run_backfill, run_tick, BackfillBuffers, BackfillColumns, BackfillWorkspace, EngineError, FilterMode, MatchBuffers,
    PoolColumns, RelaxationStep, Ruleset, TickParams, Workspace,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// The engine crate's version, so the host can log which engine it loaded.
#[napi]
pub fn engine_version() -> &'static str {
    matchmaker_engine::ENGINE_VERSION
}

/// The one mapping from engine errors to JavaScript errors.
fn to_napi_error(err: EngineError) -> Error {
    Error::new(Status::InvalidArg, format!("engine: {err}"))
}

#[napi(object)]
pub struct RelaxationStepParams {
    pub after_wait_ms: f64,
    pub max_skill_spread: f64,
    pub max_latency_ms: u32,
}

#[napi(object)]
pub struct RulesetParams {
    pub teams: u32,
    pub team_size: u32,
    pub max_skill_spread: f64,
    pub max_team_imbalance: f64,
    pub max_latency_ms: u32,
    pub require_host: bool,
    pub relaxation: Vec<RelaxationStepParams>,
}

/// A queue's engine parameters; set when the queue is configured, not per tick.
#[napi(object)]
pub struct QueueParams {
    pub mmr_normalization_ref: f64,
    pub party_synergy_bonus: f64,
    /// One per attribute filter, in column order: "overlap" or "containment".
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

/// Preallocated outputs, sized by the host for its pool capacity (see OutputCapacity::for_pool).
#[napi(object)]
pub struct MatchArrays {
    pub match_ruleset: Uint32Array,
    pub match_offsets: Uint32Array,
    pub match_tickets: Uint32Array,
    pub ticket_team: Uint32Array,
    pub match_preferred_host: Uint32Array,
    pub match_acceptable_hosts: BigUint64Array,
    pub match_accepts: BigUint64Array,
}

struct OwnedRuleset {
    teams: u32,
    team_size: u32,
    max_skill_spread: f64,
    max_team_imbalance: f64,
    max_latency_ms: u32,
    require_host: bool,
    relaxation: Vec<RelaxationStep>,
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

/// A queue's engine parameters, owned (the engine's `TickParams` borrows from it for one run).
struct OwnedParams {
    mmr_normalization_ref: f64,
    party_synergy_bonus: f64,
    filters: Vec<FilterMode>,
    rulesets: Vec<OwnedRuleset>,
}

impl OwnedParams {
    /// Calls `run` with these parameters as the engine's `TickParams`.
    fn with<R>(&self, now_ms: f64, seed: u64, run: impl FnOnce(&TickParams<'_>) -> R) -> R {
        let rulesets: Vec<Ruleset<'_>> = self
            .rulesets
            .iter()
            .map(|r| Ruleset {
                teams: r.teams,
                team_size: r.team_size,
                max_skill_spread: r.max_skill_spread,
                max_team_imbalance: r.max_team_imbalance,
                max_latency_ms: r.max_latency_ms,
                require_host: r.require_host,
                relaxation: &r.relaxation,
            })
            .collect();
        run(&TickParams {
            mmr_normalization_ref: self.mmr_normalization_ref,
            party_synergy_bonus: self.party_synergy_bonus,
            filters: &self.filters,
            rulesets: &rulesets,
            now_ms,
            seed,
        })
    }
}

struct EngineState {
    params: OwnedParams,
    workspace: Workspace,
    backfill_workspace: BackfillWorkspace,
}

fn convert(params: QueueParams) -> Result<OwnedParams> {
    let filters = params
        .filter_modes
        .iter()
        .map(|mode| match mode.as_str() {
            "overlap" => Ok(FilterMode::Overlap),
            "containment" => Ok(FilterMode::Containment),
            other => Err(Error::new(Status::InvalidArg, format!("unknown filter mode \"{other}\""))),
        })
        .collect::<Result<Vec<_>>>()?;
    let rulesets = params
        .rulesets
        .into_iter()
        .map(|r| OwnedRuleset {
            teams: r.teams,
            team_size: r.team_size,
            max_skill_spread: r.max_skill_spread,
            max_team_imbalance: r.max_team_imbalance,
            max_latency_ms: r.max_latency_ms,
            require_host: r.require_host,
            relaxation: r
                .relaxation
                .into_iter()
                .map(|s| RelaxationStep {
                    after_wait_ms: s.after_wait_ms,
                    max_skill_spread: s.max_skill_spread,
                    max_latency_ms: s.max_latency_ms,
                })
                .collect(),
        })
        .collect();
    Ok(OwnedParams {
        mmr_normalization_ref: params.mmr_normalization_ref,
        party_synergy_bonus: params.party_synergy_bonus,
        filters,
        rulesets,
    })
}

/// One queue's engine: its parameters and the scratch memory reused from tick to tick.
#[napi]
pub struct TickEngine {
    state: Arc<Mutex<EngineState>>,
}

#[napi]
impl TickEngine {
    #[napi(constructor)]
    pub fn new(params: QueueParams) -> Result<Self> {
        let state = EngineState {
            params: convert(params)?,
            workspace: Workspace::new(),
            backfill_workspace: BackfillWorkspace::new(),
        };
        Ok(TickEngine { state: Arc::new(Mutex::new(state)) })
    }

    /// Replaces the parameters (hot reload). Refused while a tick runs: the host applies it after.
    #[napi]
    pub fn configure(&self, params: QueueParams) -> Result<()> {
        let params = convert(params)?;
        lock(&self.state)?.params = params;
        Ok(())
    }

    /// Runs one tick on the libuv thread pool; resolves with the number of matches written to `out`.
    /// The host must not write to `pool` or `out` until the promise settles.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn run(&self, pool: PoolArrays, out: MatchArrays, now_ms: f64, seed: u32) -> AsyncTask<TickTask> {
        AsyncTask::new(TickTask { state: self.state.clone(), pool, out, now_ms, seed: u64::from(seed) })
    }

    /// Fills backfill requests from the pool on the libuv thread pool; resolves with how many got tickets.
    /// The host must not write to `pool`, `requests` or `out` until the promise settles.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn backfill(
        &self,
        pool: PoolArrays,
        requests: BackfillArrays,
        out: BackfillOutput,
        now_ms: f64,
    ) -> AsyncTask<BackfillTask> {
        AsyncTask::new(BackfillTask { state: self.state.clone(), pool, requests, out, now_ms })
    }
}

fn lock(state: &Mutex<EngineState>) -> Result<std::sync::MutexGuard<'_, EngineState>> {
    state.try_lock().map_err(|_| Error::new(Status::GenericFailure, "a tick is already running"))
}

fn pool_columns(p: &PoolArrays) -> Result<PoolColumns<'_>> {
    let n = p.ticket_count as usize;
    let f = p.filter_count as usize;
    let h = p.host_count as usize;
    Ok(PoolColumns {
        party_size: prefix("partySize", &p.party_size, n)?,
        mmr_mean: prefix("mmrMean", &p.mmr_mean, n)?,
        arrival_ms: prefix("arrivalMs", &p.arrival_ms, n)?,
        ruleset_mask: prefix("rulesetMask", &p.ruleset_mask, n)?,
        attr_values: prefix("attrValues", &p.attr_values, n * f)?,
        attr_accepts: prefix("attrAccepts", &p.attr_accepts, n * f)?,
        latency_ms: prefix("latencyMs", &p.latency_ms, n * h)?,
        filter_count: f,
        host_count: h,
    })
}

pub struct BackfillTask {
    state: Arc<Mutex<EngineState>>,
    pool: PoolArrays,
    requests: BackfillArrays,
    out: BackfillOutput,
    now_ms: f64,
}

impl Task for BackfillTask {
    type Output = u32;
    type JsValue = u32;

    fn compute(&mut self) -> Result<u32> {
        let mut guard = lock(&self.state)?;
        let state = &mut *guard;
        let columns = pool_columns(&self.pool)?;
        let q = &self.requests;
        let r = q.request_count as usize;
        let f = self.pool.filter_count as usize;
        let requests = BackfillColumns {
            ruleset: prefix("ruleset", &q.ruleset, r)?,
            slots: prefix("slots", &q.slots, r)?,
            skill: prefix("skill", &q.skill, r)?,
            host: prefix("host", &q.host, r)?,
            arrival_ms: prefix("arrivalMs", &q.arrival_ms, r)?,
            attr_values: prefix("attrValues", &q.attr_values, r * f)?,
            attr_accepts: prefix("attrAccepts", &q.attr_accepts, r * f)?,
        };
        let o = &mut self.out;
        // SAFETY: as for TickTask: the host does not touch these output arrays until this promise settles,
        // and the task holds references that keep them alive.
        let mut buffers = unsafe { BackfillBuffers { offsets: o.offsets.as_mut(), assigned: o.assigned.as_mut() } };
        let workspace = &mut state.backfill_workspace;
        let filled = state
            .params
            .with(self.now_ms, 0, |params| run_backfill(&columns, &requests, params, workspace, &mut buffers))
            .map_err(to_napi_error)?;
        Ok(filled as u32)
    }

    fn resolve(&mut self, _env: Env, filled: u32) -> Result<u32> {
        Ok(filled)
    }
}

pub struct TickTask {
    state: Arc<Mutex<EngineState>>,
    pool: PoolArrays,
    out: MatchArrays,
    now_ms: f64,
    seed: u64,
}

/// The first `len` elements, or an error naming the column when the array is shorter.
fn prefix<'a, T>(name: &str, data: &'a [T], len: usize) -> Result<&'a [T]> {
    data.get(..len)
        .ok_or_else(|| Error::new(Status::InvalidArg, format!("{name} has {} elements, needs {len}", data.len())))
}

impl Task for TickTask {
    type Output = u32;
    type JsValue = u32;

    fn compute(&mut self) -> Result<u32> {
        let mut guard = lock(&self.state)?;
        let state = &mut *guard;
        let columns = pool_columns(&self.pool)?;
        let o = &mut self.out;
        // SAFETY: the host neither reads nor writes these output arrays until this tick's promise settles
        // (TickRunner in src/engine/tick-runner.ts holds them for the tick), so this thread is their only
        // user meanwhile; the task holds a reference to each array, so their memory stays alive.
        let mut buffers = unsafe {
            MatchBuffers {
                match_ruleset: o.match_ruleset.as_mut(),
                match_offsets: o.match_offsets.as_mut(),
                match_tickets: o.match_tickets.as_mut(),
                ticket_team: o.ticket_team.as_mut(),
                match_preferred_host: o.match_preferred_host.as_mut(),
                match_acceptable_hosts: o.match_acceptable_hosts.as_mut(),
                match_accepts: o.match_accepts.as_mut(),
            }
        };
        let workspace = &mut state.workspace;
        let matches = state
            .params
            .with(self.now_ms, self.seed, |params| run_tick(&columns, params, workspace, &mut buffers))
            .map_err(to_napi_error)?;
        Ok(matches as u32)
    }

    fn resolve(&mut self, _env: Env, matches: u32) -> Result<u32> {
        Ok(matches)
    }
}
