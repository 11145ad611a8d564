//! Sliding window anchored at the first admitted call, as Symfony RateLimiter's
//! `sliding_window` keeps it: a window of its own (not aligned to the clock) that
//! starts when a call finds none, its count, and the count of the window before it,
//! weighted by how much of that window the sliding window still covers.
//!
//! estimated = count + floor(previous × (end − now) / window), in integer µs, where
//! Symfony computes floor(previous × (1 − (now − start) / window) + count) in float
//! seconds: the same number whenever Symfony's float does not round across an integer.

use super::state::{Fields, Stored};
use super::{
    ceil_ms, div, remaining, retry_ms, Algorithm, Decision, Keys, Verdict, Write, Writes,
    BASE_FIELDS, NO_WRITES,
};
use crate::error::Result;
use crate::limit::{Spec, MAX_AMOUNT, MAX_END_US};

/// The state at `<key>`: `<end-µs>:<count>:<previous>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Unix µs at which the window ends (Symfony's `windowEndAt`).
    pub end: u64,
    /// Units admitted in it (`hitCount`).
    pub count: u64,
    /// Units admitted in the window before it (`hitCountForLastWindow`).
    pub previous: u64,
}

/// What a stored window can hold: the latest end a call writes (NOW's ceiling plus
/// the longest window), and counts up to the largest limit.
const LAYOUT: [u64; 3] = [MAX_END_US, MAX_AMOUNT, MAX_AMOUNT];

impl Window {
    fn fields(self) -> Fields {
        Fields::new(&[self.end, self.count, self.previous])
    }

    fn read(stored: &Stored) -> Option<Window> {
        let Stored::Fields(Some(f)) = stored else {
            return None;
        };
        let v = f.as_slice();
        Some(Window {
            end: *v.first()?,
            count: *v.get(1)?,
            previous: *v.get(2)?,
        })
    }
}

/// The window in force at `now`, as Symfony's limiter builds it before deciding: the
/// stored one while it lasts (`now` up to its end included); the next one, with the
/// stored count as its previous, during the window after it; else a fresh window
/// ending a window from now.
pub fn roll(stored: Option<Window>, window_us: u64, now: u64) -> Window {
    let fresh = Window {
        end: now.saturating_add(window_us),
        count: 0,
        previous: 0,
    };
    match stored {
        Some(s) if now <= s.end => s,
        Some(s) if u128::from(now) < u128::from(s.end) + u128::from(window_us) => Window {
            end: s.end + window_us,
            count: 0,
            previous: s.count,
        },
        _ => fresh,
    }
}

/// The units counted at `now` (at most its end) against the window `s`. A window
/// that ends more than a window from now (a clock stepped back) counts its previous
/// window in full, not more.
pub fn estimate(s: Window, window_us: u64, now: u64) -> u128 {
    let w = u128::from(window_us);
    let covered = u128::from(s.end.saturating_sub(now)).min(w);
    u128::from(s.count) + div(u128::from(s.previous) * covered, w)
}

/// The most µs of a window that `n` faded units may still cover while
/// floor(n × covered / w) stays at most `budget`.
fn covered_at_most(n: u64, budget: u128, w: u128) -> u128 {
    div((budget + 1) * w - 1, u128::from(n)).min(w)
}

/// Microseconds from `now` until the estimate is at most `target`, if nothing else
/// arrives: the previous count fades until the end of `s`, after which its count is
/// the one that fades.
fn wait_until_at_most(s: Window, window_us: u64, now: u64, target: u128) -> u128 {
    let w = u128::from(window_us);
    let (end, now) = (u128::from(s.end), u128::from(now));
    let count = u128::from(s.count);
    if count <= target {
        if s.previous == 0 {
            return 0;
        }
        let x = covered_at_most(s.previous, target - count, w);
        end.saturating_sub(x).saturating_sub(now)
    } else {
        // Below w: the count fits only once the next window has begun.
        let x = covered_at_most(s.count, target, w);
        (end + w - x).saturating_sub(now)
    }
}

/// Until the window after `s` ends: then nothing of `s` counts any more.
fn until_forgotten(s: Window, window_us: u64, now: u64) -> u64 {
    ceil_ms((u128::from(s.end) + u128::from(window_us)).saturating_sub(u128::from(now)))
}

/// The decision on the stored window at `now`. An admitted call stores the window in
/// force with its cost added; a denied one writes nothing (Symfony saves nothing).
pub fn decide(stored: Option<Window>, spec: &Spec, now: u64) -> Verdict {
    let window_us = spec.window.us();
    let s = roll(stored, window_us, now);
    let (limit, cost) = (spec.limit, spec.cost);
    let estimated = estimate(s, window_us, now);
    let allowed = estimated + u128::from(cost) <= u128::from(limit);
    let used_after = estimated + if allowed { u128::from(cost) } else { 0 };
    // Admitted, the count is at most the limit: it stays within the layout.
    let after = Window {
        count: if allowed { s.count + cost } else { s.count },
        ..s
    };
    let decision = Decision {
        allowed,
        remaining: remaining(limit, used_after),
        retry_after_ms: if allowed {
            0
        } else if cost > limit {
            -1
        } else {
            retry_ms(wait_until_at_most(
                s,
                window_us,
                now,
                u128::from(limit - cost),
            ))
        },
        reset_after_ms: if allowed {
            until_forgotten(after, window_us, now)
        } else {
            own_reset(stored, window_us, now)
        },
    };
    let write = Write::SetFields {
        key: 0,
        fields: after.fields(),
        ttl_ms: until_forgotten(after, window_us, now),
    };
    Verdict {
        decision,
        writes: Ok([allowed.then_some(write), None, None]),
    }
}

/// The state's own reset: until the window after the one in force ends, while a
/// stored window still matters; 0 when none does.
fn own_reset(stored: Option<Window>, window_us: u64, now: u64) -> u64 {
    let live = stored.is_some_and(|s| u128::from(now) < u128::from(s.end) + u128::from(window_us));
    if live {
        until_forgotten(roll(stored, window_us, now), window_us, now)
    } else {
        0
    }
}

/// RL.SLIDEWINDOW: the window at `<key>` itself.
pub struct SlideWindow;

impl Algorithm for SlideWindow {
    fn name(&self) -> &'static str {
        "SLIDEWINDOW"
    }

    fn fields_layout(&self) -> (&'static [u64], &'static str) {
        (
            &LAYOUT,
            "a sliding window (<end in unix microseconds up to 2265>:<count>:<previous count>, counts up to 1000000000000000)",
        )
    }

    fn keys(&self, _spec: &Spec, _now: u64) -> Keys {
        BASE_FIELDS
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        decide(stored.first().and_then(Window::read), spec, now)
    }

    /// Gives back up to `cost` of the window in force's own count (units of the
    /// window before it are past refunding, as SLIDECOUNT's).
    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes> {
        let window_us = spec.window.us();
        let s = roll(stored.first().and_then(Window::read), window_us, now);
        let by = s.count.min(spec.cost);
        if by == 0 {
            return Ok(NO_WRITES);
        }
        let after = Window {
            count: s.count - by,
            ..s
        };
        Ok([
            Some(Write::SetFields {
                key: 0,
                fields: after.fields(),
                ttl_ms: until_forgotten(after, window_us, now),
            }),
            None,
            None,
        ])
    }

    fn own_reset_ms(&self, stored: &[Stored], spec: &Spec, now: u64) -> u64 {
        own_reset(stored.first().and_then(Window::read), spec.window.us(), now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Window as Span;

    const S: u64 = 1_000_000;
    const T0: u64 = 1_764_480_003_250_000; // not aligned to any window

    /// Symfony's tests: 10 per 12 s.
    fn spec(cost: u64) -> Spec {
        Spec {
            cost,
            ..Spec::new(10, Span::from_ms(12_000).unwrap_or(Span::TEN_SECONDS))
        }
    }

    /// A spending call: its decision, and the window it stores (the old one if none).
    fn spend(stored: Option<Window>, cost: u64, now: u64) -> (Decision, Option<Window>) {
        let v = decide(stored, &spec(cost), now);
        let written = match v.writes {
            Ok([Some(Write::SetFields { fields, .. }), None, None]) => {
                Window::read(&Stored::Fields(Some(fields)))
            }
            Ok([None, None, None]) => stored,
            _ => panic!("unexpected writes"),
        };
        (v.decision, written)
    }

    fn w(end: u64, count: u64, previous: u64) -> Window {
        Window {
            end,
            count,
            previous,
        }
    }

    #[test]
    fn symfony_test_consume() {
        // consume(8), 15 s later consume(1): 25 % into the next window, 8 × 9 / 12 = 6.
        let (d, s) = spend(None, 8, T0);
        assert!(d.allowed);
        assert_eq!(s, Some(w(T0 + 12 * S, 8, 0)));
        let (d, s) = spend(s, 1, T0 + 15 * S);
        assert_eq!((d.allowed, d.remaining), (true, 3));
        assert_eq!(s, Some(w(T0 + 24 * S, 1, 8)));
        // consume(5): 1 + 6 + 5 > 10, three left, nothing written.
        let (d, after) = spend(s, 5, T0 + 15 * S);
        assert_eq!((d.allowed, d.remaining), (false, 3));
        assert_eq!(after, s);
        // 13 s later: the next window, 1 × 8 / 12 = 0 counted, all 10 fit.
        let (d, s) = spend(s, 10, T0 + 28 * S);
        assert_eq!((d.allowed, d.remaining), (true, 0));
        assert_eq!(s, Some(w(T0 + 36 * S, 10, 1)));
    }

    #[test]
    fn symfony_wait_interval_is_the_window_end_which_the_reset_gives() {
        let (_, s) = spend(None, 8, T0);
        let (d, _) = spend(s, 4, T0);
        assert!(!d.allowed);
        // Symfony's retryAfter, its window's end (12 s), is the reset less a window.
        assert_eq!(d.reset_after_ms, 24_000);
        // The request itself fits once 8 × (1 − x) < 7, x > 1/8 of the next window:
        // 12 s + 1.5 s + 1 µs.
        assert_eq!(d.retry_after_ms, 13_501);
    }

    #[test]
    fn windows_roll_as_symfony_s() {
        let s = Some(w(T0, 5, 3));
        let ws = 12 * S;
        // Up to its end included, the stored window; then the next, then a fresh one.
        assert_eq!(roll(s, ws, T0), w(T0, 5, 3));
        assert_eq!(roll(s, ws, T0 + 1), w(T0 + ws, 0, 5));
        assert_eq!(roll(s, ws, T0 + ws - 1), w(T0 + ws, 0, 5));
        assert_eq!(roll(s, ws, T0 + ws), w(T0 + 2 * ws, 0, 0));
        assert_eq!(roll(None, ws, T0), w(T0 + ws, 0, 0));
        // The previous count fades to nothing over the window, floored.
        let s = w(T0 + ws, 2, 8);
        assert_eq!(estimate(s, ws, T0), 10);
        assert_eq!(estimate(s, ws, T0 + 1), 9);
        assert_eq!(estimate(s, ws, T0 + ws - 1), 2);
        assert_eq!(estimate(s, ws, T0 + ws), 2);
        // An end further than a window ahead counts the previous window once.
        assert_eq!(estimate(s, ws, T0 - 5 * ws), 10);
    }

    #[test]
    fn retry_after_is_the_first_ms_at_which_the_request_fits() {
        let ws = 12 * S;
        let mut denied = 0;
        for (s, cost, offset) in [
            (w(T0 + ws, 8, 0), 4, 0),
            (w(T0 + ws, 3, 9), 2, 1_234_567),
            (w(T0 + ws, 0, 10), 1, 0),
            (w(T0 + ws, 10, 10), 10, ws - 1),
            (w(T0 + ws, 4, 7), 7, 11_999_999),
            (w(T0 + ws, 1, 1_000), 1, 5 * S),
        ] {
            let now = T0 + offset;
            let d = decide(Some(s), &spec(cost), now).decision;
            // Whether the request fits at t if nothing else arrives.
            let fits = |t: u64| estimate(roll(Some(s), ws, t), ws, t) + u128::from(cost) <= 10;
            assert!(!d.allowed && !fits(now), "{s:?} {offset}");
            let retry = d.retry_after_ms as u64 * 1000;
            assert!(fits(now + retry), "{s:?} {offset}: not admitted at retry");
            assert!(!fits(now + retry - 1000), "{s:?} {offset}: admitted before");
            denied += 1;
        }
        assert_eq!(denied, 6);
        // Never, for more than the limit.
        assert_eq!(decide(None, &spec(11), T0).decision.retry_after_ms, -1);
    }

    #[test]
    fn reset_is_until_the_state_no_longer_counts() {
        let ws = 12 * S;
        // Nothing stored, or a window past mattering: 0, spent or peeked at no cost.
        assert_eq!(own_reset(None, ws, T0), 0);
        assert_eq!(own_reset(Some(w(T0 - ws, 5, 5)), ws, T0), 0);
        assert_eq!(decide(None, &spec(11), T0).decision.reset_after_ms, 0);
        // A stored window counts until the end of the window after it.
        assert_eq!(own_reset(Some(w(T0 + 500, 5, 0)), ws, T0), 12_001);
        assert_eq!(own_reset(Some(w(T0 - 500, 5, 0)), ws, T0), 24_000);
        let peek =
            SlideWindow.own_reset_ms(&[Stored::Fields(Some(w(T0, 1, 0).fields()))], &spec(3), T0);
        assert_eq!(peek, 12_000);
    }

    #[test]
    fn refund_lowers_only_the_window_in_force() {
        let a = SlideWindow;
        let stored = [Stored::Fields(Some(w(T0 + 4 * S, 3, 7).fields()))];
        let refund = |cost, now| a.refund(&stored, &spec(cost), now).ok();
        let set = |s: Window, ttl_ms| {
            Some([
                Some(Write::SetFields {
                    key: 0,
                    fields: s.fields(),
                    ttl_ms,
                }),
                None,
                None,
            ])
        };
        assert_eq!(refund(2, T0), set(w(T0 + 4 * S, 1, 7), 16_000));
        assert_eq!(refund(5, T0), set(w(T0 + 4 * S, 0, 7), 16_000));
        // In the next window the 3 are its previous count: nothing to give back.
        assert_eq!(refund(1, T0 + 5 * S), Some(NO_WRITES));
        assert_eq!(
            a.refund(&[Stored::Fields(None)], &spec(1), T0).ok(),
            Some(NO_WRITES)
        );
    }

    #[test]
    fn what_a_call_writes_stays_in_the_layout() {
        let big = Spec {
            limit: MAX_AMOUNT,
            cost: MAX_AMOUNT,
            ..Spec::new(
                MAX_AMOUNT,
                Span::from_ms(crate::limit::MAX_WINDOW_MS).unwrap_or(Span::TEN_SECONDS),
            )
        };
        let v = decide(None, &big, crate::limit::MAX_NOW_US);
        let Ok([Some(Write::SetFields { fields, .. }), None, None]) = v.writes else {
            panic!("admitted, one write");
        };
        assert_eq!(Fields::parse(&fields.format(), &LAYOUT), Some(fields));
        // Extreme stored values decide without overflow.
        let huge = Some(w(MAX_END_US, MAX_AMOUNT, MAX_AMOUNT));
        let d = decide(huge, &spec(1), T0).decision;
        assert_eq!((d.allowed, d.remaining), (false, 0));
        assert!(d.retry_after_ms > 0);
    }
}
