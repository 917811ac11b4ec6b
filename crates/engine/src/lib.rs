//! The standard matchmaking engine. Pure Rust: no napi, no I/O. The host hands it a columnar pool
//! (borrowed slices) and preallocated output buffers; see docs/engine.md.

/// Version of the engine's semantics, reported by the host at startup.
pub const ENGINE_VERSION: &str = env!("CARGO_PKG_VERSION");
