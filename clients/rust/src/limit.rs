//! Limits, and how the module's commands spell them. Nothing here talks to Redis.

use std::time::Duration;

use crate::error::Error;

/// The module's bounds (its reference: Replies and errors, Limits of the input).
const MAX_NUMBER: u64 = 1_000_000_000_000_000;
/// The largest RL.SLIDELOG and RL.CONCURRENCY limit (a set member per unit), and so
/// RL.SLIDELOG's largest cost.
const MAX_MEMBERS: u64 = 1_000_000;
/// Every limiter's longest window but RL.COUNTER's, and the longest block: ten years
/// (their instants are µs, whose range ends in 2265).
const MAX_WINDOW: Duration = Duration::from_secs(315_360_000);
/// RL.COUNTER's longest window, 2^63 − 1 µs in whole ms (about 292,000 years): it keeps
/// no instant of its own, only the key's TTL.
const MAX_COUNTER_WINDOW: Duration = Duration::from_millis(9_223_372_036_854_775);

/// The module's limiters. `Counter` is a fixed window that starts at a caller's first hit
/// (RL.COUNTER). `SlideWindow` and `TokenBucket` are Symfony's sliding window and token
/// bucket (RL.SLIDEWINDOW, RL.TOKENBUCKET). `Concurrency` counts requests in flight (RL.CONCURRENCY); its window is
/// the lease's time to live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    SlideLog,
    SlideCount,
    SlideWindow,
    Fixed,
    Counter,
    Gcra,
    TokenBucket,
    Concurrency,
}

impl Algorithm {
    /// The word RL.ALL takes, and the command is `RL.<word>`.
    pub fn word(self) -> &'static str {
        match self {
            Algorithm::SlideLog => "SLIDELOG",
            Algorithm::SlideCount => "SLIDECOUNT",
            Algorithm::SlideWindow => "SLIDEWINDOW",
            Algorithm::Fixed => "FIXED",
            Algorithm::Counter => "COUNTER",
            Algorithm::Gcra => "GCRA",
            Algorithm::TokenBucket => "TOKENBUCKET",
            Algorithm::Concurrency => "CONCURRENCY",
        }
    }

    pub fn command(self) -> &'static str {
        match self {
            Algorithm::SlideLog => "RL.SLIDELOG",
            Algorithm::SlideCount => "RL.SLIDECOUNT",
            Algorithm::SlideWindow => "RL.SLIDEWINDOW",
            Algorithm::Fixed => "RL.FIXED",
            Algorithm::Counter => "RL.COUNTER",
            Algorithm::Gcra => "RL.GCRA",
            Algorithm::TokenBucket => "RL.TOKENBUCKET",
            Algorithm::Concurrency => "RL.CONCURRENCY",
        }
    }
}

/// What a call does with the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// Spend `cost` if every limit admits (the plain call).
    #[default]
    Spend,
    /// The same decision, spending and writing nothing.
    Peek,
    /// Give back `cost` units an admitted call spent, then answer as `Peek`.
    Refund,
    /// Clear the limiter's state, then answer as `Peek` on an empty limiter.
    Reset,
    /// Start the limit's [`Block`] now, whatever the limiter says (needs a block).
    Impose,
}

impl Mode {
    fn word(self) -> Option<&'static str> {
        match self {
            Mode::Spend => None,
            Mode::Peek => Some("PEEK"),
            Mode::Refund => Some("REFUND"),
            Mode::Reset => Some("RESET"),
            Mode::Impose => Some("IMPOSE"),
        }
    }
}

/// BLOCK, the penalty box: a spending call the limit denies refuses every call on the
/// limit for `duration` (its counters cleared, so the budget is full when it ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Block {
    pub duration: Duration,
    pub growth: Growth,
}

/// What a call made while blocked does to the block's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Growth {
    /// Nothing: the block ends `duration` after the denial that started it.
    #[default]
    Fixed,
    /// `EXTEND`: every call while blocked restarts it (fastify's `continueExceeding`).
    Extend,
    /// `BACKOFF max`: the k-th denied call makes it end `duration × 2^(k−1)` after
    /// that call, at most `max` after it (fastify's `exponentialBackoff`).
    Backoff(Duration),
}

impl Block {
    pub fn new(duration: Duration) -> Self {
        Block {
            duration,
            growth: Growth::Fixed,
        }
    }

    pub fn extend(self) -> Self {
        Block {
            growth: Growth::Extend,
            ..self
        }
    }

    pub fn backoff(self, max: Duration) -> Self {
        Block {
            growth: Growth::Backoff(max),
            ..self
        }
    }
}

/// One limiter: what the module needs to decide, plus a name for the headers. The
/// module's reply carries neither the limit nor the window, so they live here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Limit {
    /// Shown in the `RateLimit` headers.
    pub name: String,
    pub algorithm: Algorithm,
    /// The limiter's key; in a cluster, keys that go together share a `{hash tag}`.
    pub key: String,
    /// Budget per window (for `Concurrency`: leases at once).
    pub limit: u64,
    /// The window (for `Concurrency`: the lease ttl), sent in whole milliseconds.
    pub window: Duration,
    /// GCRA only: how many may come at once (default `limit`).
    pub burst: Option<u64>,
    /// Token bucket only: the tokens each whole window brings back (default 1).
    pub refill: Option<u64>,
    /// The penalty box after a denial (every algorithm but concurrency).
    pub block: Option<Block>,
    /// Counter only, `COUNTALL`: a denied spending call adds its cost too.
    pub count_all: bool,
    /// Counter only, `RENEW`: every call that writes the counter restarts the window.
    pub renew: bool,
    /// Counter only, `ESCALATE`: counts as `count_all`, and a denial sets the window to
    /// `window × 2^(count − limit − 1)` from now (at most 2^53 − 1 ms).
    pub escalate: bool,
}

impl Limit {
    pub fn new(
        name: impl Into<String>,
        algorithm: Algorithm,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Limit {
            name: name.into(),
            algorithm,
            key: key.into(),
            limit,
            window,
            burst: None,
            refill: None,
            block: None,
            count_all: false,
            renew: false,
            escalate: false,
        }
    }

    /// RL.FIXED: a fixed window (the baseline, with its boundary bursts).
    pub fn fixed(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::Fixed, key, limit, window)
    }

    /// RL.COUNTER: a fixed window that starts at the key's first hit and ends when the
    /// key expires (one counter at `key` itself, whose TTL is the window), the layout of
    /// rate-limit-redis and Python `limits`. Its window may last up to
    /// 9,223,372,036,854,775 ms (about 292,000 years), every other limiter's ten years.
    pub fn counter(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::Counter, key, limit, window)
    }

    /// RL.SLIDELOG: an exact sliding window.
    pub fn slidelog(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::SlideLog, key, limit, window)
    }

    /// RL.SLIDECOUNT: a sliding window approximated by two counters.
    pub fn slidecount(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::SlideCount, key, limit, window)
    }

    /// RL.SLIDEWINDOW: Symfony's sliding window, anchored at the key's first admitted call
    /// rather than a clock boundary (its end and two counts, one string at `key`).
    pub fn slide_window(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::SlideWindow, key, limit, window)
    }

    /// RL.TOKENBUCKET: Symfony's token bucket, up to `capacity` tokens, `refill` of them
    /// back at each whole `interval`, all at once, never beyond the capacity. A cost above
    /// the capacity is not an error: it is denied for good (`retry_after_ms` -1).
    pub fn token_bucket(
        name: impl Into<String>,
        key: impl Into<String>,
        capacity: u64,
        interval: Duration,
        refill: u64,
    ) -> Self {
        Limit {
            refill: Some(refill),
            ..Self::new(name, Algorithm::TokenBucket, key, capacity, interval)
        }
    }

    /// RL.GCRA: `limit` per `window` on average; add `.burst(b)` for how many at once.
    pub fn gcra(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        window: Duration,
    ) -> Self {
        Self::new(name, Algorithm::Gcra, key, limit, window)
    }

    /// RL.CONCURRENCY: at most `limit` leases at once, each expiring `ttl` after it was
    /// taken or last renewed (so a crashed worker's slot comes back).
    pub fn concurrency(
        name: impl Into<String>,
        key: impl Into<String>,
        limit: u64,
        ttl: Duration,
    ) -> Self {
        Self::new(name, Algorithm::Concurrency, key, limit, ttl)
    }

    /// `BLOCK`: after a denied spending call, refuse every call for a while.
    pub fn block(mut self, block: Block) -> Self {
        self.block = Some(block);
        self
    }

    /// RL.COUNTER's `COUNTALL`: a denied call adds its cost too, as the stock stores'
    /// `INCR` on every call (a call is admitted when the count before it plus its cost
    /// is within the limit). Not in `check_all`: a denied RL.ALL spends nothing.
    pub fn count_all(mut self) -> Self {
        self.count_all = true;
        self
    }

    /// RL.COUNTER's `RENEW`: every call that writes the counter sets its TTL to the whole
    /// window again (`limits`' elastic expiry, express-rate-limit's
    /// `resetExpiryOnChange`); with `count_all` denied calls renew it too.
    pub fn renew(mut self) -> Self {
        self.renew = true;
        self
    }

    /// RL.COUNTER's `ESCALATE`, @fastify/rate-limit's `exponentialBackoff`: every call
    /// counts (as `count_all`), and a denial sets the counter's TTL to
    /// `window × 2^(count − limit − 1)` from now, at most 2^53 − 1 ms. Not with `renew`.
    pub fn escalate(mut self) -> Self {
        self.escalate = true;
        self
    }

    /// The words of RL.COUNTER's own options this limit carries, in the order sent.
    fn counter_words(&self) -> impl Iterator<Item = &'static str> {
        [
            (self.count_all, "COUNTALL"),
            (self.renew, "RENEW"),
            (self.escalate, "ESCALATE"),
        ]
        .into_iter()
        .filter_map(|(on, word)| on.then_some(word))
    }

    /// Whether a denied spending call writes the counter (`COUNTALL`, `ESCALATE`), so only
    /// the server can answer it.
    pub(crate) fn counts_denials(&self) -> bool {
        self.count_all || self.escalate
    }

    /// GCRA's `BURST`.
    pub fn burst(mut self, burst: u64) -> Self {
        self.burst = Some(burst);
        self
    }

    pub fn with_key(&self, key: impl Into<String>) -> Self {
        Limit {
            key: key.into(),
            ..self.clone()
        }
    }

    /// Whether the module would accept this limit, checked without Redis: the layer
    /// checks its limits when it is built, and every call checks its limits before
    /// anything is sent, so a mistake fails at startup rather than as a Redis error
    /// that the failure policy would hide.
    pub fn validate(&self) -> Result<(), Error> {
        let invalid = |reason: String| {
            Err(Error::InvalidLimit {
                name: self.name.clone(),
                reason,
            })
        };
        if self.key.is_empty() {
            return invalid("the key is empty".into());
        }
        let most = match self.algorithm {
            // One sorted-set member per unit (a log entry, a lease).
            Algorithm::SlideLog | Algorithm::Concurrency => MAX_MEMBERS,
            _ => MAX_NUMBER,
        };
        if self.limit == 0 || self.limit > most {
            return invalid(format!(
                "the limit must be from 1 to {most} for {}, not {}",
                self.algorithm.command(),
                self.limit
            ));
        }
        let (longest, bound) = match self.algorithm {
            Algorithm::Counter => (
                MAX_COUNTER_WINDOW,
                "9223372036854775 ms (about 292,000 years)",
            ),
            _ => (MAX_WINDOW, "ten years (315360000 s)"),
        };
        if self.window.is_zero() || self.window > longest {
            return invalid(format!(
                "the window must be from 1 ms to {bound} for {}, not {:?}",
                self.algorithm.command(),
                self.window
            ));
        }
        if let Some(word) = self.counter_words().next() {
            if self.algorithm != Algorithm::Counter {
                return invalid(format!(
                    "{} takes no {word}: it is RL.COUNTER's alone",
                    self.algorithm.command()
                ));
            }
        }
        if self.renew && self.escalate {
            return invalid("RENEW and ESCALATE exclude each other".into());
        }
        if self.algorithm == Algorithm::Gcra && self.limit > self.window_ms().saturating_mul(1000) {
            return invalid(format!(
                "RL.GCRA spaces requests at least 1 µs apart: {} per {:?} is more",
                self.limit, self.window
            ));
        }
        match self.burst {
            Some(_) if self.algorithm != Algorithm::Gcra => {
                return invalid(format!("{} takes no burst", self.algorithm.command()))
            }
            Some(b) if b == 0 || b > MAX_NUMBER => {
                return invalid(format!("the burst must be from 1 to {MAX_NUMBER}, not {b}"))
            }
            _ => {}
        }
        match self.refill {
            Some(_) if self.algorithm != Algorithm::TokenBucket => {
                return invalid(format!("{} takes no refill", self.algorithm.command()))
            }
            Some(r) if r == 0 || r > MAX_NUMBER => {
                return invalid(format!(
                    "the refill must be from 1 to {MAX_NUMBER}, not {r}"
                ))
            }
            _ => {}
        }
        let Some(block) = self.block else {
            return Ok(());
        };
        // A full concurrency limit means work in flight, not a misbehaving caller.
        if self.algorithm == Algorithm::Concurrency {
            return invalid("RL.CONCURRENCY takes no block".into());
        }
        let bad_duration = |d: Duration| d.is_zero() || d > MAX_WINDOW;
        if bad_duration(block.duration) {
            return invalid(format!(
                "the block must be from 1 ms to ten years, not {:?}",
                block.duration
            ));
        }
        match block.growth {
            Growth::Backoff(max) if bad_duration(max) || ms(max) < ms(block.duration) => {
                invalid(format!(
                    "the backoff's maximum must be from the block's {:?} to ten years, not {max:?}",
                    block.duration
                ))
            }
            _ => Ok(()),
        }
    }

    /// Whether the limit may be one of RL.ALL's: the module refuses RL.COUNTER's own
    /// options there, because a denied RL.ALL writes nothing at all.
    pub fn validate_in_all(&self) -> Result<(), Error> {
        match self.counter_words().next() {
            Some(word) => Err(Error::InvalidLimit {
                name: self.name.clone(),
                reason: format!(
                    "{word} is not accepted in RL.ALL (a denied RL.ALL spends nothing): check this limit on its own"
                ),
            }),
            None => Ok(()),
        }
    }

    /// Whether `cost` units of one call fit what the module accepts for this limit.
    pub fn validate_cost(&self, cost: u64) -> Result<(), Error> {
        let invalid = |reason: String| {
            Err(Error::InvalidLimit {
                name: self.name.clone(),
                reason,
            })
        };
        match self.algorithm {
            Algorithm::Concurrency if cost != 1 => {
                invalid(format!("a lease is one slot: the cost must be 1, not {cost}"))
            }
            Algorithm::SlideLog if cost == 0 || cost > MAX_MEMBERS => invalid(format!(
                "the cost must be from 1 to {MAX_MEMBERS} for RL.SLIDELOG (each unit is a log entry), not {cost}"
            )),
            _ if cost == 0 || cost > MAX_NUMBER => invalid(format!(
                "the cost must be from 1 to {MAX_NUMBER}, not {cost}"
            )),
            _ => Ok(()),
        }
    }

    /// The window in whole milliseconds, rounded up (the module's resolution).
    pub fn window_ms(&self) -> u64 {
        ms(self.window)
    }

    pub(crate) fn window_arg(&self) -> String {
        duration_arg(self.window)
    }

    /// `<key> <limit> <window> [BURST b] [REFILL r] [COST n] [BLOCK d [EXTEND | BACKOFF max]]
    /// [COUNTALL] [RENEW] [ESCALATE]`, shared by single calls and RL.ALL.
    fn spec(&self, cmd: &mut redis::Cmd, cost: u64) {
        cmd.arg(&self.key).arg(self.limit).arg(self.window_arg());
        if let Some(burst) = self.burst {
            cmd.arg("BURST").arg(burst);
        }
        // 1 is the module's default.
        if let Some(refill) = self.refill.filter(|&r| r != 1) {
            cmd.arg("REFILL").arg(refill);
        }
        if cost != 1 && self.algorithm != Algorithm::Concurrency {
            cmd.arg("COST").arg(cost);
        }
        if let Some(block) = self.block {
            cmd.arg("BLOCK").arg(duration_arg(block.duration));
            match block.growth {
                Growth::Fixed => {}
                Growth::Extend => {
                    cmd.arg("EXTEND");
                }
                Growth::Backoff(max) => {
                    cmd.arg("BACKOFF").arg(duration_arg(max));
                }
            }
        }
        for word in self.counter_words() {
            cmd.arg(word);
        }
    }
}

/// A duration in whole milliseconds, rounded up (the module's resolution).
fn ms(duration: Duration) -> u64 {
    let ms = duration.as_millis();
    let ms = if duration > Duration::from_millis(ms as u64) {
        ms + 1
    } else {
        ms
    };
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// Whole seconds go as seconds, so that RL.FIXED names its window key in seconds as the
/// Lua scripts do; anything else as `<n>ms`.
fn duration_arg(duration: Duration) -> String {
    let ms = ms(duration);
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{ms}ms")
    }
}

/// `RL.<ALGO> key limit window [BURST b] [COST n] [BLOCK …] [NOW t] [PEEK|REFUND|RESET|IMPOSE]`.
pub(crate) fn command(limit: &Limit, cost: u64, mode: Mode, now_us: Option<i64>) -> redis::Cmd {
    let mut cmd = redis::cmd(limit.algorithm.command());
    limit.spec(&mut cmd, cost);
    if let Some(now) = now_us {
        cmd.arg("NOW").arg(now);
    }
    if let Some(word) = mode.word() {
        cmd.arg(word);
    }
    cmd
}

/// `RL.ALL n <algo> <spec>… [LEASE id] [NOW t] [PEEK|REFUND|RESET]`.
pub(crate) fn all_command(
    limits: &[Limit],
    costs: &[u64],
    mode: Mode,
    lease: Option<&str>,
    now_us: Option<i64>,
) -> redis::Cmd {
    let mut cmd = redis::cmd("RL.ALL");
    cmd.arg(limits.len());
    for (limit, &cost) in limits.iter().zip(costs) {
        cmd.arg(limit.algorithm.word());
        limit.spec(&mut cmd, cost);
    }
    if let Some(id) = lease {
        cmd.arg("LEASE").arg(id);
    }
    if let Some(now) = now_us {
        cmd.arg("NOW").arg(now);
    }
    if let Some(word) = mode.word() {
        cmd.arg(word);
    }
    cmd
}

/// What an RL.CONCURRENCY call does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseOp<'a> {
    /// Take a lease named `id`, or renew it if `id` already holds one.
    Acquire(&'a str),
    /// Give the lease back (an unknown or expired id is not an error).
    Release(&'a str),
    /// Push a held lease's expiry to now + ttl; denied if `id` holds none.
    Heartbeat(&'a str),
    /// What an acquire of a new id would get now.
    Peek,
    /// Drop every lease.
    Reset,
}

impl LeaseOp<'_> {
    pub(crate) fn mode(&self) -> Mode {
        match self {
            LeaseOp::Acquire(_) | LeaseOp::Heartbeat(_) => Mode::Spend,
            LeaseOp::Release(_) => Mode::Refund,
            LeaseOp::Peek => Mode::Peek,
            LeaseOp::Reset => Mode::Reset,
        }
    }
}

/// `RL.CONCURRENCY key limit ttl <op> [id] [NOW t]`.
pub(crate) fn lease_command(limit: &Limit, op: &LeaseOp<'_>, now_us: Option<i64>) -> redis::Cmd {
    let mut cmd = redis::cmd("RL.CONCURRENCY");
    cmd.arg(&limit.key).arg(limit.limit).arg(limit.window_arg());
    match op {
        LeaseOp::Acquire(id) => cmd.arg("ACQUIRE").arg(*id),
        LeaseOp::Release(id) => cmd.arg("RELEASE").arg(*id),
        LeaseOp::Heartbeat(id) => cmd.arg("HEARTBEAT").arg(*id),
        LeaseOp::Peek => cmd.arg("PEEK"),
        LeaseOp::Reset => cmd.arg("RESET"),
    };
    if let Some(now) = now_us {
        cmd.arg("NOW").arg(now);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<other>".into(),
            })
            .collect()
    }

    #[test]
    fn single_commands() {
        let gcra = Limit::gcra("burst", "rl:{u}:b", 10, Duration::from_secs(1)).burst(2);
        assert_eq!(
            words(&command(&gcra, 3, Mode::Peek, Some(1_718_609_349_800_000))),
            [
                "RL.GCRA",
                "rl:{u}:b",
                "10",
                "1",
                "BURST",
                "2",
                "COST",
                "3",
                "NOW",
                "1718609349800000",
                "PEEK"
            ]
        );
        let fixed = Limit::fixed("f", "k", 5, Duration::from_millis(1500));
        assert_eq!(
            words(&command(&fixed, 1, Mode::Spend, None)),
            ["RL.FIXED", "k", "5", "1500ms"]
        );
        let window = Limit::slide_window("w", "k", 10, Duration::from_secs(12));
        assert_eq!(
            words(&command(&window, 2, Mode::Spend, None)),
            ["RL.SLIDEWINDOW", "k", "10", "12", "COST", "2"]
        );
        let bucket = Limit::token_bucket("b", "k", 1000, Duration::from_secs(15), 100);
        assert_eq!(
            words(&command(&bucket, 3, Mode::Peek, None)),
            [
                "RL.TOKENBUCKET",
                "k",
                "1000",
                "15",
                "REFILL",
                "100",
                "COST",
                "3",
                "PEEK"
            ]
        );
        // REFILL 1 is the module's default: not sent.
        let one = Limit::token_bucket("b", "j", 5, Duration::from_millis(1500), 1);
        assert_eq!(
            words(&all_command(
                &[window, one],
                &[1, 1],
                Mode::Spend,
                None,
                None
            )),
            [
                "RL.ALL",
                "2",
                "SLIDEWINDOW",
                "k",
                "10",
                "12",
                "TOKENBUCKET",
                "j",
                "5",
                "1500ms"
            ]
        );
        // A window below a millisecond's resolution is rounded up, never down to 0.
        let tiny = Limit::slidelog("t", "k", 1, Duration::from_micros(1500));
        assert_eq!(tiny.window_arg(), "2ms");
    }

    #[test]
    fn counter_commands() {
        let counter = Limit::counter("c", "rl:{u}:c", 8, Duration::from_millis(1500));
        assert_eq!(
            words(&command(
                &counter,
                2,
                Mode::Reset,
                Some(1_700_000_000_000_000)
            )),
            [
                "RL.COUNTER",
                "rl:{u}:c",
                "8",
                "1500ms",
                "COST",
                "2",
                "NOW",
                "1700000000000000",
                "RESET"
            ]
        );
        let fixed = Limit::fixed("f", "rl:{u}:f", 3, Duration::from_secs(10));
        assert_eq!(
            words(&all_command(
                &[counter, fixed],
                &[1, 1],
                Mode::Spend,
                None,
                None
            )),
            ["RL.ALL", "2", "COUNTER", "rl:{u}:c", "8", "1500ms", "FIXED", "rl:{u}:f", "3", "10"]
        );
    }

    #[test]
    fn block_commands() {
        let s = Duration::from_secs(1);
        let boxed = Limit::counter("c", "k", 2, 10 * s).block(Block::new(30 * s));
        assert_eq!(
            words(&command(&boxed, 1, Mode::Impose, None)),
            ["RL.COUNTER", "k", "2", "10", "BLOCK", "30", "IMPOSE"]
        );
        let extend = boxed
            .clone()
            .block(Block::new(Duration::from_millis(1500)).extend());
        assert_eq!(
            words(&command(&extend, 3, Mode::Spend, None))[4..],
            ["COST", "3", "BLOCK", "1500ms", "EXTEND"]
        );
        let backoff = Limit::gcra("g", "j", 5, s)
            .burst(1)
            .block(Block::new(s).backoff(60 * s));
        assert_eq!(
            words(&all_command(
                &[backoff, boxed],
                &[1, 1],
                Mode::Peek,
                None,
                None
            )),
            [
                "RL.ALL", "2", "GCRA", "j", "5", "1", "BURST", "1", "BLOCK", "1", "BACKOFF", "60",
                "COUNTER", "k", "2", "10", "BLOCK", "30", "PEEK"
            ]
        );
    }

    #[test]
    fn counter_options_commands() {
        let s = Duration::from_secs(1);
        let counter = Limit::counter("c", "k", 5, 60 * s);
        assert_eq!(
            words(&command(
                &counter.clone().renew().count_all(),
                2,
                Mode::Spend,
                None
            )),
            [
                "RL.COUNTER",
                "k",
                "5",
                "60",
                "COST",
                "2",
                "COUNTALL",
                "RENEW"
            ]
        );
        let escalate = counter.escalate().block(Block::new(30 * s));
        assert_eq!(
            words(&command(&escalate, 1, Mode::Peek, None)),
            [
                "RL.COUNTER",
                "k",
                "5",
                "60",
                "BLOCK",
                "30",
                "ESCALATE",
                "PEEK"
            ]
        );
        // The longest counter window goes in ms, unrounded.
        let longest = Limit::counter("c", "k", 5, MAX_COUNTER_WINDOW);
        assert_eq!(longest.window_arg(), "9223372036854775ms");
    }

    #[test]
    fn all_and_lease_commands() {
        let a = Limit::slidecount("m", "rl:{u}:m", 100, Duration::from_secs(60));
        let c = Limit::concurrency("c", "rl:{u}:c", 5, Duration::from_secs(30));
        assert_eq!(
            words(&all_command(
                &[a, c.clone()],
                &[2, 1],
                Mode::Refund,
                Some("req-1"),
                Some(1_700_000_000_000_000)
            )),
            [
                "RL.ALL",
                "2",
                "SLIDECOUNT",
                "rl:{u}:m",
                "100",
                "60",
                "COST",
                "2",
                "CONCURRENCY",
                "rl:{u}:c",
                "5",
                "30",
                "LEASE",
                "req-1",
                "NOW",
                "1700000000000000",
                "REFUND"
            ]
        );
        assert_eq!(
            words(&lease_command(&c, &LeaseOp::Heartbeat("r"), None)),
            ["RL.CONCURRENCY", "rl:{u}:c", "5", "30", "HEARTBEAT", "r"]
        );
        assert_eq!(
            words(&command(&c, 1, Mode::Peek, None)),
            ["RL.CONCURRENCY", "rl:{u}:c", "5", "30", "PEEK"]
        );
    }
}

#[cfg(test)]
mod validation {
    use super::*;

    fn reason(limit: &Limit) -> String {
        match limit.validate() {
            Err(Error::InvalidLimit { reason, .. }) => reason,
            other => panic!("{limit:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn what_the_module_refuses_is_refused_here_with_the_reason() {
        let s = Duration::from_secs(1);
        assert!(reason(&Limit::fixed("f", "k", 0, s)).contains("from 1 to"));
        assert!(reason(&Limit::fixed("f", "", 1, s)).contains("key is empty"));
        assert!(reason(&Limit::slidelog("l", "k", 1_000_001, s)).contains("1000000"));
        assert!(reason(&Limit::fixed("f", "k", 1, Duration::ZERO)).contains("window"));
        let eleven_years = Duration::from_secs(11 * 365 * 86_400);
        assert!(reason(&Limit::fixed("f", "k", 1, eleven_years)).contains("ten years"));
        assert!(reason(&Limit::gcra("g", "k", 2_000_000, s)).contains("1 µs apart"));
        assert!(reason(&Limit::gcra("g", "k", 1, s).burst(0)).contains("burst"));
        assert!(reason(&Limit::fixed("f", "k", 1, s).burst(2)).contains("takes no burst"));
        assert!(
            reason(&Limit::counter("c", "k", 1, s).burst(2)).contains("RL.COUNTER takes no burst")
        );
        assert!(reason(&Limit::counter("c", "k", 0, s)).contains("for RL.COUNTER"));
        let boxed = |b: Block| Limit::counter("c", "k", 1, s).block(b);
        assert!(reason(&boxed(Block::new(Duration::ZERO))).contains("the block must be"));
        assert!(reason(&boxed(Block::new(eleven_years))).contains("the block must be"));
        assert!(reason(&boxed(Block::new(2 * s).backoff(s))).contains("backoff's maximum"));
        assert!(boxed(Block::new(s).backoff(s)).validate().is_ok());
        let leases = Limit::concurrency("l", "k", 1, s).block(Block::new(s));
        assert!(reason(&leases).contains("RL.CONCURRENCY takes no block"));
        // The largest of each is accepted.
        assert!(Limit::slidelog("l", "k", 1_000_000, s).validate().is_ok());
        assert!(Limit::gcra("g", "k", 1_000_000, s)
            .burst(3)
            .validate()
            .is_ok());
        assert!(Limit::fixed("f", "k", 1_000_000_000_000_000, MAX_WINDOW)
            .validate()
            .is_ok());
        assert!(Limit::counter("c", "k", 1_000_000_000_000_000, MAX_WINDOW)
            .validate()
            .is_ok());
    }

    #[test]
    fn windows_are_bounded_per_algorithm() {
        let longest = Duration::from_millis(9_223_372_036_854_775);
        assert_eq!(longest, MAX_COUNTER_WINDOW);
        assert!(Limit::counter("c", "k", 1, longest).validate().is_ok());
        let over = longest + Duration::from_millis(1);
        let text = reason(&Limit::counter("c", "k", 1, over));
        assert!(
            text.contains("9223372036854775 ms (about 292,000 years) for RL.COUNTER"),
            "{text}"
        );
        // A part of a ms past it is sent rounded up, so it is over too.
        assert!(
            Limit::counter("c", "k", 1, longest + Duration::from_micros(1))
                .validate()
                .is_err()
        );
        // Every other limiter, and every block, stays within ten years.
        let ten_years = MAX_WINDOW;
        let past = ten_years + Duration::from_millis(1);
        for limit in every_limiter_but_the_counter(1, past) {
            assert!(
                reason(&limit).contains("ten years (315360000 s)"),
                "{limit:?}"
            );
        }
        assert!(Limit::gcra("g", "k", 1, ten_years).validate().is_ok());
        let boxed = Limit::counter("c", "k", 1, longest).block(Block::new(past));
        assert!(reason(&boxed).contains("the block must be from 1 ms to ten years"));
        let backoff = Block::new(ten_years).backoff(past);
        assert!(reason(&boxed.block(backoff)).contains("backoff's maximum"));
    }

    fn every_limiter_but_the_counter(limit: u64, window: Duration) -> [Limit; 7] {
        [
            Limit::fixed("f", "k", limit, window),
            Limit::slidecount("f", "k", limit, window),
            Limit::slidelog("f", "k", limit, window),
            Limit::slide_window("f", "k", limit, window),
            Limit::token_bucket("f", "k", limit, window, 1),
            Limit::gcra("f", "k", limit, window),
            Limit::concurrency("f", "k", limit, window),
        ]
    }

    #[test]
    fn counter_options_are_the_counters_alone_and_not_in_rl_all() {
        let s = Duration::from_secs(1);
        let counter = || Limit::counter("c", "k", 5, s);
        let on = |limit: Limit, word: &str| match word {
            "COUNTALL" => limit.count_all(),
            "RENEW" => limit.renew(),
            _ => limit.escalate(),
        };
        for word in ["COUNTALL", "RENEW", "ESCALATE"] {
            assert!(on(counter(), word).validate().is_ok());
            assert!(on(counter(), word).count_all().validate().is_ok());
            for other in every_limiter_but_the_counter(5, s) {
                let command = other.algorithm.command();
                assert_eq!(
                    reason(&on(other, word)),
                    format!("{command} takes no {word}: it is RL.COUNTER's alone")
                );
            }
            let Err(Error::InvalidLimit { name, reason }) = on(counter(), word).validate_in_all()
            else {
                panic!("{word} accepted in RL.ALL");
            };
            assert_eq!(name, "c");
            assert!(reason.starts_with(&format!("{word} is not accepted in RL.ALL")));
        }
        assert!(counter().validate_in_all().is_ok());
        assert!(counter().block(Block::new(s)).validate_in_all().is_ok());
        assert_eq!(
            reason(&counter().renew().escalate()),
            "RENEW and ESCALATE exclude each other"
        );
        assert_eq!(
            reason(&counter().count_all().escalate().renew()),
            "RENEW and ESCALATE exclude each other"
        );
    }

    #[test]
    fn costs_are_checked_per_algorithm() {
        let s = Duration::from_secs(1);
        let c = Limit::concurrency("c", "k", 5, s);
        assert!(c.validate_cost(1).is_ok());
        let Err(Error::InvalidLimit { reason, .. }) = c.validate_cost(2) else {
            panic!("COST 2 on a lease was accepted");
        };
        assert!(reason.contains("a lease is one slot"), "{reason}");
        // RL.SLIDELOG: any cost up to its largest limit (above its own, it never fits).
        assert!(Limit::slidelog("l", "k", 5, s)
            .validate_cost(1_000_001)
            .is_err());
        assert!(Limit::slidelog("l", "k", 5, s)
            .validate_cost(1_000_000)
            .is_ok());
        assert!(Limit::fixed("f", "k", 5, s).validate_cost(0).is_err());
        // A cost above the limit is legal: the module answers "never" (-1).
        assert!(Limit::fixed("f", "k", 5, s).validate_cost(9).is_ok());
    }
}
