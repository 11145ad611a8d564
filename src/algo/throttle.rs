//! RL.THROTTLE: redis-cell's `CL.THROTTLE`, decision for decision, on its layout, so
//! that a team can unload redis-cell, load this module and carry on with the same
//! keys and the same code.
//!
//! redis-cell is a GCRA too, but with its own arithmetic, which is kept exactly: the
//! theoretical arrival time (TAT) in nanoseconds; the emission interval `period /
//! count` computed in floating point and truncated to whole nanoseconds; a tolerance
//! of `max_burst + 1` intervals; `remaining` from whole microseconds, in floating
//! point; waits reported in whole seconds, rounded up only when their millisecond
//! part is not zero (a 0.1 s wait is 1, a 1.0004 s wait is 1); the key expiring after
//! the TTL truncated to whole milliseconds. Where redis-cell fails (a negative
//! quantity, a zero rate, an overflow) or answers nonsense (intervals under 1 µs), the
//! command refuses with an error before anything is written.

use super::state::Stored;
use super::{Algorithm, Decision, Ints, Keys, Verdict, Write, Writes, BASE_INTEGER, NO_WRITES};
use crate::args::{parse_now, parse_u64, set_once};
use crate::error::{Error, Result};
use crate::limit::{Mode, Request, Spec, Window, MAX_AMOUNT, MAX_WINDOW_MS};

const NS_PER_S: i128 = 1_000_000_000;

/// A redis-cell rate: `count` per `period`, `max_burst + 1` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub interval_ns: i128,
    pub tolerance_ns: i128,
}

impl Cell {
    /// As redis-cell computes it: `(period_ns as f64 / count as f64) as i64`.
    pub fn new(max_burst: u64, count: u64, period: Window) -> Result<Cell> {
        let period_ns = i128::from(period.us()) * 1000;
        let interval_ns = (period_ns as f64 / count as f64) as i64;
        // Below 1 µs redis-cell divides by zero whole microseconds: no answer to copy.
        if interval_ns < 1000 {
            return Err(Error::ThrottleRateTooHigh(period.ms() / 1000 * 1_000_000));
        }
        let interval_ns = i128::from(interval_ns);
        let tolerance_ns = interval_ns * (i128::from(max_burst) + 1);
        if i64::try_from(tolerance_ns).is_err() {
            return Err(Error::ThrottleOverflow);
        }
        Ok(Cell {
            interval_ns,
            tolerance_ns,
        })
    }
}

/// What redis-cell decides, before its reply's rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub limited: bool,
    pub remaining: i64,
    /// -1 s when allowed, or when the quantity can never fit.
    pub retry_after_ns: i128,
    pub reset_after_ns: i128,
    /// The TAT to store when allowed.
    pub new_tat_ns: Option<i128>,
}

/// redis-cell's `rate_limit` on a stored TAT (`None`: no key) at `now_ns`.
pub fn decide(tat_ns: Option<u64>, cell: Cell, quantity: u64, now_ns: i128) -> Outcome {
    let increment = cell.interval_ns * i128::from(quantity);
    // A TAT whose millisecond is before now's: redis-cell's key would be gone (it
    // expires within the millisecond its TAT is in, or before), so redis-cell would
    // decide on no key. Only a NOW past the server clock meets one: deciding on it would
    // raise `remaining` without bound.
    let tat_ns = tat_ns.filter(|&t| i128::from(t) / 1_000_000 >= now_ns / 1_000_000);
    // A stored TAT may have passed: the key lives to the end of the millisecond its
    // truncated TTL ends in. redis-cell then reports a negative TTL, which raises
    // `remaining` on a denial; kept, so that the replies stay the same.
    let tat = tat_ns.map_or(now_ns, i128::from);
    let new_tat = tat.max(now_ns) + increment;
    let allow_at = new_tat - cell.tolerance_ns;
    let diff = now_ns - allow_at;
    let (limited, retry_after_ns, ttl, stored) = if diff < 0 {
        let retry = if increment <= cell.tolerance_ns {
            -diff
        } else {
            -NS_PER_S
        };
        (true, retry, tat - now_ns, None)
    } else {
        (false, -NS_PER_S, new_tat - now_ns, Some(new_tat))
    };
    let next = cell.tolerance_ns - ttl;
    // Whole microseconds (truncated), divided in floating point, truncated.
    let remaining = if next > -cell.interval_ns {
        ((next / 1000) as f64 / (cell.interval_ns / 1000) as f64) as i64
    } else {
        0
    };
    Outcome {
        limited,
        remaining,
        retry_after_ns,
        reset_after_ns: ttl,
        new_tat_ns: stored,
    }
}

/// A duration in redis-cell's reply: whole seconds, plus one when the millisecond
/// part is above zero (`whole_seconds() + (subsec_milliseconds() > 0)`).
pub fn seconds(ns: i128) -> i64 {
    let whole = ns / NS_PER_S;
    let millis = ns % NS_PER_S / 1_000_000;
    i64::try_from(whole + i128::from(millis > 0)).unwrap_or(i64::MAX)
}

/// RL.THROTTLE (and `CL.THROTTLE` with the module argument `cl-throttle`).
pub struct Throttle;

fn cell(spec: &Spec) -> Result<Cell> {
    Cell::new(spec.burst.unwrap_or(0), spec.limit, spec.window)
}

impl Algorithm for Throttle {
    fn name(&self) -> &'static str {
        "THROTTLE"
    }

    /// Its reply is redis-cell's five integers, not the four RL.ALL combines.
    fn joins_all(&self) -> bool {
        false
    }

    /// redis-cell's TAT: unix nanoseconds in an i64.
    fn integer_layout(&self) -> (u64, &'static str) {
        (
            i64::MAX as u64,
            "a redis-cell arrival time (unix nanoseconds)",
        )
    }

    fn check(&self, spec: &Spec) -> Result<()> {
        let cell = cell(spec)?;
        if i64::try_from(cell.interval_ns * i128::from(spec.cost)).is_err() {
            return Err(Error::ThrottleOverflow);
        }
        Ok(())
    }

    fn keys(&self, _spec: &Spec, _now: u64) -> Keys {
        BASE_INTEGER
    }

    /// The decision carries redis-cell's rounded seconds as milliseconds (whole
    /// seconds × 1000), which `reply` gives back as seconds.
    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let Ok(cell) = cell(spec) else {
            return Verdict {
                decision: Decision {
                    allowed: false,
                    remaining: 0,
                    retry_after_ms: -1,
                    reset_after_ms: 0,
                },
                writes: Err(Error::ThrottleOverflow),
            };
        };
        let now_ns = i128::from(now) * 1000;
        let tat = stored.first().and_then(Stored::integer);
        let o = decide(tat, cell, spec.cost, now_ns);
        let decision = Decision {
            allowed: !o.limited,
            remaining: u64::try_from(o.remaining).unwrap_or(0),
            retry_after_ms: match (o.limited, seconds(o.retry_after_ns)) {
                (false, _) => 0,
                (true, s) if s < 0 => -1,
                (true, s) => s.saturating_mul(1000),
            },
            reset_after_ms: u64::try_from(seconds(o.reset_after_ns))
                .unwrap_or(0)
                .saturating_mul(1000),
        };
        let writes = match o.new_tat_ns {
            None => Ok(NO_WRITES),
            Some(tat) => match u64::try_from(tat)
                .ok()
                .filter(|&t| i64::try_from(t).is_ok())
            {
                None => Err(Error::ThrottleOverflow),
                // redis-cell's SetExpire gets the TTL in whole milliseconds, truncated.
                Some(value) => Ok([
                    Some(Write::SetExpiring {
                        key: 0,
                        value,
                        ttl_ms: u64::try_from((tat - now_ns) / 1_000_000).unwrap_or(0),
                    }),
                    None,
                    None,
                ]),
            },
        };
        Verdict { decision, writes }
    }

    /// RL.THROTTLE has no REFUND: nothing to give back.
    fn refund(&self, _stored: &[Stored], _spec: &Spec, _now: u64) -> Result<Writes> {
        Ok(NO_WRITES)
    }

    /// `[limited, max_burst + 1, remaining, retry_after, reset_after]`, retry_after
    /// -1 when allowed.
    fn reply(&self, d: &Decision, spec: &Spec) -> Ints {
        let limit = i64::try_from(spec.burst.unwrap_or(0)).map_or(i64::MAX, |b| b + 1);
        let retry = if d.allowed || d.retry_after_ms < 0 {
            -1
        } else {
            d.retry_after_ms / 1000
        };
        Ints::new(&[
            i64::from(!d.allowed),
            limit,
            i64::try_from(d.remaining).unwrap_or(i64::MAX),
            retry,
            i64::try_from(d.reset_after_ms / 1000).unwrap_or(i64::MAX),
        ])
    }

    /// `<max_burst> <count> <period> [<quantity>] [NOW <µs>]`: CL.THROTTLE's
    /// arguments, and a trailing NOW that cannot clash with them.
    fn parse(&self, command: &'static str, args: &[&[u8]]) -> Result<Request> {
        if args.iter().any(|w| w.eq_ignore_ascii_case(b"BLOCK")) {
            return Err(Error::BlockNotTaken(
                "RL.THROTTLE",
                "it keeps redis-cell's arguments; RL.GCRA takes BLOCK",
            ));
        }
        let (positional, now) = match args {
            [rest @ .., word, t] if word.eq_ignore_ascii_case(b"NOW") => {
                let mut now = None;
                set_once(&mut now, "NOW", parse_now(t)?)?;
                (rest, now)
            }
            // A trailing NOW without its value, as every other command says it.
            [.., word] if word.eq_ignore_ascii_case(b"NOW") => {
                return Err(Error::MissingValue("NOW"))
            }
            _ => (args, None),
        };
        let (burst, count, period, quantity) = match positional {
            [b, c, p] => (b, c, p, None),
            [b, c, p, q] => (b, c, p, Some(q)),
            _ if positional.len() > 4 => {
                return Err(Error::UnknownOption(
                    String::from_utf8_lossy(positional.get(4).copied().unwrap_or_default()).into(),
                ))
            }
            _ => return Err(Error::WrongArity(command)),
        };
        let within = |name: &'static str, bytes: &[u8], min: u64, max: u64| {
            parse_u64(bytes)
                .filter(|n| (min..=max).contains(n))
                .ok_or(Error::ThrottleArgument { name, min, max })
        };
        let burst = within("max_burst", burst, 0, MAX_AMOUNT)?;
        let count = within("count", count, 1, MAX_AMOUNT)?;
        let period = within("period", period, 1, MAX_WINDOW_MS / 1000)?;
        let quantity = quantity.map_or(Ok(1), |q| within("quantity", q, 0, MAX_AMOUNT))?;
        let mut spec = Spec::new(count, Window::from_ms(period * 1000)?);
        spec.burst = Some(burst);
        spec.cost = quantity;
        Ok(Request {
            spec,
            now,
            // Quantity 0 is redis-cell's peek: the state, nothing spent.
            mode: if quantity == 0 {
                Mode::Peek
            } else {
                Mode::Spend
            },
            member: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0_NS: i128 = 1_764_480_000_000_000_000;

    fn cell(burst: u64, count: u64, period_s: u64) -> Cell {
        let Ok(c) = Window::from_ms(period_s * 1000).and_then(|w| Cell::new(burst, count, w))
        else {
            panic!("bad test rate");
        };
        c
    }

    /// (limited, remaining, retry_after, reset_after) as CL.THROTTLE replies them.
    fn reply(o: Outcome) -> (bool, i64, i64, i64) {
        (
            o.limited,
            o.remaining,
            seconds(o.retry_after_ns),
            seconds(o.reset_after_ns),
        )
    }

    /// redis-cell's own test table (redis-cell-impl `it_rate_limits`): 5 at once, 1
    /// per second.
    #[test]
    fn redis_cells_own_cases() {
        let c = cell(4, 1, 1);
        let mut tat: Option<u64> = None;
        let ms = |n: i128| T0_NS + n * 1_000_000;
        let mut run = |at: i128, q: u64| {
            let o = decide(tat, c, q, at);
            if let Some(t) = o.new_tat_ns {
                if q > 0 {
                    tat = Some(t as u64);
                }
            }
            reply(o)
        };
        assert_eq!(run(ms(0), 6), (true, 5, -1, 0));
        assert_eq!(run(ms(0), 1), (false, 4, -1, 1));
        assert_eq!(run(ms(0), 1), (false, 3, -1, 2));
        assert_eq!(run(ms(0), 1), (false, 2, -1, 3));
        assert_eq!(run(ms(0), 1), (false, 1, -1, 4));
        assert_eq!(run(ms(0), 1), (false, 0, -1, 5));
        assert_eq!(run(ms(0), 1), (true, 0, 1, 5));
        assert_eq!(run(ms(3000), 1), (false, 2, -1, 3));
        assert_eq!(run(ms(3100), 1), (false, 1, -1, 4));
        assert_eq!(run(ms(4000), 1), (false, 1, -1, 4));
        assert_eq!(run(ms(8000), 1), (false, 4, -1, 1));
        assert_eq!(run(ms(9500), 1), (false, 4, -1, 1));
        assert_eq!(run(ms(9500), 0), (false, 4, -1, 1));
        assert_eq!(run(ms(9500), 2), (false, 2, -1, 3));
        assert_eq!(run(ms(9500), 5), (true, 2, 3, 3));
    }

    /// A TAT long before NOW (an explicit NOW past the server clock) is decided as
    /// redis-cell decides at that instant, on a key that has expired: `remaining`
    /// never beyond what a missing key gives (limit 2 answered 62 before).
    #[test]
    fn a_tat_in_an_earlier_millisecond_is_a_missing_key() {
        let c = cell(1, 1, 1);
        for (gap_ns, q) in [
            (60 * NS_PER_S, 3),
            (60 * NS_PER_S, 1),
            (1_000_000, 3),
            (86_400 * NS_PER_S, 0),
        ] {
            let now = T0_NS + gap_ns;
            let stale = decide(Some(T0_NS as u64), c, q, now);
            assert_eq!(stale, decide(None, c, q, now), "{gap_ns} {q}");
            assert!(stale.remaining <= 2, "{stale:?}");
        }
        // Within the TAT's own millisecond the key is still redis-cell's: its negative
        // TTL is kept, as redis-cell answers it.
        let inside = decide(Some(T0_NS as u64), c, 3, T0_NS + 999_000);
        assert_eq!(inside.reset_after_ns, -999_000);
    }

    #[test]
    fn rounding_is_redis_cells() {
        assert_eq!(seconds(100_000_000), 1);
        assert_eq!(seconds(999_999), 0);
        assert_eq!(seconds(1_000_400_000), 1);
        assert_eq!(seconds(1_001_000_000), 2);
        assert_eq!(seconds(-1_000_000_000), -1);
        assert_eq!(seconds(0), 0);
    }

    #[test]
    fn intervals_truncate_as_floats_do() {
        // 1 s / 3 = 333,333,333.33 ns, truncated.
        assert_eq!(cell(0, 3, 1).interval_ns, 333_333_333);
        assert_eq!(cell(2, 3, 1).tolerance_ns, 999_999_999);
        assert!(Window::from_ms(1000)
            .and_then(|w| Cell::new(0, 1_000_001, w))
            .is_err());
    }

    fn parse(line: &str) -> Result<Request> {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        Throttle.parse("rl.throttle", &words)
    }

    #[test]
    fn parses_cl_throttles_arguments() -> Result<()> {
        let r = parse("15 30 60")?;
        assert_eq!((r.spec.burst, r.spec.limit, r.spec.cost), (Some(15), 30, 1));
        assert_eq!(
            (r.spec.window.ms(), r.mode, r.now),
            (60_000, Mode::Spend, None)
        );
        let r = parse("0 1 1 0 NOW 1764480000000000")?;
        assert_eq!((r.mode, r.now), (Mode::Peek, Some(1_764_480_000_000_000)));
        assert_eq!(parse("5 1 3 7 now 1764480000000000")?.spec.cost, 7);
        for (line, name) in [
            ("5 1 3 -2", "quantity"),
            ("5 1 0", "period"),
            ("5 0 3", "count"),
            ("-1 1 3", "max_burst"),
            ("5 1 3s", "period"),
        ] {
            assert!(
                matches!(parse(line), Err(Error::ThrottleArgument { name: n, .. }) if n == name),
                "{line}"
            );
        }
        assert_eq!(parse("5 1").err(), Some(Error::WrongArity("rl.throttle")));
        for line in ["5 1 3 1 NOW", "5 1 3 now"] {
            assert_eq!(
                parse(line).err(),
                Some(Error::MissingValue("NOW")),
                "{line}"
            );
        }
        assert_eq!(
            parse("5 1 3 1 PEEK").err(),
            Some(Error::UnknownOption("PEEK".into()))
        );
        assert!(matches!(
            parse("5 1 3 NOW 1764480000"),
            Err(Error::NowUnit { .. })
        ));
        Ok(())
    }
}
