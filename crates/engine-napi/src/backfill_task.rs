//! Filling backfill requests on the libuv thread pool (`TickEngine.backfill`).

use std::sync::{Arc, Mutex};

use matchmaker_engine::run_backfill;
use napi::bindgen_prelude::{Env, Result, Task};
use napi_derive::napi;

use crate::convert::{backfill_buffers, backfill_columns, pool_columns};
use crate::error::BindingError;
use crate::state::{lock, EngineState};
use crate::types::{BackfillArrays, BackfillOutput, PoolArrays};

/// Fills the requests from the pool into `out`; resolves with how many requests got tickets.
pub struct BackfillTask {
    state: Arc<Mutex<EngineState>>,
    pool: PoolArrays,
    requests: BackfillArrays,
    out: BackfillOutput,
    now_ms: f64,
}

impl BackfillTask {
    /// # Safety
    ///
    /// JavaScript must not write to `pool` or `requests`, nor read or write `out`, until the task's
    /// promise settles: `compute` reads and writes them on another thread without synchronization.
    pub unsafe fn new(
        state: Arc<Mutex<EngineState>>,
        pool: PoolArrays,
        requests: BackfillArrays,
        out: BackfillOutput,
        now_ms: f64,
    ) -> Self {
        BackfillTask { state, pool, requests, out, now_ms }
    }
}

#[napi]
impl Task for BackfillTask {
    type Output = u32;
    type JsValue = u32;

    fn compute(&mut self) -> Result<u32> {
        let mut guard = lock(&self.state)?;
        let state = &mut *guard;
        let columns = pool_columns(&self.pool)?;
        let requests = backfill_columns(&self.requests, self.pool.filter_count)?;
        // SAFETY: `new`'s caller promised that JavaScript leaves `out` alone until this task's promise
        // settles, which is after `compute` returns.
        let mut buffers = unsafe { backfill_buffers(&mut self.out) };
        let workspace = &mut state.backfill_workspace;
        let filled = state
            .params
            .with(self.now_ms, 0, |params| run_backfill(&columns, &requests, params, workspace, &mut buffers))
            .map_err(BindingError::from)?;
        Ok(filled as u32)
    }

    fn resolve(&mut self, _env: Env, filled: u32) -> Result<u32> {
        Ok(filled)
    }
}
