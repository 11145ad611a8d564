//! The limiters' decisions as pure functions of stored state, time and arguments.
//!
//! Nothing here knows about Redis: the server layer reads the state, calls `decide`,
//! and writes back what the decision says. That keeps every rule testable exhaustively
//! and quickly, without a server.

pub mod block;
pub mod concurrency;
pub mod counter;
pub mod fixed;
pub mod gcra;
pub mod slidecount;
pub mod slidelog;
pub mod slidewindow;
pub mod state;
pub mod throttle;
pub mod tokenbucket;

use crate::error::Result;
use crate::limit::{Request, Spec};
use state::{Fields, Held, Stored};

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
    u64::try_from(div_ceil(us, 1000)).unwrap_or(u64::MAX)
}

/// `n / d`. The decisions compute in u128 so that nothing can overflow, but a u128
/// division is a library call costing tens of instructions, and on every real call
/// both operands fit in u64: then it is one instruction.
pub fn div(n: u128, d: u128) -> u128 {
    match (u64::try_from(n), u64::try_from(d)) {
        (Ok(n), Ok(d)) => u128::from(n / d),
        _ => n / d,
    }
}

/// `n / d`, rounded up; as `div`.
pub fn div_ceil(n: u128, d: u128) -> u128 {
    match (u64::try_from(n), u64::try_from(d)) {
        (Ok(n), Ok(d)) => u128::from(n.div_ceil(d)),
        _ => n.div_ceil(d),
    }
}

/// `retry_after_ms` for a denied request that becomes admissible after `wait_us`.
pub fn retry_ms(wait_us: u128) -> i64 {
    i64::try_from(ceil_ms(wait_us)).unwrap_or(i64::MAX)
}

/// The remaining budget once `used` units count against `limit`.
pub fn remaining(limit: u64, used: u128) -> u64 {
    u64::try_from(u128::from(limit).saturating_sub(used)).unwrap_or(0)
}

/// Where a limiter keeps one piece of its state: the key it was given, or
/// `<key>:<n>` (a window counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyName {
    Base,
    Derived(u64),
    /// `<key>:block`, for a call with BLOCK.
    Block,
}

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A string holding a non-negative integer, as INCRBY keeps one.
    Integer,
    /// An integer whose expiry instant is part of the state (a window that ends when
    /// the key expires): read as `Stored::Expiring`.
    ExpiringInteger,
    /// A sorted set of timestamps; members scored at or below `expired_up_to` are
    /// out of it (the log's window start, or the leases' now).
    Log { expired_up_to: u64 },
    /// A string of several integers, as the algorithm's `fields_layout` says: read as
    /// `Stored::Fields`.
    Fields,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyUse {
    pub name: KeyName,
    pub kind: KeyKind,
    /// Whether spending, refunding or resetting may write it (else it is only read).
    pub written: bool,
}

/// The keys of one limiter call: one or two.
pub type Keys = [Option<KeyUse>; 2];

/// One integer at the base key, which a spending call writes (a TAT).
pub const BASE_INTEGER: Keys = [
    Some(KeyUse {
        name: KeyName::Base,
        kind: KeyKind::Integer,
        written: true,
    }),
    None,
];

/// One string of several integers at the base key (`KeyKind::Fields`), which a
/// spending call writes.
pub const BASE_FIELDS: Keys = [
    Some(KeyUse {
        name: KeyName::Base,
        kind: KeyKind::Fields,
        written: true,
    }),
    None,
];

/// One write a decision asks for, on the call's key number `key`. The engine
/// applies it, replicates it as core commands with absolute times, and fires the
/// keyspace events the scripts' commands would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// INCRBY; a TTL when this creates the counter.
    IncrBy { key: usize, by: u64, ttl_ms: u64 },
    /// DECRBY, never below 0 (`by` is at most the value).
    DecrBy { key: usize, by: u64 },
    /// SET to an integer, expiring `ttl_ms` from the server's now.
    SetExpiring { key: usize, value: u64, ttl_ms: u64 },
    /// SET to `<a>:<b>:…`, expiring `ttl_ms` from the server's now.
    SetFields {
        key: usize,
        fields: Fields,
        ttl_ms: u64,
    },
    /// Remove log entries at or below `cutoff`.
    Trim { key: usize, cutoff: u64 },
    /// Add `count` log entries at `at`.
    Add { key: usize, at: u64, count: u64 },
    /// PEXPIRE, if the key exists.
    Expire { key: usize, ttl_ms: u64 },
    /// Remove the `count` newest log entries above `cutoff`.
    RemoveNewest { key: usize, count: u64, cutoff: u64 },
    /// DEL, if the key exists.
    Delete { key: usize },
    /// ZADD of the call's member at `score` (added, or moved if it is there).
    SetMember { key: usize, score: u64 },
    /// ZREM of the call's member.
    RemoveMember { key: usize },
    /// SET the block key to `held` (its count when `counted`), expiring `ttl_ms`
    /// from the server's now.
    SetBlock {
        key: usize,
        held: Held,
        counted: bool,
        ttl_ms: u64,
    },
}

impl Write {
    /// The call's key number the write is on.
    pub fn key(&self) -> usize {
        match *self {
            Write::IncrBy { key, .. }
            | Write::DecrBy { key, .. }
            | Write::SetExpiring { key, .. }
            | Write::SetFields { key, .. }
            | Write::Trim { key, .. }
            | Write::Add { key, .. }
            | Write::Expire { key, .. }
            | Write::RemoveNewest { key, .. }
            | Write::Delete { key }
            | Write::SetMember { key, .. }
            | Write::RemoveMember { key }
            | Write::SetBlock { key, .. } => key,
        }
    }
}

/// A decision and the writes that carry it out. The writes can fail where the
/// decision cannot (a TAT too far to store): only a call that spends asks for them.
pub struct Verdict {
    pub decision: Decision,
    pub writes: Result<Writes>,
}

/// At most three writes per limit: a small array, no allocation per call.
pub type Writes = [Option<Write>; 3];

pub const NO_WRITES: Writes = [None, None, None];

/// The integers a command replies with: the four of `Decision`, or a shape of the
/// algorithm's own (THROTTLE answers as redis-cell does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ints {
    values: [i64; 5],
    len: usize,
}

impl Ints {
    pub fn new(values: &[i64]) -> Ints {
        let mut out = Ints {
            values: [0; 5],
            len: 0,
        };
        for (slot, &v) in out.values.iter_mut().zip(values) {
            *slot = v;
            out.len += 1;
        }
        out
    }

    pub fn as_slice(&self) -> &[i64] {
        self.values.get(..self.len).unwrap_or(&[])
    }
}

impl Decision {
    /// `[allowed, remaining, retry_after_ms, reset_after_ms]`.
    pub fn ints(&self) -> Ints {
        Ints::new(&[
            i64::from(self.allowed),
            i64::try_from(self.remaining).unwrap_or(i64::MAX),
            self.retry_after_ms,
            i64::try_from(self.reset_after_ms).unwrap_or(i64::MAX),
        ])
    }
}

/// A rate-limiting algorithm: which keys it uses, and a pure decision over what they
/// hold. Reading, writing, replicating and notifying are the engine's, the same for
/// every algorithm, so that RL.ALL, REFUND and RESET are written once.
pub trait Algorithm: Sync {
    /// As written in RL.ALL (and in `RL.<NAME>`).
    fn name(&self) -> &'static str;

    fn accepts_burst(&self) -> bool {
        false
    }

    /// Whether it takes `REFILL <amount>` (TOKENBUCKET).
    fn accepts_refill(&self) -> bool {
        false
    }

    /// Whether its own command takes `COUNTALL`, `RENEW` and `ESCALATE` (RL.COUNTER).
    fn takes_counter_options(&self) -> bool {
        false
    }

    /// Its longest window in ms: ten years, as every instant it stores in µs must
    /// stay below 2265 (see `MAX_END_US`); a limiter that stores none may take more.
    fn longest_window_ms(&self) -> u64 {
        crate::limit::MAX_WINDOW_MS
    }

    /// Whether RL.ALL can name it: only algorithms that reply the common four.
    fn joins_all(&self) -> bool {
        true
    }

    /// Whether a call names a member of the algorithm's sorted set (a lease id):
    /// the engine then reads that member's score for `decide`.
    fn uses_member(&self) -> bool {
        false
    }

    /// The largest integer its `Integer` keys can hold on its layout, and what they
    /// hold, for the error on a value beyond it (a key of another limiter, another
    /// unit): a window counter never exceeds the largest limit.
    fn integer_layout(&self) -> (u64, &'static str) {
        (
            crate::limit::MAX_AMOUNT,
            "a window counter (an integer up to 1000000000000000)",
        )
    }

    /// Its `Fields` keys' largest value per field (and so how many fields they hold),
    /// and what they hold, for the error on any other value.
    fn fields_layout(&self) -> (&'static [u64], &'static str) {
        (&[], "no fields")
    }

    /// What its `Log` keys hold, for the error on a score beyond NOW's ceiling (or
    /// infinite): no call writes one, and past 2^53 a score is no exact microsecond.
    fn log_layout(&self) -> &'static str {
        "a sliding log (entries scored in unix microseconds up to 2255)"
    }

    /// The arguments after the key, for the algorithm's own command. Most share
    /// `<limit> <window> [options]`; a command of another shape parses its own.
    fn parse(&self, command: &'static str, args: &[&[u8]]) -> Result<Request> {
        crate::args::parse_limiter(
            command,
            args,
            crate::args::Accepts {
                burst: self.accepts_burst(),
                refill: self.accepts_refill(),
                counts: self.takes_counter_options(),
                longest_window_ms: self.longest_window_ms(),
            },
        )
    }

    /// What the algorithm's own command replies.
    fn reply(&self, decision: &Decision, _spec: &Spec) -> Ints {
        decision.ints()
    }

    /// Checks of the arguments beyond what every limiter accepts.
    fn check(&self, _spec: &Spec) -> Result<()> {
        Ok(())
    }

    /// Whether a limit of this algorithm may take `BLOCK` (else the error why not).
    fn check_block(&self) -> Result<()> {
        Ok(())
    }

    fn keys(&self, spec: &Spec, now: u64) -> Keys;

    /// The decision on the state `stored` (one entry per key of `keys`), with the
    /// writes a spending call makes: the spend when admitted, else what a denial
    /// writes (the log script still trims and refreshes its TTL).
    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict;

    /// The writes that give `spec.cost` back.
    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes>;

    /// `reset_after_ms` of the state as stored, nothing spent: what PEEK, REFUND and
    /// RESET report, where `decide` counts the request it would admit. For a limiter
    /// whose units are counted, that is the decision on a request of no units.
    fn own_reset_ms(&self, stored: &[Stored], spec: &Spec, now: u64) -> u64 {
        let nothing = Spec { cost: 0, ..*spec };
        self.decide(stored, &nothing, now).decision.reset_after_ms
    }
}

impl crate::args::Named for &'static dyn Algorithm {
    fn accepts_burst(&self) -> bool {
        Algorithm::accepts_burst(*self)
    }

    fn accepts_refill(&self) -> bool {
        Algorithm::accepts_refill(*self)
    }

    fn longest_window_ms(&self) -> u64 {
        Algorithm::longest_window_ms(*self)
    }

    fn check_block(&self) -> Result<()> {
        Algorithm::check_block(*self)
    }

    fn uses_member(&self) -> bool {
        Algorithm::uses_member(*self)
    }
}

/// RL.ALL's first four integers from the per-limit decisions: admitted only if
/// every limit admits; the tightest remaining; the longest wait (-1 if any limit can
/// never admit); the longest reset.
pub fn aggregate(decisions: &[Decision]) -> Decision {
    let allowed = decisions.iter().all(|d| d.allowed);
    let retry_after_ms = if allowed {
        0
    } else {
        decisions
            .iter()
            .filter(|d| !d.allowed)
            .map(|d| d.retry_after_ms)
            .try_fold(0, |max, r| (r >= 0).then_some(max.max(r)))
            .unwrap_or(-1)
    };
    Decision {
        allowed,
        remaining: decisions.iter().map(|d| d.remaining).min().unwrap_or(0),
        retry_after_ms,
        reset_after_ms: decisions
            .iter()
            .map(|d| d.reset_after_ms)
            .max()
            .unwrap_or(0),
    }
}

/// A decision in one line, for the tests.
#[cfg(test)]
pub fn decision(allowed: bool, remaining: u64, retry: i64, reset: u64) -> Decision {
    Decision {
        allowed,
        remaining,
        retry_after_ms: retry,
        reset_after_ms: reset,
    }
}

#[cfg(test)]
mod tests {
    use super::decision as d;
    use super::*;

    #[test]
    fn divisions_agree_with_u128_ones() {
        let big = u128::from(u64::MAX);
        for n in [
            0,
            1,
            999,
            1000,
            1001,
            big - 1,
            big,
            big + 1,
            big * 7 + 3,
            u128::MAX,
        ] {
            for d in [1, 3, 1000, big, big + 1, u128::MAX] {
                assert_eq!(div(n, d), n / d, "{n} / {d}");
                assert_eq!(div_ceil(n, d), n.div_ceil(d), "{n} / {d} up");
            }
        }
    }

    #[test]
    fn aggregate_takes_the_tightest_limit() {
        let all = aggregate(&[d(true, 5, 0, 100), d(true, 2, 0, 900)]);
        assert_eq!(all, d(true, 2, 0, 900));
        let one_denies = aggregate(&[
            d(true, 5, 0, 100),
            d(false, 0, 300, 400),
            d(false, 1, 200, 50),
        ]);
        assert_eq!(one_denies, d(false, 0, 300, 400));
        let never = aggregate(&[d(false, 0, 300, 400), d(false, 3, -1, 0), d(true, 1, 0, 10)]);
        assert_eq!(never, d(false, 0, -1, 400));
    }
}

/// A PEEK's `reset_after_ms` is the state's own: 0 on an empty limiter, and what the
/// last spend reported when nothing happened since, whatever the peeked cost.
#[cfg(test)]
mod own_reset {
    use super::slidelog::tests::VecLog;
    use super::*;
    use crate::limit::Window;

    const T0: u64 = 1_764_480_000_000_000; // a multiple of every window here
    const AT: u64 = T0 + 1_500_000;

    fn spec(cost: u64) -> Spec {
        Spec {
            cost,
            ..Spec::new(10, Window::TEN_SECONDS)
        }
    }

    /// Counter algorithms: the reset a spend of 3 reports on an empty state, and the
    /// one a later PEEK of `cost` reports on what that spend stored.
    fn counter(a: &dyn Algorithm, stored_after: &[Stored]) {
        let empty = [Stored::Integer(None), Stored::Integer(None)];
        for cost in [1, 4, 10, 11] {
            assert_eq!(a.own_reset_ms(&empty, &spec(cost), AT), 0, "{}", a.name());
        }
        let spent = a.decide(&empty, &spec(3), AT).decision.reset_after_ms;
        assert!(spent > 0, "{}", a.name());
        for cost in [1, 4, 10, 11] {
            assert_eq!(
                a.own_reset_ms(stored_after, &spec(cost), AT),
                spent,
                "{} PEEK COST {cost}",
                a.name()
            );
        }
    }

    #[test]
    fn counters_report_what_is_stored() {
        let three = [Stored::Integer(Some(3)), Stored::Integer(None)];
        counter(&fixed::Fixed, &three);
        counter(&slidecount::SlideCount, &three);
        // 10 per 10 s: three units put the TAT 3 s ahead.
        let tat = [Stored::Integer(Some(AT + 3_000_000)), Stored::Integer(None)];
        counter(&gcra::Gcra, &tat);
        // The fixed window's own reset is until its end, the peek's cost aside.
        assert_eq!(fixed::Fixed.own_reset_ms(&three, &spec(1), AT), 8_500);
    }

    #[test]
    fn a_log_reports_its_newest_entry() {
        let a = slidelog::SlideLog;
        let empty = VecLog(vec![]);
        assert_eq!(a.own_reset_ms(&[Stored::Log(&empty)], &spec(1), AT), 0);
        // The peek would admit and report a full window; the state says 8.5 s.
        let log = VecLog(vec![T0 as i64, T0 as i64]);
        let stored = [Stored::Log(&log)];
        assert_eq!(
            a.decide(&stored, &spec(1), AT).decision.reset_after_ms,
            10_000
        );
        assert_eq!(a.own_reset_ms(&stored, &spec(1), AT), 8_500);
        assert_eq!(a.own_reset_ms(&stored, &spec(20), AT), 8_500);
    }

    #[test]
    fn leases_report_the_last_one_held() {
        let a = concurrency::Concurrency;
        let none = VecLog(vec![]);
        assert_eq!(a.own_reset_ms(&[Stored::Log(&none)], &spec(1), AT), 0);
        let held = VecLog(vec![(AT + 2_000_000) as i64, (AT + 4_000_001) as i64]);
        let stored = [Stored::Log(&held)];
        // An acquire would add a lease expiring a ttl (10 s) from now.
        assert_eq!(
            a.decide(&stored, &spec(1), AT).decision.reset_after_ms,
            10_000
        );
        assert_eq!(a.own_reset_ms(&stored, &spec(1), AT), 4_001);
    }
}
