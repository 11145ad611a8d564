//! Sliding-window log: one entry per admitted unit, exact.
//!
//! An entry is inside the window while its timestamp is greater than `now - window`;
//! an entry exactly `window` old is gone (the scripts' `ZREMRANGEBYSCORE 0 now-window`).

use super::state::{Log, Stored};
use super::{
    ceil_ms, remaining, retry_ms, Algorithm, Decision, KeyKind, KeyName, KeyUse, Keys, Verdict,
    Write, Writes, NO_WRITES,
};
use crate::error::{Error, Result};
use crate::limit::{Spec, Window};

/// A log's size is bounded so that no single call adds or scans an unbounded set.
/// COST has the same bound: each unit is one member added in the call, as the
/// libraries' own stores add one list entry per unit, so a call's work is O(COST).
pub const MAX_LOG_LIMIT: u64 = 1_000_000;

/// The greatest timestamp that is already out of the window at `now`.
pub fn cutoff(now: u64, window: Window) -> u64 {
    now.saturating_sub(window.us())
}

pub fn decide(
    log: &(impl Log + ?Sized),
    limit: u64,
    cost: u64,
    window: Window,
    now: u64,
) -> Decision {
    let count = log.count();
    let used = u128::from(count);
    let allowed = used + u128::from(cost) <= u128::from(limit);
    let used_after = if allowed {
        used + u128::from(cost)
    } else {
        used
    };

    // Waits are measured from an entry's timestamp, which a foreign writer may have
    // set to anything a double can hold: hence the wide, saturating arithmetic.
    let gone_after = |timestamp: i64| -> u128 {
        let wait = i128::from(timestamp) + i128::from(window.us()) - i128::from(now);
        u128::try_from(wait).unwrap_or(0)
    };
    let retry_after_ms = if allowed {
        0
    } else if cost > limit {
        -1
    } else {
        // The request fits once the oldest `count + cost - limit` entries have left.
        let must_leave = count.saturating_add(cost).saturating_sub(limit);
        log.nth_oldest(must_leave)
            .map_or(-1, |timestamp| retry_ms(gone_after(timestamp)))
    };
    // The newest entry once the request's own are in (a request of no units adds none).
    let newest = match (allowed && cost > 0, log.newest()) {
        (true, Some(t)) => Some(t.max(now_i64(now))),
        (true, None) => Some(now_i64(now)),
        (false, newest) => newest,
    };
    Decision {
        allowed,
        remaining: remaining(limit, used_after),
        retry_after_ms,
        reset_after_ms: newest.map_or(0, |t| ceil_ms(gone_after(t))),
    }
}

fn now_i64(now: u64) -> i64 {
    i64::try_from(now).unwrap_or(i64::MAX)
}

/// A log with no entries: the state of a missing key.
pub struct EmptyLog;

impl Log for EmptyLog {
    fn count(&self) -> u64 {
        0
    }
    fn nth_oldest(&self, _n: u64) -> Option<i64> {
        None
    }
    fn newest(&self) -> Option<i64> {
        None
    }
}

/// RL.SLIDELOG: the sorted set at the key, as the script keeps it.
pub struct SlideLog;

impl SlideLog {
    fn log<'a>(stored: &'a [Stored<'a>]) -> &'a dyn Log {
        match stored.first() {
            Some(Stored::Log(log)) => *log,
            _ => &EmptyLog,
        }
    }
}

impl Algorithm for SlideLog {
    fn name(&self) -> &'static str {
        "SLIDELOG"
    }

    fn check(&self, spec: &Spec) -> Result<()> {
        if spec.limit > MAX_LOG_LIMIT {
            return Err(Error::NotPositive {
                name: "limit",
                max: MAX_LOG_LIMIT,
            });
        }
        if spec.cost > MAX_LOG_LIMIT {
            return Err(Error::NotPositive {
                name: "COST",
                max: MAX_LOG_LIMIT,
            });
        }
        Ok(())
    }

    fn keys(&self, spec: &Spec, now: u64) -> Keys {
        [
            Some(KeyUse {
                name: KeyName::Base,
                kind: KeyKind::Log {
                    expired_up_to: cutoff(now, spec.window),
                },
                written: true,
            }),
            None,
        ]
    }

    /// The script's ZREMRANGEBYSCORE, ZADD and PEXPIRE; on a denial it still trims
    /// and refreshes the TTL.
    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let decision = decide(Self::log(stored), spec.limit, spec.cost, spec.window, now);
        let trim = Write::Trim {
            key: 0,
            cutoff: cutoff(now, spec.window),
        };
        let add = Write::Add {
            key: 0,
            at: now,
            count: spec.cost,
        };
        let expire = Write::Expire {
            key: 0,
            ttl_ms: spec.window.ms(),
        };
        let writes = if decision.allowed {
            [Some(trim), Some(add), Some(expire)]
        } else {
            [Some(trim), Some(expire), None]
        };
        Verdict {
            decision,
            writes: Ok(writes),
        }
    }

    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes> {
        if Self::log(stored).count() == 0 {
            return Ok(NO_WRITES);
        }
        Ok([
            Some(Write::RemoveNewest {
                key: 0,
                count: spec.cost,
                cutoff: cutoff(now, spec.window),
            }),
            None,
            None,
        ])
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A log as a plain sorted list of timestamps, trimmed like the server trims.
    pub struct VecLog(pub Vec<i64>);

    impl VecLog {
        pub fn in_window(entries: &[i64], now: u64, window: Window) -> VecLog {
            let cut = cutoff(now, window) as i64;
            let mut v: Vec<i64> = entries.iter().copied().filter(|&t| t > cut).collect();
            v.sort_unstable();
            VecLog(v)
        }
    }

    impl Log for VecLog {
        fn count(&self) -> u64 {
            self.0.len() as u64
        }
        fn nth_oldest(&self, n: u64) -> Option<i64> {
            self.0
                .get(usize::try_from(n).ok()?.checked_sub(1)?)
                .copied()
        }
        fn newest(&self) -> Option<i64> {
            self.0.last().copied()
        }
    }

    const W: Window = Window::TEN_SECONDS;
    const T0: u64 = 1_764_480_000_000_000;

    /// Runs a sequence of requests against an in-memory log, as the server would.
    fn run(log: &mut Vec<i64>, limit: u64, cost: u64, now: u64) -> Decision {
        let view = VecLog::in_window(log, now, W);
        let d = decide(&view, limit, cost, W, now);
        *log = view.0;
        if d.allowed {
            log.extend(std::iter::repeat_n(now as i64, cost as usize));
        }
        d
    }

    #[test]
    fn an_entry_exactly_window_old_is_gone() {
        let mut log = vec![];
        assert!(run(&mut log, 1, 1, T0).allowed);
        assert!(!run(&mut log, 1, 1, T0 + 10_000_000 - 1).allowed);
        assert!(run(&mut log, 1, 1, T0 + 10_000_000).allowed);
    }

    #[test]
    fn retry_after_is_exact_to_the_millisecond() {
        let mut log = vec![];
        for i in 0..5 {
            assert!(run(&mut log, 5, 1, T0 + i * 1_000_000).allowed);
        }
        let now = T0 + 5_000_000;
        let d = run(&mut log, 5, 1, now);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms),
            (false, 0, 5_000)
        );
        assert_eq!(d.reset_after_ms, 9_000);
        // At retry - 1 ms still denied, at retry admitted.
        let view = VecLog::in_window(&log, now + 4_999_000, W);
        assert!(!decide(&view, 5, 1, W, now + 4_999_000).allowed);
        let view = VecLog::in_window(&log, now + 5_000_000, W);
        assert!(decide(&view, 5, 1, W, now + 5_000_000).allowed);
    }

    #[test]
    fn retry_rounds_sub_millisecond_waits_up() {
        let log = VecLog(vec![T0 as i64 + 1]);
        let d = decide(&log, 1, 1, W, T0 + 1_000);
        // Leaves at T0 + 1 + 10 s: 9_999.001 ms away.
        assert_eq!(d.retry_after_ms, 10_000);
    }

    #[test]
    fn cost_larger_than_remaining_waits_for_enough_entries() {
        let mut log = vec![];
        for i in 0..4 {
            assert!(run(&mut log, 5, 1, T0 + i * 1_000_000).allowed);
        }
        // 4 used, 1 remaining; cost 3 needs the two oldest gone (at T0 + 10 s and + 11 s).
        let now = T0 + 4_000_000;
        let d = run(&mut log, 5, 3, now);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms),
            (false, 1, 7_000)
        );
        let d = run(&mut log, 5, 1, now);
        assert_eq!((d.allowed, d.remaining), (true, 0));
    }

    #[test]
    fn cost_above_limit_is_never_admitted() {
        let d = decide(&VecLog(vec![]), 5, 6, W, T0);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 5, -1, 0)
        );
    }

    #[test]
    fn reset_counts_from_the_newest_entry() {
        let mut log = vec![];
        run(&mut log, 5, 2, T0);
        let d = run(&mut log, 5, 1, T0 + 3_000_000);
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after_ms),
            (true, 2, 10_000)
        );
        let d = decide(
            &VecLog::in_window(&log, T0 + 4_000_000, W),
            5,
            5,
            W,
            T0 + 4_000_000,
        );
        assert_eq!(d.reset_after_ms, 9_000);
    }

    #[test]
    fn absurd_timestamps_do_not_overflow() {
        let log = VecLog(vec![i64::MIN, i64::MAX]);
        let d = decide(&log, 1, 1, W, T0);
        assert!(!d.allowed);
        assert!(d.retry_after_ms >= 0);
        let d = decide(&VecLog(vec![i64::MAX]), 2, 2, W, T0);
        assert!(!d.allowed);
        assert!(d.retry_after_ms > 0);
    }

    #[test]
    fn exhaustive_small_sequences_match_a_brute_force_count() {
        // For every arrival pattern on a coarse grid, the decision equals "entries in
        // (now - window, now] plus cost fit the limit", and retry/reset are the first
        // instants at which that becomes true.
        let step = 2_500_000u64;
        for pattern in 0u32..(1 << 8) {
            let mut log = vec![];
            let mut accepted: Vec<u64> = vec![];
            for slot in 0..8u64 {
                if pattern & (1 << slot) == 0 {
                    continue;
                }
                let now = T0 + slot * step;
                let inside = accepted.iter().filter(|&&t| t + W.us() > now).count() as u64;
                let d = run(&mut log, 3, 1, now);
                assert_eq!(d.allowed, inside < 3);
                if d.allowed {
                    accepted.push(now);
                } else {
                    let later = now + d.retry_after_ms as u64 * 1000;
                    let inside_later = accepted.iter().filter(|&&t| t + W.us() > later).count();
                    let inside_before = accepted
                        .iter()
                        .filter(|&&t| t + W.us() > later - 1000)
                        .count();
                    assert!(inside_later < 3 && inside_before >= 3);
                }
            }
        }
    }
}
