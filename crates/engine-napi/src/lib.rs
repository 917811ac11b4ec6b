//! napi-rs binding of `matchmaker-engine`. It only converts buffers between JavaScript and the engine.
use napi_derive::napi;

/// The engine crate's version, so the host can log which engine it loaded.
#[napi]
pub fn engine_version() -> &'static str {
    matchmaker_engine::ENGINE_VERSION
}
