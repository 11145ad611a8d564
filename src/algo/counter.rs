//! Counter from the first hit: one counter at the base key whose TTL is the window,
//! set when the counter is created, so the window ends when the key expires. It is
//! the `INCR` + `PEXPIRE`-on-first-hit layout of rate-limit-redis, @fastify/rate-limit,
//! rate-limiter-flexible, @nestjs/throttler and `limits`' fixed window.

use super::state::Stored;
use super::{
    ceil_ms, remaining, retry_ms, Algorithm, Decision, KeyKind, KeyName, KeyUse, Keys, Verdict,
    Write, Writes, NO_WRITES,
};
use crate::error::Result;
use crate::limit::{Spec, MAX_AMOUNT, MAX_ESCALATED_MS, MAX_LONG_WINDOW_MS};

/// The window the stored counter stands for at `now` (µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// No counter: an admitted call creates it, with the window's TTL.
    None,
    /// A counter whose expiry instant is at or before now: its window ended, although
    /// the server (on its own clock) may not have removed it yet. An admitted call
    /// replaces it with a new window.
    Ended,
    /// A counter inside its window, which ends at `end` (µs).
    Live { count: u64, end: u64 },
    /// A counter without a TTL (another writer's plain INCR): counted, and given the
    /// window's TTL by the next call that writes.
    Untimed { count: u64 },
}

/// Reads what the engine loaded for the base key.
pub fn period(stored: &Stored, now: u64) -> Period {
    let Stored::Expiring { value, expires_ms } = *stored else {
        return Period::None;
    };
    match (value, expires_ms) {
        (None, _) => Period::None,
        (Some(count), None) => Period::Untimed { count },
        (Some(count), Some(ms)) => {
            let end = ms.saturating_mul(1000);
            if end <= now {
                Period::Ended
            } else {
                Period::Live { count, end }
            }
        }
    }
}

/// The decision on `w`, and the writes of a spending call. By default only an
/// admitted call adds its cost; with `COUNTALL` every call does (the count stops at
/// the largest limit, where it denies as any larger one would), and with `RENEW`
/// every call that adds restarts the window. `ESCALATE` counts as `COUNTALL` does, and
/// a denied call on an existing counter sets its TTL to `escalated_ms`.
pub fn decide(w: Period, spec: &Spec, now: u64) -> Verdict {
    let window_us = u128::from(spec.window.us());
    let (count, until_end) = match w {
        Period::None | Period::Ended => (0, window_us),
        Period::Live { count, end } => (count, u128::from(end) - u128::from(now)),
        // Its TTL starts with the next write: a full window from now.
        Period::Untimed { count } => (count, window_us),
    };
    let (limit, cost) = (spec.limit, spec.cost);
    let allowed = u128::from(count) + u128::from(cost) <= u128::from(limit);
    let counted = allowed || spec.count_all || spec.escalate;
    // All of `cost` when admitted (count + cost is at most the limit).
    let by = if counted {
        cost.min(MAX_AMOUNT.saturating_sub(count))
    } else {
        0
    };
    let used_after = u128::from(count) + u128::from(by);
    let renews = counted && spec.renew;
    // The plugin's PEXPIRE on a denial, which a creating call does not make (its INCR
    // gives the key the window whatever the count).
    let escalates =
        !allowed && spec.escalate && matches!(w, Period::Live { .. } | Period::Untimed { .. });
    let escalated = escalates.then(|| escalated_ms(spec, used_after));
    let until_end = match escalated {
        Some(ms) => u128::from(ms) * 1000,
        None if renews => window_us,
        None => until_end,
    };
    let decision = Decision {
        allowed,
        remaining: remaining(limit, used_after),
        retry_after_ms: if allowed {
            0
        } else if cost > limit {
            -1
        } else {
            retry_ms(until_end)
        },
        reset_after_ms: if used_after == 0 {
            0
        } else {
            ceil_ms(until_end)
        },
    };
    let ttl_ms = spec.window.ms();
    let incr = (by > 0).then_some(Write::IncrBy { key: 0, by, ttl_ms });
    // The TTL before the INCRBY, which keeps it (and, done by Redis itself with
    // integer values, closes the key the module had open).
    let expire = Some(Write::Expire {
        key: 0,
        ttl_ms: escalated.unwrap_or(ttl_ms),
    });
    let writes: Writes = match (w, counted) {
        // INCRBY, with PEXPIREAT now + window when it creates the key.
        (Period::None, true) => [incr, None, None],
        (Period::Live { .. }, true) if renews || escalates => [expire, incr, None],
        (Period::Live { .. }, true) => [incr, None, None],
        (Period::Ended, true) => [
            Some(Write::SetExpiring {
                key: 0,
                value: by,
                ttl_ms,
            }),
            None,
            None,
        ],
        (Period::Untimed { .. }, true) => [expire, incr, None],
        // A denial spends nothing; but a counter without a TTL would deny forever.
        (Period::Untimed { .. }, false) => [expire, None, None],
        (_, false) => NO_WRITES,
    };
    Verdict {
        decision,
        writes: Ok(writes),
    }
}

/// The TTL a denial sets under ESCALATE, the count after it `used_after` (above the
/// limit): window × 2^(used_after − limit − 1), at most `MAX_ESCALATED_MS`, so the
/// first denial waits a full window again and each next one twice the last.
pub fn escalated_ms(spec: &Spec, used_after: u128) -> u64 {
    let doublings = used_after.saturating_sub(u128::from(spec.limit) + 1);
    let window = u128::from(spec.window.ms());
    // Past 64 doublings any window is beyond the bound.
    let ms = u32::try_from(doublings)
        .ok()
        .filter(|&d| d < 64)
        .map_or(u128::MAX, |d| window << d);
    u64::try_from(ms.min(u128::from(MAX_ESCALATED_MS))).unwrap_or(MAX_ESCALATED_MS)
}

/// RL.COUNTER: the counter at `<key>` itself.
pub struct Counter;

impl Algorithm for Counter {
    fn name(&self) -> &'static str {
        "COUNTER"
    }

    fn takes_counter_options(&self) -> bool {
        true
    }

    /// It keeps no instant but the key's TTL, so its window may last as long as a TTL
    /// the server can hold: stock stores take centuries.
    fn longest_window_ms(&self) -> u64 {
        MAX_LONG_WINDOW_MS
    }

    fn keys(&self, _spec: &Spec, _now: u64) -> Keys {
        [
            Some(KeyUse {
                name: KeyName::Base,
                kind: KeyKind::ExpiringInteger,
                written: true,
            }),
            None,
        ]
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let w = stored.first().map_or(Period::None, |s| period(s, now));
        decide(w, spec, now)
    }

    /// The stored window's reset, whatever the call's options would write.
    fn own_reset_ms(&self, stored: &[Stored], spec: &Spec, now: u64) -> u64 {
        let w = stored.first().map_or(Period::None, |s| period(s, now));
        let as_stored = Spec {
            cost: 0,
            count_all: false,
            renew: false,
            escalate: false,
            ..*spec
        };
        decide(w, &as_stored, now).decision.reset_after_ms
    }

    /// DECRBY of a counter inside its window (its TTL stays), never below 0; an ended
    /// window has nothing left to give back.
    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes> {
        let count = match stored.first().map_or(Period::None, |s| period(s, now)) {
            Period::Live { count, .. } | Period::Untimed { count } => count,
            Period::None | Period::Ended => 0,
        };
        Ok(match count.min(spec.cost) {
            0 => NO_WRITES,
            by => [Some(Write::DecrBy { key: 0, by }), None, None],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Window as W;

    const T0: u64 = 1_764_480_000_123_456; // not aligned to anything: windows start at the first hit
    const W_MS: u64 = 10_000;

    fn spec(limit: u64, cost: u64) -> Spec {
        Spec {
            cost,
            ..Spec::new(limit, W::TEN_SECONDS)
        }
    }

    fn at(value: Option<u64>, expires_ms: Option<u64>) -> [Stored<'static>; 1] {
        [Stored::Expiring { value, expires_ms }]
    }

    fn run(stored: &[Stored], s: &Spec, now: u64) -> (Decision, Writes) {
        let v = Counter.decide(stored, s, now);
        (v.decision, v.writes.unwrap_or(NO_WRITES))
    }

    fn d(allowed: bool, remaining: u64, retry: i64, reset: u64) -> Decision {
        crate::algo::decision(allowed, remaining, retry, reset)
    }

    const INCR: Write = Write::IncrBy {
        key: 0,
        by: 1,
        ttl_ms: W_MS,
    };

    #[test]
    fn the_first_hit_creates_the_counter_with_the_windows_ttl() {
        let (dec, w) = run(&at(None, None), &spec(3, 1), T0);
        assert_eq!(dec, d(true, 2, 0, W_MS));
        assert_eq!(w, [Some(INCR), None, None]);
        // Another key kind (as the fuzzer may hand) reads as no counter.
        let (dec, _) = run(&[Stored::Integer(Some(3))], &spec(3, 1), T0);
        assert!(dec.allowed);
    }

    #[test]
    fn counts_inside_the_window_up_to_the_limit() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 4_000_000;
        let (dec, w) = run(&at(Some(2), Some(end_ms)), &spec(3, 1), now);
        // The window ends at the key's expiry, not a full window from now.
        assert_eq!(dec, d(true, 0, 0, 6_000));
        assert_eq!(w, [Some(INCR), None, None]);
        let (dec, w) = run(&at(Some(3), Some(end_ms)), &spec(3, 1), now);
        assert_eq!(dec, d(false, 0, 6_000, 6_000));
        assert_eq!(w, NO_WRITES, "a denial spends nothing");
    }

    #[test]
    fn the_window_ends_at_the_keys_expiry_instant() {
        let end_ms = T0 / 1000 + W_MS;
        let end = end_ms * 1000;
        // 1 µs before the end: still the old window, a 1 ms wait (rounded up).
        let (dec, _) = run(&at(Some(3), Some(end_ms)), &spec(3, 1), end - 1);
        assert_eq!(dec, d(false, 0, 1, 1));
        let (dec, _) = run(&at(Some(3), Some(end_ms)), &spec(3, 1), end - 1001);
        assert_eq!(dec.retry_after_ms, 2);
        // At the end: a new window, replacing the old counter (SET … PXAT).
        for now in [end, end + 1, end + 7 * W_MS * 1000] {
            let (dec, w) = run(&at(Some(3), Some(end_ms)), &spec(3, 2), now);
            assert_eq!(dec, d(true, 1, 0, W_MS), "{now}");
            let set = Write::SetExpiring {
                key: 0,
                value: 2,
                ttl_ms: W_MS,
            };
            assert_eq!(w, [Some(set), None, None]);
        }
    }

    #[test]
    fn a_denied_caller_that_waits_the_retry_is_admitted() {
        let end_ms = T0 / 1000 + W_MS;
        for now in [T0, T0 + 1, T0 + 999, end_ms * 1000 - 1] {
            let (dec, _) = run(&at(Some(5), Some(end_ms)), &spec(5, 1), now);
            assert!(!dec.allowed);
            let later = now + dec.retry_after_ms as u64 * 1000;
            assert!(
                run(&at(Some(5), Some(end_ms)), &spec(5, 1), later)
                    .0
                    .allowed
            );
            let earlier = later - 1000;
            if earlier > now {
                assert!(
                    !run(&at(Some(5), Some(end_ms)), &spec(5, 1), earlier)
                        .0
                        .allowed
                );
            }
        }
    }

    #[test]
    fn cost() {
        let end_ms = T0 / 1000 + W_MS;
        let (dec, w) = run(&at(Some(5), Some(end_ms)), &spec(8, 4), T0);
        assert_eq!(dec, d(false, 3, 10_000, 10_000));
        assert_eq!(w, NO_WRITES);
        let (dec, w) = run(&at(Some(5), Some(end_ms)), &spec(8, 3), T0);
        assert_eq!(dec, d(true, 0, 0, 10_000));
        assert_eq!(
            w[0],
            Some(Write::IncrBy {
                key: 0,
                by: 3,
                ttl_ms: W_MS
            })
        );
        // A cost above the limit never passes, and a fresh window is not started.
        let (dec, w) = run(&at(None, None), &spec(8, 9), T0);
        assert_eq!(dec, d(false, 8, -1, 0));
        assert_eq!(w, NO_WRITES);
        let (dec, w) = run(&at(Some(1), Some(end_ms)), &spec(8, 9), T0 + 20_000_000);
        assert_eq!(dec, d(false, 8, -1, 0));
        assert_eq!(w, NO_WRITES);
    }

    #[test]
    fn a_counter_without_a_ttl_gets_the_windows_on_the_next_write() {
        let expire = Write::Expire {
            key: 0,
            ttl_ms: W_MS,
        };
        let (dec, w) = run(&at(Some(1), None), &spec(3, 1), T0);
        assert_eq!(dec, d(true, 1, 0, W_MS));
        assert_eq!(w, [Some(expire), Some(INCR), None]);
        // Denied, it still gets its TTL, or it would deny forever.
        let (dec, w) = run(&at(Some(3), None), &spec(3, 1), T0);
        assert_eq!(dec, d(false, 0, W_MS as i64, W_MS));
        assert_eq!(w, [Some(expire), None, None]);
    }

    #[test]
    fn refund_gives_back_inside_the_window_only() {
        let end_ms = T0 / 1000 + W_MS;
        let dec = |v, e, cost, now| Counter.refund(&at(v, e), &spec(8, cost), now).unwrap();
        let back = |by| [Some(Write::DecrBy { key: 0, by }), None, None];
        assert_eq!(dec(Some(5), Some(end_ms), 2, T0), back(2));
        assert_eq!(dec(Some(1), Some(end_ms), 2, T0), back(1));
        assert_eq!(dec(Some(1), None, 2, T0), back(1));
        assert_eq!(dec(Some(0), Some(end_ms), 2, T0), NO_WRITES);
        assert_eq!(dec(None, None, 2, T0), NO_WRITES);
        assert_eq!(dec(Some(5), Some(end_ms), 2, end_ms * 1000), NO_WRITES);
    }

    #[test]
    fn a_peek_reports_the_stored_window() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 2_500_000;
        for cost in [1, 3, 8, 9] {
            let stored = at(Some(3), Some(end_ms));
            assert_eq!(Counter.own_reset_ms(&stored, &spec(8, cost), now), 7_500);
            assert_eq!(
                Counter.own_reset_ms(&at(None, None), &spec(8, cost), now),
                0
            );
            let ended = at(Some(3), Some(end_ms));
            assert_eq!(
                Counter.own_reset_ms(&ended, &spec(8, cost), end_ms * 1000),
                0
            );
        }
    }

    fn counting(limit: u64, cost: u64, count_all: bool, renew: bool) -> Spec {
        Spec {
            count_all,
            renew,
            ..spec(limit, cost)
        }
    }

    fn incr(by: u64) -> Option<Write> {
        Some(Write::IncrBy {
            key: 0,
            by,
            ttl_ms: W_MS,
        })
    }

    const EXPIRE: Option<Write> = Some(Write::Expire {
        key: 0,
        ttl_ms: W_MS,
    });

    #[test]
    fn countall_counts_denied_calls_past_the_limit() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 4_000_000;
        let all = counting(3, 1, true, false);
        // Admitted as without it.
        let (dec, w) = run(&at(Some(2), Some(end_ms)), &all, now);
        assert_eq!(dec, d(true, 0, 0, 6_000));
        assert_eq!(w, [incr(1), None, None]);
        // Denied, and counted: the key's expiry stays, the window ends where it did.
        let (dec, w) = run(&at(Some(3), Some(end_ms)), &all, now);
        assert_eq!(dec, d(false, 0, 6_000, 6_000));
        assert_eq!(w, [incr(1), None, None]);
        let (dec, w) = run(
            &at(Some(7), Some(end_ms)),
            &counting(3, 2, true, false),
            now,
        );
        assert_eq!(dec, d(false, 0, 6_000, 6_000), "remaining clamped at 0");
        assert_eq!(w, [incr(2), None, None]);
        // Allowed iff the count before plus the cost fits: 5 + 4 > 8, 4 counted anyway.
        let (dec, w) = run(
            &at(Some(5), Some(end_ms)),
            &counting(8, 4, true, false),
            now,
        );
        assert_eq!(dec, d(false, 0, 6_000, 6_000));
        assert_eq!(w, [incr(4), None, None]);
        // Once the window ends, the count starts again from the call's cost.
        let (dec, w) = run(&at(Some(9), Some(end_ms)), &all, end_ms * 1000);
        assert_eq!(dec, d(true, 2, 0, W_MS));
        let set = Write::SetExpiring {
            key: 0,
            value: 1,
            ttl_ms: W_MS,
        };
        assert_eq!(w, [Some(set), None, None]);
    }

    #[test]
    fn countall_with_a_cost_above_the_limit_counts_it_and_never_admits() {
        let all = counting(8, 9, true, false);
        // A denied call that creates the key gives it the window's TTL.
        let (dec, w) = run(&at(None, None), &all, T0);
        assert_eq!(dec, d(false, 0, -1, W_MS));
        assert_eq!(w, [incr(9), None, None]);
        let end_ms = T0 / 1000 + W_MS;
        let (dec, w) = run(&at(Some(1), Some(end_ms)), &all, end_ms * 1000 + 5);
        assert_eq!(dec, d(false, 0, -1, W_MS));
        let set = Write::SetExpiring {
            key: 0,
            value: 9,
            ttl_ms: W_MS,
        };
        assert_eq!(w, [Some(set), None, None]);
    }

    #[test]
    fn countall_on_a_counter_without_a_ttl_gives_it_one_and_counts() {
        let (dec, w) = run(&at(Some(3), None), &counting(3, 2, true, false), T0);
        assert_eq!(dec, d(false, 0, W_MS as i64, W_MS));
        assert_eq!(w, [EXPIRE, incr(2), None]);
    }

    #[test]
    fn countall_stops_counting_at_the_largest_limit() {
        let end_ms = T0 / 1000 + W_MS;
        let near = MAX_AMOUNT - 2;
        let (dec, w) = run(
            &at(Some(near), Some(end_ms)),
            &counting(8, 5, true, false),
            T0,
        );
        assert_eq!(dec, d(false, 0, W_MS as i64, W_MS));
        assert_eq!(w, [incr(2), None, None]);
        let (dec, w) = run(
            &at(Some(MAX_AMOUNT), Some(end_ms)),
            &counting(8, 5, true, false),
            T0,
        );
        assert_eq!(dec, d(false, 0, W_MS as i64, W_MS));
        assert_eq!(w, NO_WRITES);
        // Renewed all the same.
        let (_, w) = run(
            &at(Some(MAX_AMOUNT), Some(end_ms)),
            &counting(8, 5, true, true),
            T0 + 1_000_000,
        );
        assert_eq!(w, [EXPIRE, None, None]);
    }

    #[test]
    fn renew_moves_the_end_on_every_counted_call() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 4_000_000;
        let renew = counting(3, 1, false, true);
        // Admitted: the TTL first, then the INCRBY that keeps it; a full window again.
        let (dec, w) = run(&at(Some(1), Some(end_ms)), &renew, now);
        assert_eq!(dec, d(true, 1, 0, W_MS));
        assert_eq!(w, [EXPIRE, incr(1), None]);
        // Denied without COUNTALL: nothing counted, nothing renewed.
        let (dec, w) = run(&at(Some(3), Some(end_ms)), &renew, now);
        assert_eq!(dec, d(false, 0, 6_000, 6_000));
        assert_eq!(w, NO_WRITES);
        // Denied with COUNTALL: counted, so renewed, and the wait is a full window.
        let both = counting(3, 1, true, true);
        let (dec, w) = run(&at(Some(3), Some(end_ms)), &both, now);
        assert_eq!(dec, d(false, 0, W_MS as i64, W_MS));
        assert_eq!(w, [EXPIRE, incr(1), None]);
        // A cost above the limit still never passes.
        let (dec, _) = run(&at(Some(3), Some(end_ms)), &counting(3, 4, true, true), now);
        assert_eq!(dec, d(false, 0, -1, W_MS));
        // No counter, or an ended window: the write that creates it has the full TTL.
        let (dec, w) = run(&at(None, None), &both, now);
        assert_eq!(dec, d(true, 2, 0, W_MS));
        assert_eq!(w, [incr(1), None, None]);
        let (_, w) = run(&at(Some(3), Some(end_ms)), &renew, end_ms * 1000);
        assert!(matches!(w[0], Some(Write::SetExpiring { value: 1, .. })));
        assert_eq!(w[1], None);
        // Without a TTL: as without RENEW (its TTL is set by the write anyway).
        let (dec, w) = run(&at(Some(1), None), &renew, now);
        assert_eq!(dec, d(true, 1, 0, W_MS));
        assert_eq!(w, [EXPIRE, incr(1), None]);
    }

    #[test]
    fn a_peek_reports_the_stored_window_whatever_the_options() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 2_500_000;
        for (count_all, renew) in [(true, false), (false, true), (true, true)] {
            for cost in [1, 3, 9] {
                let s = counting(8, cost, count_all, renew);
                assert_eq!(
                    Counter.own_reset_ms(&at(Some(9), Some(end_ms)), &s, now),
                    7_500
                );
                assert_eq!(Counter.own_reset_ms(&at(None, None), &s, now), 0);
                assert_eq!(Counter.own_reset_ms(&at(Some(3), None), &s, now), W_MS);
            }
        }
    }

    #[test]
    fn extreme_values_are_safe() {
        let (dec, _) = run(&at(Some(u64::MAX), Some(u64::MAX)), &spec(8, 1), T0);
        assert!(!dec.allowed);
        assert_eq!(dec.remaining, 0);
        assert!(dec.retry_after_ms > 0);
        let (dec, _) = run(&at(Some(0), Some(0)), &spec(8, 1), 0);
        assert!(dec.allowed);
        let huge = Spec {
            cost: 1,
            ..Spec::new(
                crate::limit::MAX_AMOUNT,
                W::from_ms(crate::limit::MAX_WINDOW_MS).unwrap(),
            )
        };
        let (dec, _) = run(&at(None, None), &huge, crate::limit::MAX_NOW_US);
        assert_eq!(dec.reset_after_ms, crate::limit::MAX_WINDOW_MS);
    }

    fn escalating(limit: u64, window: W) -> Spec {
        Spec {
            escalate: true,
            ..Spec::new(limit, window)
        }
    }

    fn expire(ttl_ms: u64) -> Option<Write> {
        Some(Write::Expire { key: 0, ttl_ms })
    }

    #[test]
    fn escalate_doubles_the_ttl_on_each_denial_past_the_limit() {
        let end_ms = T0 / 1000 + W_MS;
        let now = T0 + 4_000_000;
        let s = escalating(2, W::TEN_SECONDS);
        // Admitted as without it: the window ends at the key's expiry.
        let (dec, w) = run(&at(Some(1), Some(end_ms)), &s, now);
        assert_eq!(dec, d(true, 0, 0, 6_000));
        assert_eq!(w, [incr(1), None, None]);
        // The k-th denial (count max + k after it) waits window × 2^(k−1) from now.
        for (count, ttl) in [(2, W_MS), (3, 2 * W_MS), (4, 4 * W_MS), (12, 1024 * W_MS)] {
            let (dec, w) = run(&at(Some(count), Some(end_ms)), &s, now);
            assert_eq!(dec, d(false, 0, ttl as i64, ttl), "{count}");
            assert_eq!(w, [expire(ttl), incr(1), None], "{count}");
        }
        // A counter without a TTL escalates the same (the plugin's INCR did not create it).
        let (dec, w) = run(&at(Some(3), None), &s, now);
        assert_eq!(dec, d(false, 0, 2 * W_MS as i64, 2 * W_MS));
        assert_eq!(w, [expire(2 * W_MS), incr(1), None]);
        // A call that creates the counter gives it the window, even denied (cost above
        // the limit), as the plugin's first INCR does.
        let (dec, w) = run(&at(None, None), &Spec { cost: 3, ..s }, now);
        assert_eq!(dec, d(false, 0, -1, W_MS));
        assert_eq!(w, [incr(3), None, None]);
        let (_, w) = run(&at(Some(9), Some(end_ms)), &s, end_ms * 1000);
        assert!(matches!(
            w[0],
            Some(Write::SetExpiring {
                value: 1,
                ttl_ms: W_MS,
                ..
            })
        ));
    }

    #[test]
    fn escalate_stops_at_2_to_the_53_ms() {
        let end_ms = T0 / 1000 + W_MS;
        let s = escalating(2, W::TEN_SECONDS);
        for count in [45, 63, 64, 200, MAX_AMOUNT - 1, MAX_AMOUNT] {
            let (dec, w) = run(&at(Some(count), Some(end_ms)), &s, T0);
            assert_eq!(dec.retry_after_ms, MAX_ESCALATED_MS as i64, "{count}");
            assert_eq!(w[0], expire(MAX_ESCALATED_MS), "{count}");
        }
        // 10 s × 2^39 is below the bound, 2^40 above it.
        let (dec, _) = run(&at(Some(41), Some(end_ms)), &s, T0);
        assert_eq!(dec.retry_after_ms, (W_MS << 39) as i64);
        // @fastify/rate-limit's 285,421 years: just above 2^53 ms, so even the first
        // denial is bounded.
        let years = W::from_ms_upto(9_007_201_749_600_000, MAX_LONG_WINDOW_MS).unwrap();
        let s = escalating(2, years);
        let (dec, w) = run(&at(None, None), &s, T0);
        assert_eq!(dec, d(true, 1, 0, 9_007_201_749_600_000));
        assert_eq!(
            w[0],
            Some(Write::IncrBy {
                key: 0,
                by: 1,
                ttl_ms: 9_007_201_749_600_000
            })
        );
        let end = T0 / 1000 + 9_007_201_749_600_000;
        let (dec, w) = run(&at(Some(2), Some(end)), &s, T0 + 5);
        assert_eq!(dec, d(false, 0, MAX_ESCALATED_MS as i64, MAX_ESCALATED_MS));
        assert_eq!(w[0], expire(MAX_ESCALATED_MS));
    }

    #[test]
    fn a_peek_under_escalate_reports_the_stored_ttl() {
        let end_ms = T0 / 1000 + W_MS;
        let s = escalating(2, W::TEN_SECONDS);
        assert_eq!(
            Counter.own_reset_ms(&at(Some(5), Some(end_ms)), &s, T0),
            W_MS
        );
    }

    #[test]
    fn windows_up_to_292_thousand_years() {
        assert_eq!(Counter.longest_window_ms(), 9_223_372_036_854_775);
        let longest = W::from_ms_upto(MAX_LONG_WINDOW_MS, MAX_LONG_WINDOW_MS).unwrap();
        let s = Spec::new(3, longest);
        let now = crate::limit::MAX_NOW_US;
        let (dec, w) = run(&at(None, None), &s, now);
        assert_eq!(dec, d(true, 2, 0, MAX_LONG_WINDOW_MS));
        assert!(matches!(
            w[0],
            Some(Write::IncrBy {
                ttl_ms: MAX_LONG_WINDOW_MS,
                ..
            })
        ));
        // Its end read back (the server's ms): still a live window, µs in a u64.
        let end_ms = now / 1000 + MAX_LONG_WINDOW_MS;
        let (dec, _) = run(&at(Some(3), Some(end_ms)), &s, now);
        assert!(!dec.allowed);
        assert_eq!(dec.retry_after_ms, MAX_LONG_WINDOW_MS as i64);
    }
}
