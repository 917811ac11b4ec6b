//! The threads every queue's engine shares (the service's `engine_threads`): one pool for the process,
//! made by the first `useEngineThreads` call, before any `TickEngine`.

use std::sync::{Arc, OnceLock};

use matchmaker_engine::Workspace;
use napi::bindgen_prelude::Result;
use napi_derive::napi;

use crate::error::BindingError;

static POOL: OnceLock<Option<Arc<rayon::ThreadPool>>> = OnceLock::new();

/// Spreads every engine's ticks of large pools over `threads` threads (1: the tick's own thread alone). Answers the
/// count in force: only the first call sets it.
#[napi]
pub fn use_engine_threads(threads: u32) -> Result<u32> {
    if POOL.get().is_none() {
        let pool = if threads > 1 {
            let built = rayon::ThreadPoolBuilder::new()
                .num_threads(threads as usize)
                .thread_name(|i| format!("engine-{i}"))
                .build()
                .map_err(|err| BindingError::Threads(err.to_string()))?;
            Some(Arc::new(built))
        } else {
            None
        };
        // Two first calls at once: the one that lands first is in force, as answered below.
        let _ = POOL.set(pool);
    }
    Ok(POOL.get().and_then(Option::as_ref).map_or(1, |pool| pool.current_num_threads() as u32))
}

/// A workspace on the shared threads, if any.
pub fn workspace() -> Workspace {
    match POOL.get() {
        Some(Some(pool)) => Workspace::new().with_threads(pool.clone()),
        _ => Workspace::new(),
    }
}
