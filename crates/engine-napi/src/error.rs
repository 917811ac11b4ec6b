//! Every way the binding refuses a call, and the one mapping of them to JavaScript errors.

use matchmaker_engine::EngineError;
use napi::{Error, Status};

#[derive(Debug)]
pub enum BindingError {
    /// The engine refused the input (validated before anything is written).
    Engine(EngineError),
    /// A typed array is shorter than the ticket or request count implies.
    ShortArray { name: &'static str, len: usize, needs: usize },
    /// A filter mode other than "overlap", "containment" or "continued".
    UnknownFilterMode(String),
    /// An expansion curve other than "none", "linear" or "exponential".
    UnknownCurve(String),
    /// The queue's engine is already running a tick or a backfill.
    Busy,
    /// The engine's threads could not be started.
    Threads(String),
    /// zstd could not compress a checkpoint (it ran out of memory).
    Compression(String),
    /// A checkpoint's zstd frame is corrupt, fails its checksum or holds another length than named.
    CorruptFrame(String),
}

/// The one mapping from binding errors to JavaScript errors: bad input is `InvalidArg`.
pub fn to_napi_error(err: BindingError) -> Error {
    match err {
        BindingError::Engine(err) => Error::new(Status::InvalidArg, format!("engine: {err}")),
        BindingError::ShortArray { name, len, needs } => {
            Error::new(Status::InvalidArg, format!("{name} has {len} elements, needs {needs}"))
        }
        BindingError::UnknownFilterMode(mode) => {
            Error::new(Status::InvalidArg, format!("unknown filter mode \"{mode}\""))
        }
        BindingError::UnknownCurve(curve) => {
            Error::new(Status::InvalidArg, format!("unknown expansion curve \"{curve}\""))
        }
        BindingError::Busy => Error::new(Status::GenericFailure, "a tick is already running"),
        BindingError::Threads(err) => Error::new(Status::GenericFailure, format!("engine threads: {err}")),
        BindingError::Compression(err) => Error::new(Status::GenericFailure, format!("checkpoint compression: {err}")),
        BindingError::CorruptFrame(err) => Error::new(Status::InvalidArg, format!("checkpoint frame: {err}")),
    }
}

impl From<BindingError> for Error {
    fn from(err: BindingError) -> Self {
        to_napi_error(err)
    }
}

impl From<EngineError> for BindingError {
    fn from(err: EngineError) -> Self {
        BindingError::Engine(err)
    }
}
