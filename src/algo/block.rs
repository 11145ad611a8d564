//! BLOCK, the penalty box: a spending call that a limiter denies starts a block, and
//! until it ends every call on that limiter is denied from the block key alone.
//!
//! The same for every algorithm, so it lives here once: which calls a block answers,
//! what it replies, and what it writes. The engine reads `<key>:block` before the
//! limiter's own keys and never opens those while the block holds.

use super::state::{Held, MAX_STRIKES};
use super::{ceil_ms, Decision};
use crate::limit::{Block, Growth, Mode};

impl Held {
    /// What every call while blocked replies: denied, nothing left, and back to the
    /// full budget when the block ends (it cleared the limiter's state when it began).
    pub fn decision(self, now: u64) -> Decision {
        let wait = ceil_ms(u128::from(self.end.saturating_sub(now)));
        Decision {
            allowed: false,
            remaining: 0,
            retry_after_ms: i64::try_from(wait).unwrap_or(i64::MAX),
            reset_after_ms: wait,
        }
    }
}

/// The block a denial (or `IMPOSE`, with no strike) starts at `now`.
pub fn start(block: &Block, now: u64, strikes: u64) -> Held {
    Held {
        end: now.saturating_add(block.duration.us()),
        strikes,
    }
}

/// A call in `mode` while `held` holds: its reply, and the block to store when the
/// call writes one (a strike counted, the end moved). PEEK and REFUND never write.
pub fn while_blocked(block: &Block, held: Held, mode: Mode, now: u64) -> (Decision, Option<Held>) {
    if mode != Mode::Spend || !block.counts() {
        return (held.decision(now), None);
    }
    let strikes = held.strikes.saturating_add(1).min(MAX_STRIKES);
    let length = match block.growth {
        Growth::Fixed => 0,
        Growth::Extend => block.duration.us(),
        Growth::Backoff { max } => backoff(block.duration.us(), strikes, max.us()),
    };
    let after = Held {
        // Never shorter than it was: an imposed block may be longer than any strike's.
        end: held.end.max(now.saturating_add(length)),
        strikes,
    };
    (after.decision(now), Some(after))
}

/// `duration × 2^(strikes − 1)`, at most `max`.
fn backoff(duration: u64, strikes: u64, max: u64) -> u64 {
    let doublings = u32::try_from(strikes.saturating_sub(1)).unwrap_or(u32::MAX);
    2u64.checked_pow(doublings)
        .and_then(|f| duration.checked_mul(f))
        .map_or(max, |d| d.min(max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::decision as d;
    use crate::limit::{Window, MAX_END_US};

    const T0: u64 = 1_764_480_000_000_000;
    const S: u64 = 1_000_000;

    fn block(secs: u64, growth: Growth, strikes: bool) -> Block {
        let Ok(duration) = Window::from_ms(secs * 1000) else {
            panic!("bad test duration");
        };
        Block {
            duration,
            growth,
            strikes,
        }
    }

    fn window(secs: u64) -> Window {
        let Ok(w) = Window::from_ms(secs * 1000) else {
            panic!("bad test window");
        };
        w
    }

    #[test]
    fn values_round_trip_and_foreign_ones_are_refused() {
        let h = Held {
            end: T0,
            strikes: 3,
        };
        assert_eq!(Held::parse(&h.format(true)), Some(h));
        assert_eq!(h.format(false), b"1764480000000000:3");
        let one = Held {
            end: T0,
            strikes: 1,
        };
        assert_eq!(one.format(false), b"1764480000000000");
        assert_eq!(one.format(true), b"1764480000000000:1");
        assert_eq!(
            Held::parse(b"1764480000000000"),
            Some(Held {
                end: T0,
                strikes: 1
            })
        );
        for bad in [
            &b""[..],
            b"x",
            b"12:",
            b":3",
            b"-1",
            b"1:2:3",
            b"1.5",
            b"12 :3",
        ] {
            assert_eq!(Held::parse(bad), None, "{bad:?}");
        }
        // The layout's range: an end up to MAX_END_US, strikes up to MAX_STRIKES.
        let top = Held {
            end: MAX_END_US,
            strikes: MAX_STRIKES,
        };
        assert_eq!(Held::parse(&top.format(true)), Some(top));
        for beyond in [
            Held {
                end: MAX_END_US + 1,
                strikes: 1,
            },
            Held {
                end: T0,
                strikes: MAX_STRIKES + 1,
            },
        ] {
            assert_eq!(Held::parse(&beyond.format(true)), None, "{beyond:?}");
        }
        // Counting stops at the layout's top, so the block written reads back.
        let b = block(60, Growth::Fixed, true);
        let (_, after) = while_blocked(&b, top, Mode::Spend, T0);
        assert_eq!(after, Some(top));
    }

    #[test]
    fn a_block_holds_until_its_end_exactly() {
        let h = start(&block(300, Growth::Fixed, false), T0, 1);
        assert_eq!(h.end, T0 + 300 * S);
        assert!(h.holds(T0 + 300 * S - 1));
        assert!(!h.holds(T0 + 300 * S));
        assert_eq!(h.decision(T0), d(false, 0, 300_000, 300_000));
        // Rounded up: a caller that waits the reply never arrives early.
        assert_eq!(h.decision(T0 + 1), d(false, 0, 300_000, 300_000));
        assert_eq!(h.decision(T0 + 300 * S - 1), d(false, 0, 1, 1));
    }

    #[test]
    fn a_plain_block_writes_nothing_while_it_holds() {
        let b = block(60, Growth::Fixed, false);
        let h = start(&b, T0, 1);
        for mode in [Mode::Spend, Mode::Peek, Mode::Refund] {
            let (decision, write) = while_blocked(&b, h, mode, T0 + 10 * S);
            assert_eq!(decision, d(false, 0, 50_000, 50_000), "{mode:?}");
            assert_eq!(write, None, "{mode:?}");
        }
    }

    #[test]
    fn strikes_count_spending_calls_only() {
        let b = block(60, Growth::Fixed, true);
        let h = start(&b, T0, 1);
        let (decision, after) = while_blocked(&b, h, Mode::Spend, T0 + S);
        assert_eq!(decision, d(false, 0, 59_000, 59_000));
        assert_eq!(
            after,
            Some(Held {
                end: h.end,
                strikes: 2
            })
        );
        for mode in [Mode::Peek, Mode::Refund] {
            assert_eq!(while_blocked(&b, h, mode, T0 + S).1, None);
        }
    }

    #[test]
    fn extend_restarts_the_block_but_never_shortens_it() {
        let b = block(60, Growth::Extend, false);
        let h = start(&b, T0, 1);
        let (decision, after) = while_blocked(&b, h, Mode::Spend, T0 + 30 * S);
        assert_eq!(decision, d(false, 0, 60_000, 60_000));
        assert_eq!(
            after,
            Some(Held {
                end: T0 + 90 * S,
                strikes: 2
            })
        );
        // An imposed block of an hour stays an hour.
        let long = Held {
            end: T0 + 3600 * S,
            strikes: 0,
        };
        let (_, after) = while_blocked(&b, long, Mode::Spend, T0);
        assert_eq!(after.map(|h| h.end), Some(T0 + 3600 * S));
    }

    #[test]
    fn backoff_doubles_per_strike_up_to_its_bound() {
        let b = block(10, Growth::Backoff { max: window(60) }, false);
        let mut h = start(&b, T0, 1);
        assert_eq!(h.end, T0 + 10 * S);
        let mut lengths = vec![];
        for _ in 0..5 {
            let (decision, after) = while_blocked(&b, h, Mode::Spend, T0 + S);
            let Some(after) = after else {
                panic!("a backoff strike writes")
            };
            lengths.push((after.end - (T0 + S)) / S);
            assert_eq!(decision.retry_after_ms as u64, (after.end - T0 - S) / 1000);
            h = after;
        }
        // Strikes 2, 3, 4, …: 20 s, 40 s, then the 60 s bound.
        assert_eq!(lengths, [20, 40, 60, 60, 60]);
        assert_eq!(h.strikes, 6);
        // However many strikes, no overflow: the bound.
        assert_eq!(backoff(10 * S, u64::MAX, 60 * S), 60 * S);
        assert_eq!(backoff(10 * S, 64, 60 * S), 60 * S);
        assert_eq!(backoff(10 * S, 1, 60 * S), 10 * S);
    }
}
