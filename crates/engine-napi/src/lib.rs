//! napi-rs binding of `matchmaker-engine`, and the zstd codec of the replicated mode's checkpoints (which
//! must run off the event loop as the engine does). It only converts: JavaScript typed arrays become the engine's
//! borrowed column slices and output buffers (no copy), queue parameters become engine params once per
//! configuration change, and every error becomes a `napi::Error` in one place.
//!
//! - `types.rs`: the objects JavaScript passes in (`#[napi(object)]`)
//! - `convert.rs`: those objects to engine params, columns and buffers
//! - `error.rs`: the binding's errors and their one mapping to JavaScript errors
//! - `state.rs`: one queue's params and scratch memory, and the lock its runs take them by
//! - `engine.rs`: the `TickEngine` class: one queue's params and scratch memory behind a lock
//! - `tick_task.rs`, `backfill_task.rs`: one libuv task each, for `run` and `backfill`
//! - `threads.rs`: the threads every queue's engine shares (`useEngineThreads`)
//! - `checkpoint_compression.rs`: a replicated queue's checkpoints as zstd frames, on the libuv thread pool

mod backfill_task;
pub mod checkpoint_compression;
mod convert;
mod engine;
mod error;
mod state;
pub mod threads;
mod tick_task;
mod types;

use napi_derive::napi;

/// The engine crate's version, so the host can log which engine it loaded.
#[napi]
pub fn engine_version() -> &'static str {
    matchmaker_engine::ENGINE_VERSION
}
