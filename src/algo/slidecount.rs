//! Sliding-window counter: the current and the previous fixed window's counters,
//! the previous one weighted by how much of it the sliding window still covers.
//!
//! estimated = current + floor(previous * (window - elapsed) / window), in integers,
//! where the seed script used a float ratio.

use super::fixed::{counter_refund, counter_verdict};
use super::state::Stored;
use super::{
    ceil_ms, div, remaining, retry_ms, Algorithm, Decision, KeyKind, KeyName, KeyUse, Keys,
    Verdict, Writes,
};
use crate::error::Result;
use crate::limit::{Spec, Window};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    pub current: u64,
    pub previous: u64,
}

/// The window index `i` of the key `<key>:<i>` holding `now`.
pub fn window_index(now: u64, window: Window) -> u64 {
    now / window.us()
}

pub fn estimate(c: Counters, window: Window, now: u64) -> u128 {
    let w = u128::from(window.us());
    let elapsed = u128::from(now % window.us());
    u128::from(c.current) + div(u128::from(c.previous) * (w - elapsed), w)
}

/// Microseconds from `now` until the estimate is at most `target`, if nothing else
/// arrives. The estimate never rises while time passes, so this is the first instant
/// of a lasting state.
fn wait_until_at_most(c: Counters, window: Window, now: u64, target: u128) -> u128 {
    let w = u128::from(window.us());
    let elapsed = u128::from(now % window.us());
    // floor(n * x / w) <= budget  <=>  x <= ((budget + 1) * w - 1) / n, for x the
    // part of the faded window that the sliding window still covers.
    let covered_at_most = |n: u64, budget: u128| div((budget + 1) * w - 1, u128::from(n));
    let current = u128::from(c.current);
    if current <= target {
        // Reachable inside this window, as the previous window's weight fades.
        if c.previous == 0 {
            return 0;
        }
        let x = covered_at_most(c.previous, target - current).min(w);
        (w - x).saturating_sub(elapsed)
    } else {
        // In the next window the current counter becomes the faded one.
        let x = covered_at_most(c.current, target).min(w);
        (w - elapsed) + (w - x)
    }
}

pub fn decide(c: Counters, limit: u64, cost: u64, window: Window, now: u64) -> Decision {
    let estimated = estimate(c, window, now);
    let allowed = estimated + u128::from(cost) <= u128::from(limit);
    let after = if allowed {
        Counters {
            current: c.current.saturating_add(cost),
            ..c
        }
    } else {
        c
    };
    let used_after = if allowed {
        estimated + u128::from(cost)
    } else {
        estimated
    };
    let retry_after_ms = if allowed {
        0
    } else if cost > limit {
        -1
    } else {
        retry_ms(wait_until_at_most(c, window, now, u128::from(limit - cost)))
    };
    Decision {
        allowed,
        remaining: remaining(limit, used_after),
        retry_after_ms,
        reset_after_ms: ceil_ms(wait_until_at_most(after, window, now, 0)),
    }
}

/// RL.SLIDECOUNT: `<key>:<i>` (written) and `<key>:<i-1>` (only read).
pub struct SlideCount;

impl Algorithm for SlideCount {
    fn name(&self) -> &'static str {
        "SLIDECOUNT"
    }

    fn keys(&self, spec: &Spec, now: u64) -> Keys {
        let i = window_index(now, spec.window);
        let counter = |n, written| KeyUse {
            name: KeyName::Derived(n),
            kind: KeyKind::Integer,
            written,
        };
        // Window 0 (the epoch's) has no previous window.
        [
            Some(counter(i, true)),
            i.checked_sub(1).map(|p| counter(p, false)),
        ]
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let value = |i: usize| stored.get(i).and_then(Stored::integer).unwrap_or(0);
        let counters = Counters {
            current: value(0),
            previous: value(1),
        };
        counter_verdict(
            decide(counters, spec.limit, spec.cost, spec.window, now),
            spec,
        )
    }

    fn refund(&self, stored: &[Stored], spec: &Spec, _now: u64) -> Result<Writes> {
        Ok(counter_refund(stored, spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Window = Window::TEN_SECONDS;
    const W_US: u64 = 10_000_000;
    const T0: u64 = 1_764_480_000_000_000; // a window boundary

    fn counters(current: u64, previous: u64) -> Counters {
        Counters { current, previous }
    }

    #[test]
    fn index_matches_the_seed_formula_for_whole_seconds() {
        // floor(now_s / window_s) with now_s a float of seconds.
        let now = T0 + 3_500_000;
        assert_eq!(
            window_index(now, W),
            (now as f64 / 1e6 / 10.0).floor() as u64
        );
    }

    #[test]
    fn the_seed_lab_admits_one_of_the_second_batch() {
        // 8 requests 200 ms before the boundary, then 200 ms after it:
        // floor(8 * 9.8 / 10) = 7, so exactly one more fits.
        let now = T0 + 200_000;
        assert_eq!(estimate(counters(0, 8), W, now), 7);
        let d = decide(counters(0, 8), 8, 1, W, now);
        assert_eq!((d.allowed, d.remaining), (true, 0));
        assert!(!decide(counters(1, 8), 8, 1, W, now).allowed);
    }

    #[test]
    fn retry_after_is_exact_to_the_millisecond() {
        // Brute force over times: the first whole-ms instant at which the request fits.
        // Each row says whether the request is admitted at once; every row is checked.
        let (mut admitted, mut denied) = (0, 0);
        for (cur, prev, limit, cost, offset, allowed) in [
            // 1 + floor(8 × 9.8 / 10) = 8, full.
            (1u64, 8u64, 8u64, 1u64, 200_000u64, false),
            // 0 + 7: one more fits.
            (0, 8, 8, 1, 200_000, true),
            // 3 + floor(5 × 8.765433 / 10) = 7, and 2 more do not fit 6.
            (3, 5, 6, 2, 1_234_567, false),
            (5, 0, 5, 1, 9_999_999, false),
            (4, 9, 5, 5, 0, false),
            // 2 + floor(1 × 2.999999 / 10) = 2: one more fits 3.
            (2, 1, 3, 1, 7_000_001, true),
            // floor(3 × 3.333334 / 10) = 1 fills limit 1; 1 µs later it is 0:
            // retry 1 ms.
            (0, 3, 1, 1, 6_666_666, false),
            // Exactly at the start of a window: all of the previous one counts.
            (0, 4, 5, 1, 0, true),
        ] {
            let c = counters(cur, prev);
            let now = T0 + offset;
            let d = decide(c, limit, cost, W, now);
            let fits = |t: u64| {
                // Counters as they would be read at t if nothing else arrived.
                let shifted = match window_index(t, W) - window_index(now, W) {
                    0 => c,
                    1 => counters(0, c.current),
                    _ => counters(0, 0),
                };
                estimate(shifted, W, t) + u128::from(cost) <= u128::from(limit)
            };
            assert_eq!(d.allowed, allowed, "{c:?} {offset}");
            assert_eq!(d.allowed, fits(now), "{c:?} {offset}");
            if d.allowed {
                assert_eq!(d.retry_after_ms, 0, "{c:?} {offset}");
                admitted += 1;
                continue;
            }
            denied += 1;
            assert!(d.retry_after_ms > 0, "{c:?} {offset}: {}", d.retry_after_ms);
            let retry = d.retry_after_ms as u64 * 1000;
            assert!(fits(now + retry), "{c:?} {offset}: not admitted at retry");
            assert!(
                !fits(now + retry - 1000),
                "{c:?} {offset}: admitted before retry"
            );
        }
        assert_eq!((admitted, denied), (3, 5));
    }

    #[test]
    fn reset_is_when_the_estimate_reaches_zero() {
        // 4 in the current window (after this one): gone once the next window has
        // faded them: floor(4 * x / w) = 0 for x < w / 4.
        let now = T0 + 1_000_000;
        let d = decide(counters(3, 0), 10, 1, W, now);
        assert!(d.allowed);
        assert_eq!(d.reset_after_ms, 9_000 + 7_500 + 1);
        // A single unit fades one microsecond into the next window.
        assert_eq!(decide(counters(0, 0), 10, 1, W, now).reset_after_ms, 9_001);
        let peek_like = decide(counters(0, 0), 10, 11, W, now);
        assert_eq!(
            (
                peek_like.allowed,
                peek_like.reset_after_ms,
                peek_like.retry_after_ms
            ),
            (false, 0, -1)
        );
    }

    #[test]
    fn huge_counters_do_not_overflow() {
        let d = decide(counters(u64::MAX, u64::MAX), 1_000, 1, W, T0 + W_US - 1);
        assert!(!d.allowed);
        assert!(d.retry_after_ms > 0);
        assert_eq!(d.remaining, 0);
    }
}
