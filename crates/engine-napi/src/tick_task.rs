//! One tick on the libuv thread pool (`TickEngine.run`).

use std::sync::{Arc, Mutex};

use matchmaker_engine::{run_tick, run_tick_changed, PoolChanges};
use napi::bindgen_prelude::{Env, Result, Task};
use napi_derive::napi;

use crate::convert::{check_rule_counts, match_buffers, pool_columns, write_rule_counts};
use crate::error::BindingError;
use crate::state::{lock, EngineState};
use crate::types::{MatchArrays, PoolArrays, PoolChangeArrays};

/// Matches the pool once into `out`; resolves with the number of matches.
pub struct TickTask {
    state: Arc<Mutex<EngineState>>,
    pool: PoolArrays,
    changes: Option<PoolChangeArrays>,
    out: MatchArrays,
    now_ms: f64,
    seed: u64,
}

impl TickTask {
    /// # Safety
    ///
    /// JavaScript must not write to `pool` or `changes`, nor read or write `out`, until the task's promise
    /// settles: `compute` reads and writes them on another thread without synchronization.
    pub unsafe fn new(
        state: Arc<Mutex<EngineState>>,
        pool: PoolArrays,
        changes: Option<PoolChangeArrays>,
        out: MatchArrays,
        (now_ms, seed): (f64, u32),
    ) -> Self {
        TickTask { state, pool, changes, out, now_ms, seed: u64::from(seed) }
    }
}

#[napi]
impl Task for TickTask {
    type Output = u32;
    type JsValue = u32;

    fn compute(&mut self) -> Result<u32> {
        let mut guard = lock(&self.state)?;
        let state = &mut *guard;
        let columns = pool_columns(&self.pool)?;
        check_rule_counts(&self.out, state.params.ruleset_count())?;
        // SAFETY: `new`'s caller promised that JavaScript leaves `out` alone until this task's promise
        // settles, which is after `compute` returns.
        let mut buffers = unsafe { match_buffers(&mut self.out) };
        let workspace = &mut state.workspace;
        let changes =
            self.changes.as_ref().map(|c| PoolChanges { previous_len: c.previous_count as usize, rows: &c.rows });
        let matches = state
            .params
            .with(self.now_ms, self.seed, |params| match &changes {
                Some(changes) => run_tick_changed(&columns, changes, params, workspace, &mut buffers),
                None => run_tick(&columns, params, workspace, &mut buffers),
            })
            .map_err(BindingError::from)?;
        // SAFETY: as for `match_buffers` above (the buffers are no longer used).
        unsafe { write_rule_counts(&mut self.out, workspace.rule_diagnostics()) };
        Ok(matches as u32)
    }

    fn resolve(&mut self, _env: Env, matches: u32) -> Result<u32> {
        Ok(matches)
    }
}
