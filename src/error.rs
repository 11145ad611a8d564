//! Every way a command can fail, rendered once as the Redis error reply.
//!
//! The text of each variant is exactly what the client reads, so it starts with the
//! error code (`ERR`, `WRONGTYPE`, `NOPERM`) that Redis clients switch on.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(&'static str),

    #[error("ERR {name} must be a positive integer no larger than {max}")]
    NotPositive { name: &'static str, max: u64 },

    #[error(
        "ERR window must be a positive duration such as 60, 60s or 1500ms, at most {max_ms}ms"
    )]
    BadWindow { max_ms: u64 },

    #[error("ERR NOW must be unix time in microseconds; {value} looks like {unit}")]
    NowUnit { value: u64, unit: &'static str },

    #[error("ERR NOW must be unix time in microseconds between 1973 and 2255")]
    BadNow,

    #[error("ERR syntax error: too many arguments for '{0}'")]
    TooManyArguments(&'static str),

    #[error("ERR syntax error: unknown option '{0}'")]
    UnknownOption(String),

    #[error("ERR syntax error: {0} given more than once")]
    RepeatedOption(&'static str),

    #[error("ERR syntax error: {0} needs a value")]
    MissingValue(&'static str),

    #[error("ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other")]
    ConflictingModes,

    #[error(
        "ERR {name} must be a positive duration such as 60, 60s or 1500ms, at most {max_ms}ms"
    )]
    BadDuration { name: &'static str, max_ms: u64 },

    #[error("ERR BACKOFF must be a duration no shorter than BLOCK's")]
    BadBackoff,

    #[error("ERR syntax error: RENEW and ESCALATE exclude each other")]
    RenewAndEscalate,

    #[error("ERR syntax error: {0} is only accepted by RL.COUNTER")]
    CounterOnly(&'static str),

    #[error("ERR syntax error: {0} is not accepted in RL.ALL (a denied RL.ALL spends nothing)")]
    NotInAll(&'static str),

    #[error("ERR syntax error: {0} needs BLOCK")]
    NeedsBlock(&'static str),

    #[error("ERR syntax error: EXTEND and BACKOFF exclude each other")]
    ExtendAndBackoff,

    #[error("ERR {0} does not take BLOCK: {1}")]
    BlockNotTaken(&'static str, &'static str),

    #[error("ERR limiter key '{0}' does not hold a block (its end in unix microseconds up to 2265, optionally :strikes up to 1000000000000000)")]
    NotABlock(String),

    #[error("ERR RL.ALL needs a number of limits from 1 to {0}")]
    BadLimitCount(u64),

    #[error("ERR RL.ALL: unknown algorithm '{0}'")]
    UnknownAlgorithm(String),

    #[error(
        "ERR syntax error: {0} belongs to a limit and must come before NOW, PEEK, REFUND or RESET"
    )]
    OptionAfterLimits(&'static str),

    /// The name given, and the table's algorithms (so the list never goes stale).
    #[error("ERR RL.TOP: unknown algorithm '{0}' (one of {1})")]
    TopUnknownAlgorithm(String, String),

    #[error("ERR RL.ALL: key '{0}' is used by more than one limit")]
    DuplicateKey(String),

    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,

    #[error("ERR limiter key '{0}' does not hold a non-negative integer")]
    NotACounter(String),

    #[error("ERR limiter key '{0}' does not hold {1}")]
    OutOfLayout(String, &'static str),

    #[error("ERR limiter key '{0}' holds a value that would overflow")]
    Overflow(String),

    #[error("ERR key '{0}' needs a {{hash tag}} in cluster mode, so that its per-window keys stay in its slot")]
    NeedsHashTag(String),

    #[error("TRYAGAIN the slot of this limiter is being migrated and its window counters have not all arrived yet")]
    TryAgain,

    #[error("NOPERM this user has no permissions to access the '{0}' key")]
    NoPermission(String),

    #[error("ERR no secret for RL.PSEUDONYM: point the config rl.secret-file at a file holding it, or set RL_SECRET in the server's environment")]
    NoSecret,

    #[error("ERR rl.secret-file: {0}")]
    SecretFile(String),

    #[error("ERR RL.GCRA: the arrival time would overflow (BURST x window / limit is too long)")]
    TatOverflow,

    #[error("ERR RL.GCRA spaces requests at least 1 µs apart: limit may not exceed the window in microseconds ({0})")]
    RateTooHigh(u64),

    #[error("ERR RL.CONCURRENCY: a lease is one slot, COST is not accepted")]
    LeaseCost,

    #[error("ERR RL.CONCURRENCY: the lease would expire after 2255 (ttl too long for NOW)")]
    LeaseOverflow,

    #[error("ERR syntax error: ACQUIRE, RELEASE, HEARTBEAT, PEEK and RESET exclude each other")]
    ConflictingLeaseOperations,

    #[error(
        "ERR RL.CONCURRENCY needs one of ACQUIRE <id>, RELEASE <id>, HEARTBEAT <id>, PEEK or RESET"
    )]
    MissingLeaseOperation,

    #[error("ERR RL.ALL: a CONCURRENCY limit needs the call's LEASE <id> (after the limits)")]
    MissingLease,

    #[error("ERR RL.ALL: LEASE is only for CONCURRENCY limits, and this call has none")]
    LeaseWithoutConcurrency,

    #[error("ERR RL.THROTTLE: {name} must be an integer from {min} to {max}")]
    ThrottleArgument {
        name: &'static str,
        min: u64,
        max: u64,
    },

    #[error(
        "ERR RL.THROTTLE: count per period allows at most one per microsecond ({0} in this period)"
    )]
    ThrottleRateTooHigh(u64),

    #[error("ERR RL.THROTTLE: the arrival time would overflow (max_burst or quantity x period / count is too long)")]
    ThrottleOverflow,

    #[error("ERR PREFIX6 must be a prefix length from 1 to 128")]
    BadPrefix,

    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    OutOfMemory,

    #[error("ERR rl internal error: {0}")]
    Internal(&'static str),

    #[error("ERR rl internal error, nothing was written after it: {0}")]
    Panic(String),
}

pub type Result<T> = std::result::Result<T, Error>;
