//! `TickEngine`: one queue's engine as a JavaScript class. It holds the queue's converted
//! parameters and the engine's scratch memory, reused from run to run, behind one lock that the
//! tasks take on the libuv thread pool.

use std::sync::{Arc, Mutex};

use matchmaker_engine::BackfillWorkspace;
use napi::bindgen_prelude::{AsyncTask, Result};
use napi_derive::napi;

use crate::backfill_task::BackfillTask;
use crate::convert::OwnedParams;
use crate::state::{lock, EngineState};
use crate::threads;
use crate::tick_task::TickTask;
use crate::types::{BackfillArrays, BackfillOutput, MatchArrays, PoolArrays, PoolChangeArrays, QueueParams};

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
            params: OwnedParams::try_from(params)?,
            workspace: threads::workspace(),
            backfill_workspace: BackfillWorkspace::new(),
        };
        Ok(TickEngine { state: Arc::new(Mutex::new(state)) })
    }

    /// Replaces the parameters (hot reload). Refused while a tick runs: the host applies it after.
    #[napi]
    pub fn configure(&self, params: QueueParams) -> Result<()> {
        let params = OwnedParams::try_from(params)?;
        lock(&self.state)?.params = params;
        Ok(())
    }

    /// Runs one tick on the libuv thread pool; resolves with the number of matches written to `out`.
    /// With `changes` (the rows written since this engine's last tick), the tick updates the layout the
    /// last one kept instead of laying the pool out whole; the matches are the same.
    /// The host must not write to `pool`, `changes` or `out` until the promise settles.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn run(
        &self,
        pool: PoolArrays,
        out: MatchArrays,
        now_ms: f64,
        seed: u32,
        changes: Option<PoolChangeArrays>,
    ) -> AsyncTask<TickTask> {
        // SAFETY: `TickTask::new`'s duty falls on JavaScript: this method's declaration tells the host not
        // to touch `pool`, `changes` or `out` until the promise settles, and TickRunner
        // (src/engine/tick-runner.ts) holds them for the tick.
        AsyncTask::new(unsafe { TickTask::new(self.state.clone(), pool, changes, out, (now_ms, seed)) })
    }

    /// Bytes the engine's scratch memory holds in the arrays that grow with the pool.
    #[napi]
    pub fn pool_bytes(&self) -> Result<f64> {
        Ok(lock(&self.state)?.workspace.pool_bytes() as f64)
    }

    /// Lets go of the kept layout: the next tick lays the pool out whole, whatever changes it is given.
    #[napi]
    pub fn forget_layout(&self) -> Result<()> {
        lock(&self.state)?.workspace.forget_layout();
        Ok(())
    }

    /// Whether the last tick updated the layout the one before kept, rather than laying the pool out whole.
    #[napi]
    pub fn updated_layout(&self) -> Result<bool> {
        Ok(lock(&self.state)?.workspace.updated_layout())
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
        // SAFETY: as in `run`: this method's declaration tells the host not to touch `pool`, `requests` or
        // `out` until the promise settles, and TickRunner awaits it before reading or reusing them.
        AsyncTask::new(unsafe { BackfillTask::new(self.state.clone(), pool, requests, out, now_ms) })
    }
}
