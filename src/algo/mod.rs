//! The limiters' decisions as pure functions of stored state, time and arguments.
//!
//! Nothing here knows about Redis: the server layer reads the state, calls `decide`,
//! and writes back what the decision says. That keeps every rule testable exhaustively
//! and quickly, without a server.

pub mod fixed;
pub mod gcra;
pub mod slidecount;
pub mod slidelog;

/// What every limiter command replies, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Units still available after this request.
    pub remaining: u64,
    /// 0 when allowed; else the wait after which the same request would pass; -1: never.
    pub retry_after_ms: i64,
    /// Wait until the full budget is back, if nothing else arrives.
    pub reset_after_ms: u64,
}

/// Microseconds to whole milliseconds, rounded up: a caller who waits the reported
/// time must never arrive early.
pub fn ceil_ms(us: u128) -> u64 {
    u64::try_from(us.div_ceil(1000)).unwrap_or(u64::MAX)
}

/// `retry_after_ms` for a denied request that becomes admissible after `wait_us`.
pub fn retry_ms(wait_us: u128) -> i64 {
    i64::try_from(ceil_ms(wait_us)).unwrap_or(i64::MAX)
}

/// The remaining budget once `used` units count against `limit`.
pub fn remaining(limit: u64, used: u128) -> u64 {
    u64::try_from(u128::from(limit).saturating_sub(used)).unwrap_or(0)
}
