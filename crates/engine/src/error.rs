use std::fmt;

/// Every way `run_tick` can refuse its input. The engine validates before touching any output,
/// so on `Err` the output buffers are unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineError {
    /// A pool column does not have the length implied by the ticket count (and F or H).
    ColumnLength { column: &'static str, expected: usize, actual: usize },
    /// A ticket value is out of its domain (party size 0, non-finite mmr or arrival time).
    InvalidTicket { ticket: usize, reason: &'static str },
    /// More than 32 rulesets (the ticket ruleset mask is a u32).
    TooManyRulesets { count: usize },
    /// More than `MAX_HOSTS` (256) hosts.
    TooManyHosts { count: usize },
    /// `filters.len()` differs from the pool's `filter_count`.
    FilterCount { pool: usize, params: usize },
    /// A queue-level parameter is out of its domain.
    InvalidParam { name: &'static str, reason: &'static str },
    /// A ruleset parameter is out of its domain.
    InvalidRuleset { ruleset: usize, reason: &'static str },
    /// An output buffer is smaller than `OutputCapacity::for_pool` requires.
    BufferTooSmall { buffer: &'static str, required: usize, actual: usize },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::ColumnLength { column, expected, actual } => {
                write!(f, "pool column `{column}` has length {actual}, expected {expected}")
            }
            EngineError::InvalidTicket { ticket, reason } => {
                write!(f, "ticket at pool index {ticket} is invalid: {reason}")
            }
            EngineError::TooManyRulesets { count } => {
                write!(f, "{count} rulesets given, at most 32 are supported")
            }
            EngineError::TooManyHosts { count } => {
                write!(f, "{count} hosts given, at most {} are supported", crate::MAX_HOSTS)
            }
            EngineError::FilterCount { pool, params } => {
                write!(f, "pool has {pool} attribute filters but params describe {params} filter modes")
            }
            EngineError::InvalidParam { name, reason } => {
                write!(f, "queue parameter `{name}` is invalid: {reason}")
            }
            EngineError::InvalidRuleset { ruleset, reason } => {
                write!(f, "ruleset {ruleset} is invalid: {reason}")
            }
            EngineError::BufferTooSmall { buffer, required, actual } => {
                write!(f, "output buffer `{buffer}` has length {actual}, at least {required} required")
            }
        }
    }
}

impl std::error::Error for EngineError {}
