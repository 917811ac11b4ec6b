//! The state one `TickEngine` shares with its tasks, and the lock they take it by. Its own module so
//! that imports run one way: `engine.rs` starts the tasks, and both it and the tasks use this.

use std::sync::{Mutex, MutexGuard};

use matchmaker_engine::{BackfillWorkspace, Workspace};

use crate::convert::OwnedParams;
use crate::error::BindingError;

pub struct EngineState {
    pub params: OwnedParams,
    pub workspace: Workspace,
    pub backfill_workspace: BackfillWorkspace,
}

/// The state, or `Busy` when a run holds it (runs never wait for each other).
pub fn lock(state: &Mutex<EngineState>) -> std::result::Result<MutexGuard<'_, EngineState>, BindingError> {
    state.try_lock().map_err(|_| BindingError::Busy)
}
