//! Token bucket refilled in steps, as Symfony's `token_bucket`: `REFILL` tokens at
//! each whole interval since the bucket's timer, never beyond the capacity. The timer
//! keeps its phase (it moves by whole intervals), a new bucket is full with its timer
//! at now, and a refused call is not saved. Where RL.GCRA lets a token trickle back
//! every interval / limit, this one hands them back a step at a time.
//!
//! One string at the key: `<tokens>:<timer-µs>`, the tokens the bucket holds at the
//! timer (its last refill step), expiring when the bucket is full again.

use super::state::{Fields, Stored};
use super::{
    ceil_ms, div, div_ceil, retry_ms, Algorithm, Decision, Keys, Verdict, Write, Writes,
    BASE_FIELDS, NO_WRITES,
};
use crate::error::Result;
use crate::limit::{Spec, MAX_AMOUNT, MAX_END_US};

/// The bucket's size, refill and step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub capacity: u64,
    pub refill: u64,
    pub interval_us: u64,
}

impl Rate {
    pub fn of(spec: &Spec) -> Rate {
        Rate {
            capacity: spec.limit,
            refill: spec.refill.unwrap_or(1),
            interval_us: spec.window.us(),
        }
    }
}

/// The bucket as seen at `now`: its tokens (negative while tokens taken at a later
/// instant are still to come) and its timer, the last refill step at or before now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub tokens: i128,
    pub timer: u128,
}

/// What the stored `<tokens>:<timer>` holds at `now`. A timer after now was written by
/// a spend decided at a later NOW (a reservation): the steps between now and that timer
/// have not come yet, so their tokens are not there yet either (Symfony, which reserves
/// at the present, keeps them as negative tokens instead). A full bucket is a new one,
/// its timer at now, whether its key expired yet or not: a full bucket has no key, and
/// the decisions must not depend on when the server's clock removed it.
pub fn level(stored: Option<(u64, u64)>, rate: Rate, now: u64) -> Level {
    let l = stepped(stored, rate, now);
    if l.tokens >= i128::from(rate.capacity) {
        return Level {
            tokens: i128::from(rate.capacity),
            timer: u128::from(now),
        };
    }
    l
}

fn stepped(stored: Option<(u64, u64)>, rate: Rate, now: u64) -> Level {
    let (cap, refill, step) = (
        i128::from(rate.capacity),
        u128::from(rate.refill),
        u128::from(rate.interval_us),
    );
    let now_ = u128::from(now);
    let Some((tokens, timer)) = stored else {
        return Level {
            tokens: cap,
            timer: now_,
        };
    };
    let (tokens, timer) = (u128::from(tokens), u128::from(timer));
    if timer <= now_ {
        let steps = div(now_ - timer, step);
        Level {
            tokens: signed(tokens + steps * refill).min(cap),
            timer: timer + steps * step,
        }
    } else {
        let steps = div_ceil(timer - now_, step);
        Level {
            tokens: (signed(tokens) - signed(steps * refill)).min(cap),
            // Only an interval longer than the time since 1970 reaches below 0.
            timer: timer.saturating_sub(steps * step),
        }
    }
}

/// Every product here is below 2^100 (amounts 10^15, steps 2^64 / 1000).
fn signed(n: u128) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// The instant (µs) `missing` tokens will have come in, from `level`'s timer.
fn when(level: Level, rate: Rate, missing: i128) -> u128 {
    let missing = u128::try_from(missing).unwrap_or(0);
    level.timer + div_ceil(missing, u128::from(rate.refill)) * u128::from(rate.interval_us)
}

/// Until the bucket at `level` is full again, in ms: its `reset_after_ms` and its key's
/// TTL. A huge bucket on a slow refill may take longer than any NOW can reach: then
/// until 2265 (the latest instant a layout stores), which no call outlives.
fn until_full(level: Level, rate: Rate, now: u64) -> u64 {
    let cap = i128::from(rate.capacity);
    if level.tokens >= cap {
        return 0;
    }
    let full = when(level, rate, cap - level.tokens).min(u128::from(MAX_END_US));
    ceil_ms(full.saturating_sub(u128::from(now)))
}

/// The decision on `level` for `cost` tokens, and the level after it.
pub fn decide(level: Level, rate: Rate, cost: u64, now: u64) -> (Decision, Level) {
    let cost_ = i128::from(cost);
    let allowed = cost_ <= level.tokens;
    let after = Level {
        tokens: level.tokens - if allowed { cost_ } else { 0 },
        ..level
    };
    // The tokens come at a step after 2265 (a huge cost on a slow refill): never.
    let fits_at = Some(when(level, rate, cost_ - level.tokens))
        .filter(|&at| cost <= rate.capacity && at <= u128::from(MAX_END_US));
    let decision = Decision {
        allowed,
        remaining: u64::try_from(after.tokens.max(0)).unwrap_or(0),
        retry_after_ms: match fits_at {
            _ if allowed => 0,
            Some(at) => retry_ms(at.saturating_sub(u128::from(now))),
            None => -1,
        },
        reset_after_ms: until_full(after, rate, now),
    };
    (decision, after)
}

/// The writes that store `after`: none left to come back is a full bucket, which is no
/// key; else `<tokens>:<timer>` until it is full. Negative tokens are stored as the
/// level at the first step that makes them non-negative, a timer after now, which
/// `level` reads back as the same negative level.
fn store(after: Level, rate: Rate, now: u64) -> Writes {
    if after.tokens >= i128::from(rate.capacity) {
        return [Some(Write::Delete { key: 0 }), None, None];
    }
    let ttl_ms = until_full(after, rate, now);
    let lift = if after.tokens < 0 {
        div_ceil(after.tokens.unsigned_abs(), u128::from(rate.refill))
    } else {
        0
    };
    let tokens = after.tokens + signed(lift * u128::from(rate.refill));
    let timer = after.timer + lift * u128::from(rate.interval_us);
    [
        Some(Write::SetFields {
            key: 0,
            fields: Fields::new(&[
                u64::try_from(tokens).unwrap_or(0),
                // A step past 2265 (a NOW in the 1970s on a decade's interval) is
                // stored at 2265, where the layout ends; no NOW reaches either.
                u64::try_from(timer).unwrap_or(MAX_END_US).min(MAX_END_US),
            ]),
            ttl_ms,
        }),
        None,
        None,
    ]
}

/// `<tokens>:<timer>`, as the layout's read let it through.
fn stored_pair(stored: &[Stored]) -> Option<(u64, u64)> {
    match stored.first() {
        Some(Stored::Fields(Some(f))) => match *f.as_slice() {
            [tokens, timer] => Some((tokens, timer)),
            _ => None,
        },
        _ => None,
    }
}

/// The largest tokens and timer a bucket holds.
const LAYOUT: [u64; 2] = [MAX_AMOUNT, MAX_END_US];

/// RL.TOKENBUCKET: `<key>` holds `<tokens>:<timer-µs>`.
pub struct TokenBucket;

impl Algorithm for TokenBucket {
    fn name(&self) -> &'static str {
        "TOKENBUCKET"
    }

    fn accepts_refill(&self) -> bool {
        true
    }

    fn fields_layout(&self) -> (&'static [u64], &'static str) {
        (
            &LAYOUT,
            "a token bucket (<tokens>:<timer in unix microseconds>, tokens up to 1000000000000000)",
        )
    }

    fn keys(&self, _spec: &Spec, _now: u64) -> Keys {
        BASE_FIELDS
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let rate = Rate::of(spec);
        let (decision, after) = decide(level(stored_pair(stored), rate, now), rate, spec.cost, now);
        // A refusal is not saved, as in Symfony: the timer moves only with a spend.
        let writes = if decision.allowed {
            store(after, rate, now)
        } else {
            NO_WRITES
        };
        Verdict {
            decision,
            writes: Ok(writes),
        }
    }

    /// Puts `cost` tokens back, never beyond the capacity; a bucket that is full again
    /// goes.
    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes> {
        let Some(pair) = stored_pair(stored) else {
            return Ok(NO_WRITES);
        };
        let rate = Rate::of(spec);
        let l = level(Some(pair), rate, now);
        let back = Level {
            tokens: (l.tokens + i128::from(spec.cost)).min(i128::from(rate.capacity)),
            ..l
        };
        Ok(store(back, rate, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::decision as d;
    use crate::args::parse_window;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    const T0: u64 = 1_764_480_000_123_456;
    const S: u64 = 1_000_000;

    fn rate(capacity: u64, refill: u64, interval: &str) -> Rate {
        let Ok(w) = parse_window(interval.as_bytes()) else {
            panic!("bad test interval {interval:?}");
        };
        Rate {
            capacity,
            refill,
            interval_us: w.us(),
        }
    }

    /// A bucket driven through its stored layout, as the server keeps it.
    struct Bucket {
        rate: Rate,
        key: Option<(u64, u64)>,
    }

    impl Bucket {
        fn new(rate: Rate) -> Bucket {
            Bucket { rate, key: None }
        }

        fn stored(&self) -> Stored<'static> {
            Stored::Fields(
                self.key
                    .map(|(tokens, timer)| Fields::new(&[tokens, timer])),
            )
        }

        fn spec(&self, cost: u64) -> Spec {
            let Ok(window) = crate::limit::Window::from_ms(self.rate.interval_us / 1000) else {
                panic!("bad interval");
            };
            Spec {
                cost,
                refill: Some(self.rate.refill),
                ..Spec::new(self.rate.capacity, window)
            }
        }

        fn apply(&mut self, writes: Writes) {
            for w in writes.iter().flatten() {
                match *w {
                    Write::SetFields { fields, .. } => {
                        self.key = match *fields.as_slice() {
                            [tokens, timer] => Some((tokens, timer)),
                            _ => panic!("a bucket of {fields:?}"),
                        }
                    }
                    Write::Delete { .. } => self.key = None,
                    other => panic!("unexpected write {other:?}"),
                }
            }
        }

        fn consume(&mut self, cost: u64, now: u64) -> Decision {
            let v = TokenBucket.decide(&[self.stored()], &self.spec(cost), now);
            if let Ok(w) = v.writes {
                self.apply(w);
            }
            v.decision
        }

        fn refund(&mut self, cost: u64, now: u64) {
            let w = TokenBucket.refund(&[self.stored()], &self.spec(cost), now);
            self.apply(w.unwrap_or(NO_WRITES));
        }
    }

    /// Symfony's TokenBucketLimiterTest::testBucketRefilledWithStrictFrequency: 1000
    /// tokens, 100 every 15 s; 300 taken, then one every 4 s.
    #[test]
    fn symfony_strict_frequency() {
        let mut b = Bucket::new(rate(1000, 100, "15"));
        assert_eq!(b.consume(300, T0), d(true, 700, 0, 45_000));
        let mut expected = 699;
        for i in 1..=20u64 {
            let now = T0 + (i - 1) * 4 * S;
            let got = b.consume(1, now);
            assert!(got.allowed, "{i}");
            assert_eq!(got.remaining, expected, "consume {i}");
            expected -= 1;
            if [4, 8, 12].contains(&i) {
                expected += 100;
            } else if [15, 19].contains(&i) {
                expected = 999;
            }
        }
    }

    /// testReserve: 10 tokens, 10 a second; two fives pass, the third waits the whole
    /// second until the next step (smoothly it would be half of it).
    #[test]
    fn symfony_reserve_waits_for_the_step() {
        let mut b = Bucket::new(rate(10, 10, "1"));
        assert!(b.consume(5, T0).allowed);
        assert_eq!(b.consume(5, T0 + 500_000), d(true, 0, 0, 500));
        assert_eq!(b.consume(5, T0 + 500_000), d(false, 0, 500, 500));
        assert_eq!(b.consume(5, T0 + 999_999), d(false, 0, 1, 1));
        assert_eq!(b.consume(5, T0 + S), d(true, 5, 0, 1000));
    }

    /// The timer keeps its phase: steps at T0 + k s, whenever the calls come.
    #[test]
    fn refills_at_the_steps_of_the_first_call() {
        let mut b = Bucket::new(rate(3, 1, "1"));
        for _ in 0..3 {
            assert!(b.consume(1, T0).allowed);
        }
        assert_eq!(b.consume(1, T0 + 1_700_000), d(true, 0, 0, 2300));
        assert_eq!(b.consume(1, T0 + 1_999_999), d(false, 0, 1, 2001));
        assert_eq!(b.key, Some((0, T0 + S)));
        assert_eq!(b.consume(2, T0 + 2 * S), d(false, 1, 1000, 2000));
        assert!(b.consume(2, T0 + 3 * S).allowed);
        // A long pause fills it up to the capacity, not beyond; full, it is a new
        // bucket, whose steps start at now.
        assert_eq!(b.consume(1, T0 + 100 * S + 5), d(true, 2, 0, 1000));
        assert_eq!(b.key, Some((2, T0 + 100 * S + 5)));
    }

    #[test]
    fn cost_beyond_capacity_never_passes() {
        let mut b = Bucket::new(rate(5, 5, "1"));
        assert_eq!(b.consume(6, T0), d(false, 5, -1, 0));
        assert_eq!(b.key, None);
        // A spend of 0 on a full bucket stores nothing.
        assert_eq!(b.consume(0, T0), d(true, 5, 0, 0));
        assert_eq!(b.key, None);
    }

    /// A reservation: the spend at the instant the tokens come, then a call at the
    /// present, which must not see the tokens of steps still to come.
    #[test]
    fn a_spend_at_a_later_now_holds_for_the_present() {
        // Symfony's testReserveMaxWaitingTime: 10 tokens, 1 a minute.
        let mut b = Bucket::new(rate(10, 1, "60"));
        assert!(b.consume(10, T0).allowed);
        let five = b.consume(5, T0);
        assert_eq!(five.retry_after_ms, 300_000);
        assert!(b.consume(5, T0 + 300 * S).allowed);
        assert_eq!(b.key, Some((0, T0 + 300 * S)));
        // At the present five tokens are owed: ten more steps for the next five.
        assert_eq!(b.consume(5, T0), d(false, 0, 600_000, 900_000));
        assert_eq!(b.consume(1, T0 + 299 * S), d(false, 0, 61_000, 601_000));
        // Refill 10 per step into 10: the reserved call takes the 10 the bucket holds
        // then, and until that step the present sees 5 - 10 (Symfony's negative tokens
        // keep the 3 the full bucket could not hold: 3 - 5).
        let mut b = Bucket::new(rate(10, 10, "1"));
        assert!(b.consume(7, T0).allowed);
        assert!(!b.consume(5, T0).allowed);
        assert!(b.consume(5, T0 + S).allowed);
        assert_eq!(b.key, Some((5, T0 + S)));
        assert_eq!(b.consume(1, T0 + 1), d(false, 0, 1000, 2000));
        assert_eq!(b.consume(5, T0 + S), d(true, 0, 0, 1000));
    }

    #[test]
    fn refund_gives_back_up_to_the_capacity() {
        let mut b = Bucket::new(rate(10, 2, "1"));
        assert!(b.consume(7, T0).allowed);
        b.refund(3, T0 + 10);
        assert_eq!(b.key, Some((6, T0)));
        b.refund(100, T0 + 20);
        assert_eq!(b.key, None);
        // A refund of owed tokens (after a later spend) keeps them owed, stored ahead.
        assert!(b.consume(10, T0).allowed);
        assert!(b.consume(4, T0 + 2 * S).allowed);
        assert_eq!(b.key, Some((0, T0 + 2 * S)));
        b.refund(1, T0);
        assert_eq!(b.key, Some((1, T0 + 2 * S)));
        assert_eq!(level(b.key, b.rate, T0).tokens, -3);
        assert_eq!(b.consume(1, T0), d(false, 0, 2000, 7000));
    }

    /// Random calls, stepped clock: the stored layout decides as a bucket replayed in
    /// whole steps from its start would, and retry_after is the first instant (to the
    /// ms) the same call passes.
    #[test]
    fn agrees_with_a_step_by_step_bucket() {
        let mut rng = StdRng::seed_from_u64(11);
        let mut denied = 0;
        for _ in 0..300 {
            let r = rate(
                rng.gen_range(1..30),
                rng.gen_range(1..8),
                &format!("{}ms", rng.gen_range(1..3000)),
            );
            let mut b = Bucket::new(r);
            // The model: tokens and the start of its phase.
            let mut model: Option<(i128, u64)> = None;
            let mut now = T0;
            for _ in 0..200 {
                now += rng.gen_range(0..r.interval_us * 2);
                let cost = rng.gen_range(0..=r.capacity + 1);
                let (tokens, start) = match model {
                    None => (i128::from(r.capacity), now),
                    Some((t, s)) => {
                        let steps = (now - s) / r.interval_us;
                        let t = t + i128::from(steps * r.refill);
                        if t >= i128::from(r.capacity) {
                            (i128::from(r.capacity), now)
                        } else {
                            (t, s + steps * r.interval_us)
                        }
                    }
                };
                let got = b.consume(cost, now);
                let pass = i128::from(cost) <= tokens;
                assert_eq!(got.allowed, pass, "{r:?} {now} {cost}");
                if pass {
                    let left = tokens - i128::from(cost);
                    model = (left < i128::from(r.capacity)).then_some((left, start));
                    assert_eq!(got.remaining as i128, left);
                } else if cost <= r.capacity {
                    denied += 1;
                    let retry = got.retry_after_ms as u64 * 1000;
                    let probe = |at: u64| level(b.key, r, at).tokens >= i128::from(cost);
                    assert!(probe(now + retry), "{r:?}");
                    assert!(retry < 1000 || !probe(now + retry - 1000), "{r:?}");
                }
            }
        }
        assert!(denied > 1000, "{denied}");
    }

    #[test]
    fn extremes_do_not_overflow() {
        let r = rate(MAX_AMOUNT, MAX_AMOUNT, "315360000s");
        for key in [None, Some((MAX_AMOUNT, 0)), Some((MAX_AMOUNT, MAX_END_US))] {
            for now in [crate::limit::MIN_NOW_US, crate::limit::MAX_NOW_US] {
                let (dec, after) = decide(level(key, r, now), r, MAX_AMOUNT, now);
                let _ = store(after, r, now);
                assert!(dec.retry_after_ms >= -1);
            }
        }
    }
}
