//! What one limiter call asks for: a limit over a window, at a cost, in a mode, with
//! or without a penalty box. Plain data, below both the parsers that build it and the
//! algorithms that decide on it.

use crate::error::{Error, Result};

/// Largest `limit`, `COST` and `BURST`. Far beyond any real budget, and small enough
/// that every product the limiters compute fits comfortably in 128 bits.
pub const MAX_AMOUNT: u64 = 1_000_000_000_000_000;

/// Largest window of most limiters, and of a BLOCK: ten years. Keeps `now + 2 * window`
/// far from overflowing, and an instant stored in µs (a TAT, a block's end) below 2265.
pub const MAX_WINDOW_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// Largest window of a limiter that stores no instant of its own but the key's TTL
/// (RL.COUNTER), about 292,000 years: its microseconds stay an i64, so `now + window`
/// fits a u64, and its TTL in ms plus the server's now an i64. Stock stores take
/// windows this long (@fastify/rate-limit's tests ask for 285,421 years).
pub const MAX_LONG_WINDOW_MS: u64 = i64::MAX as u64 / 1000;

/// The longest TTL ESCALATE sets: 2^53 - 1 ms, @fastify/rate-limit's bound on its
/// exponential backoff (the largest integer a JavaScript number holds exactly).
pub const MAX_ESCALATED_MS: u64 = (1 << 53) - 1;

/// 1973-01-01T00:00:00Z in microseconds. Anything smaller is almost surely a clock
/// read in seconds or milliseconds, which would silently break every window.
pub const MIN_NOW_US: u64 = 94_694_400_000_000;

/// 2^53 - 1 (in the year 2255): the largest timestamp a sorted-set score (a double)
/// holds exactly, so that SLIDELOG entries keep their exact microsecond.
pub const MAX_NOW_US: u64 = (1 << 53) - 1;

/// The latest instant stored as an integer (a GCRA TAT, a block's end): NOW's ceiling
/// plus the longest window or block (in 2265), so that a call at NOW's ceiling still
/// spends or starts a block. Far below CL.THROTTLE's nanoseconds (1.7e18). A read
/// refuses anything later as another layout's value.
pub const MAX_END_US: u64 = MAX_NOW_US + MAX_WINDOW_MS * 1000;

/// A window length. Always a whole number of milliseconds (the units the command
/// accepts), kept in microseconds because that is the limiters' clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    ms: u64,
}

impl Window {
    #[cfg(test)]
    pub const TEN_SECONDS: Window = Window { ms: 10_000 };

    pub fn from_ms(ms: u64) -> Result<Window> {
        Window::from_ms_upto(ms, MAX_WINDOW_MS)
    }

    /// A window of at most `max_ms`, itself at most `MAX_LONG_WINDOW_MS`.
    pub fn from_ms_upto(ms: u64, max_ms: u64) -> Result<Window> {
        let max_ms = max_ms.min(MAX_LONG_WINDOW_MS);
        if ms == 0 || ms > max_ms {
            return Err(Error::BadWindow { max_ms });
        }
        Ok(Window { ms })
    }

    pub fn ms(self) -> u64 {
        self.ms
    }

    pub fn us(self) -> u64 {
        // Cannot overflow: ms <= MAX_LONG_WINDOW_MS.
        self.ms * 1000
    }

    /// Windows given in whole seconds name their keys in seconds, as the scripts do.
    pub fn whole_seconds(self) -> bool {
        self.ms.is_multiple_of(1000)
    }
}

/// The parsed arguments of one limiter call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub spec: Spec,
    /// Explicit decision time in unix microseconds; `None` means the server clock.
    pub now: Option<u64>,
    pub mode: Mode,
    /// Position (among the parsed arguments) of the member the call names: a lease id.
    pub member: Option<usize>,
}

/// One limit as a caller states it: `<limit> <window> [BURST b] [COST n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    pub limit: u64,
    pub window: Window,
    pub cost: u64,
    /// Only accepted by algorithms that have it (GCRA, THROTTLE).
    pub burst: Option<u64>,
    /// `REFILL`: the tokens a step brings back (TOKENBUCKET only).
    pub refill: Option<u64>,
    /// Spend only by renewing what the call's member already holds (CONCURRENCY's
    /// HEARTBEAT): never take a new slot.
    pub renew_only: bool,
    /// `BLOCK …`: a denial puts the limiter in the penalty box.
    pub block: Option<Block>,
    /// `COUNTALL` (RL.COUNTER only): a denied call adds its cost too, as the stock
    /// libraries' stores INCR on every call.
    pub count_all: bool,
    /// `RENEW` (RL.COUNTER only): every call that writes the counter restarts its
    /// window, as `limits`' elastic expiry does.
    pub renew: bool,
    /// `ESCALATE` (RL.COUNTER only): counts every call as COUNTALL does, and a denied
    /// call on a live counter sets its TTL to window × 2^(count − limit − 1), at most
    /// `MAX_ESCALATED_MS`, as @fastify/rate-limit's exponential backoff does.
    pub escalate: bool,
}

impl Spec {
    pub const fn new(limit: u64, window: Window) -> Spec {
        Spec {
            limit,
            window,
            cost: 1,
            burst: None,
            refill: None,
            renew_only: false,
            block: None,
            count_all: false,
            renew: false,
            escalate: false,
        }
    }
}

/// What a call does besides deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Spend `cost` if admitted.
    Spend,
    /// Decide only; write nothing.
    Peek,
    /// Give `cost` back, then decide as a PEEK.
    Refund,
    /// Clear the state, then decide as a PEEK.
    Reset,
    /// Start the call's BLOCK now, whatever the limiter says.
    Impose,
}

/// How a block grows when calls keep coming while it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// It ends where it started ending.
    Fixed,
    /// `EXTEND`: each call restarts it (fastify's `continueExceeding`).
    Extend,
    /// `BACKOFF <max>`: the k-th strike makes it end duration × 2^(k−1) later, at
    /// most `max` (fastify's `exponentialBackoff`).
    Backoff { max: Window },
}

/// `BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub duration: Window,
    pub growth: Growth,
    /// Reply with the strikes of the current block, a fifth integer.
    pub strikes: bool,
}

impl Block {
    pub const fn new(duration: Window) -> Block {
        Block {
            duration,
            growth: Growth::Fixed,
            strikes: false,
        }
    }

    /// Whether calls while blocked count strikes (and so write the block key).
    pub fn counts(&self) -> bool {
        self.strikes || self.growth != Growth::Fixed
    }
}
