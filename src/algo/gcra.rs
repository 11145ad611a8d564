//! GCRA (generic cell rate algorithm): `limit` per `window` on average, at most
//! `burst` at once, in a single integer: the theoretical arrival time (TAT).
//!
//! Each admitted unit pushes the TAT one emission interval (window / limit) further;
//! a request is admitted while the TAT it would leave is at most `burst` intervals
//! ahead of now.
//!
//! The TAT is stored in whole microseconds, but window / limit need not be whole
//! (3 per second is 333,333.3 µs). Rounding every step would drift by up to 1 µs per
//! request; instead the TAT walks a fixed lattice, the points ceil(j × window / limit)
//! counted from the epoch, keeping its offset from it. Steps are then a mix of the
//! rounded-down and rounded-up interval whose sum never strays more than 1 µs from the
//! exact one, however long the run.

use super::state::Stored;
use super::{
    ceil_ms, div, div_ceil, retry_ms, Algorithm, Decision, Keys, Verdict, Write, Writes,
    BASE_INTEGER, NO_WRITES,
};
use crate::error::{Error, Result};
use crate::limit::{Spec, Window, MAX_END_US};

/// The limiter's rate: `limit` units per `window`, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub limit: u64,
    pub window: Window,
    pub burst: u64,
}

impl Rate {
    fn w(self) -> u128 {
        u128::from(self.window.us())
    }

    fn l(self) -> u128 {
        u128::from(self.limit.max(1))
    }

    /// The lattice point ceil(j × window / limit).
    fn lattice(self, j: u128) -> u128 {
        div_ceil(j * self.w(), self.l())
    }

    /// The emission interval when it is a whole number of µs (100 per minute, 1 per
    /// hour: nearly every real rate). Then the lattice is just its multiples, and
    /// every step is this one number: no divisions.
    fn whole_interval(self) -> Option<u128> {
        let (w, l) = (self.window.us(), self.limit.max(1));
        (w % l == 0).then(|| u128::from(w / l))
    }

    /// The time `units` emission intervals after `from`, along the lattice.
    pub fn advance(self, from: u64, units: u64) -> u128 {
        match self.whole_interval() {
            Some(interval) => u128::from(from) + u128::from(units) * interval,
            None => self.advance_on_lattice(from, units),
        }
    }

    fn advance_on_lattice(self, from: u64, units: u64) -> u128 {
        let j = div(u128::from(from) * self.l(), self.w());
        u128::from(from) + self.lattice(j + u128::from(units)) - self.lattice(j)
    }

    /// The time `units` emission intervals before `to`: the inverse of `advance`, so
    /// that a refund puts the TAT back exactly where the spending call found it.
    pub fn retreat(self, to: u64, units: u64) -> u128 {
        let to = u128::from(to);
        let units = u128::from(units);
        let j = div(to * self.l(), self.w());
        // `advance` from a point in lattice cell k lands in cell k + units or the one
        // after: try both cells, the later start first (it gives back less).
        for k in [j.checked_sub(units), j.checked_sub(units + 1)]
            .into_iter()
            .flatten()
        {
            let step = self.lattice(k + units) - self.lattice(k);
            if let Some(from) = to.checked_sub(step) {
                if div(from * self.l(), self.w()) == k {
                    return from;
                }
            }
        }
        // Not a TAT one advance of `units` made: step back without the lattice.
        to.saturating_sub(div(units * self.w(), self.l()))
    }

    /// How far ahead of now the TAT may be: `burst` intervals, rounded up to the µs.
    pub fn tolerance(self) -> u128 {
        div_ceil(u128::from(self.burst) * self.w(), self.l())
    }
}

/// Decides on a key whose stored TAT is `tat` (`None`: no key). Returns the decision
/// and, when admitted, the new TAT to store.
pub fn decide(tat: Option<u64>, rate: Rate, cost: u64, now: u64) -> (Decision, Option<u64>) {
    let tat = tat.unwrap_or(0).max(now);
    let tolerance = rate.tolerance();
    let new_tat = rate.advance(tat, cost);
    let allowed = cost <= rate.burst && new_tat - u128::from(now) <= tolerance;
    let tat_after = if allowed { new_tat } else { u128::from(tat) };
    let ahead = tat_after - u128::from(now);
    let decision = Decision {
        allowed,
        remaining: remaining(rate, tolerance, tat_after, now),
        retry_after_ms: if allowed {
            0
        } else if cost > rate.burst {
            -1
        } else {
            // Before the TAT the request's own TAT is fixed, so it fits as soon as
            // that is within tolerance; that moment is never later than the TAT.
            retry_ms(new_tat - tolerance - u128::from(now))
        },
        reset_after_ms: ceil_ms(ahead),
    };
    let stored = if allowed {
        u64::try_from(new_tat).ok()
    } else {
        None
    };
    (decision, stored)
}

/// The most units one request could still spend right now.
fn remaining(rate: Rate, tolerance: u128, tat: u128, now: u64) -> u64 {
    let ahead = tat.saturating_sub(u128::from(now));
    if ahead > tolerance {
        return 0;
    }
    let Ok(base) = u64::try_from(tat.max(u128::from(now))) else {
        return 0;
    };
    let room = tolerance - ahead;
    match rate.whole_interval() {
        // Each unit is exactly one interval: as many as fit in the room.
        Some(interval) => {
            u64::try_from(div(room, interval)).map_or(rate.burst, |k| k.min(rate.burst))
        }
        None => remaining_on_lattice(rate, base, now, room),
    }
}

fn remaining_on_lattice(rate: Rate, base: u64, now: u64, room: u128) -> u64 {
    let tolerance = rate.tolerance();
    // advance(k) is within 1 µs of k intervals, so the answer lies within 1 µs's
    // worth of units of room / interval; bisection over that narrow range (the
    // whole burst, if the rate is extreme) takes a step or two.
    let fits = |k: u64| rate.advance_on_lattice(base, k) - u128::from(now) <= tolerance;
    let units = |us: u128| u64::try_from(div(us * rate.l(), rate.w())).unwrap_or(u64::MAX);
    let mut low = units(room.saturating_sub(1)).min(rate.burst);
    let mut high = units(room + 1).min(rate.burst);
    if !fits(low) {
        low = 0;
    }
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

/// The TAT is worth keeping until it is reached: then the limiter is at full budget.
pub fn ttl_us(tat: u64, now: u64) -> u64 {
    tat.saturating_sub(now)
}

/// RL.GCRA: one string at the key holding the TAT.
pub struct Gcra;

fn rate(spec: &Spec) -> Rate {
    Rate {
        limit: spec.limit,
        window: spec.window,
        burst: spec.burst.unwrap_or(spec.limit),
    }
}

fn tat(stored: &[Stored]) -> Option<u64> {
    stored.first().and_then(Stored::integer)
}

/// Stores `value` as the TAT, expiring when it is reached.
fn store(value: u128, now: u64) -> Result<Writes> {
    // Never beyond what a read accepts as a TAT.
    let value = u64::try_from(value)
        .ok()
        .filter(|&v| v <= MAX_END_US)
        .ok_or(Error::TatOverflow)?;
    Ok([
        Some(Write::SetExpiring {
            key: 0,
            value,
            ttl_ms: ceil_ms(u128::from(ttl_us(value, now))),
        }),
        None,
        None,
    ])
}

impl Algorithm for Gcra {
    fn name(&self) -> &'static str {
        "GCRA"
    }

    fn accepts_burst(&self) -> bool {
        true
    }

    /// A TAT is an instant in µs up to `MAX_END_US` (2265); CL.THROTTLE's nanoseconds
    /// (and anything else past it) are refused, not read as µs.
    fn integer_layout(&self) -> (u64, &'static str) {
        (
            MAX_END_US,
            "a GCRA arrival time (unix microseconds up to 2265; CL.THROTTLE's are nanoseconds)",
        )
    }

    /// The TAT is stored in whole microseconds, so an emission interval below 1 µs
    /// could not be represented: bursts and costs would be spent a microsecond at once.
    fn check(&self, spec: &Spec) -> Result<()> {
        if spec.limit > spec.window.us() {
            return Err(Error::RateTooHigh(spec.window.us()));
        }
        Ok(())
    }

    fn keys(&self, _spec: &Spec, _now: u64) -> Keys {
        BASE_INTEGER
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let (decision, new_tat) = decide(tat(stored), rate(spec), spec.cost, now);
        let writes = if decision.allowed {
            new_tat
                .ok_or(Error::TatOverflow)
                .and_then(|t| store(u128::from(t), now))
        } else {
            Ok(NO_WRITES)
        };
        Verdict { decision, writes }
    }

    /// Moves the TAT back by `cost` intervals, not before now; a TAT at or before
    /// now is a full budget, so the key goes.
    fn refund(&self, stored: &[Stored], spec: &Spec, now: u64) -> Result<Writes> {
        let Some(tat) = tat(stored).filter(|&t| t > now) else {
            return Ok(NO_WRITES);
        };
        let back = rate(spec).retreat(tat, spec.cost);
        if back <= u128::from(now) {
            return Ok([Some(Write::Delete { key: 0 }), None, None]);
        }
        store(back, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_window;
    use rand::{rngs::StdRng, Rng, SeedableRng};

    const T0: u64 = 1_764_480_000_000_000;

    fn rate(limit: u64, window: &str, burst: u64) -> Rate {
        let Ok(window) = parse_window(window.as_bytes()) else {
            panic!("bad test window {window:?}");
        };
        Rate {
            limit,
            window,
            burst,
        }
    }

    /// Runs arrivals `(time, cost)` and returns the admitted ones.
    fn run(rate: Rate, arrivals: &[(u64, u64)]) -> Vec<(u64, u64)> {
        let mut tat = None;
        let mut admitted = vec![];
        for &(t, cost) in arrivals {
            let (d, new_tat) = decide(tat, rate, cost, t);
            if d.allowed {
                tat = new_tat;
                admitted.push((t, cost));
            }
        }
        admitted
    }

    #[test]
    fn burst_at_once_then_one_per_interval() {
        let r = rate(10, "1", 3);
        let mut tat = None;
        for i in 0..3 {
            let (d, t) = decide(tat, r, 1, T0);
            assert!(d.allowed, "{i}");
            assert_eq!(d.remaining, 2 - i);
            tat = t;
        }
        let (d, _) = decide(tat, r, 1, T0);
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 100);
        assert_eq!(d.reset_after_ms, 300);
        let (d, _) = decide(tat, r, 1, T0 + 99_999);
        assert!(!d.allowed);
        assert!(decide(tat, r, 1, T0 + 100_000).0.allowed);
    }

    #[test]
    fn retry_after_is_exact_to_the_millisecond() {
        let mut rng = StdRng::seed_from_u64(7);
        let (mut admitted, mut denied) = (0, 0);
        for _ in 0..2_000 {
            let r = rate(
                rng.gen_range(1..50),
                &format!("{}ms", rng.gen_range(1..5_000)),
                rng.gen_range(1..5),
            );
            let cost = rng.gen_range(1..=r.burst);
            let tat = Some(T0 + rng.gen_range(0..3_000_000));
            let now = T0 + rng.gen_range(0..1_000_000);
            let (d, _) = decide(tat, r, cost, now);
            if d.allowed {
                assert_eq!(d.retry_after_ms, 0, "{r:?} {cost} {tat:?} {now}");
                admitted += 1;
                continue;
            }
            denied += 1;
            // A cost within the burst always fits some time later.
            assert!(d.retry_after_ms > 0, "{r:?} {cost} {tat:?} {now}");
            let retry = d.retry_after_ms as u64 * 1000;
            assert!(
                decide(tat, r, cost, now + retry).0.allowed,
                "{r:?} {cost} {tat:?} {now}"
            );
            assert!(
                !decide(tat, r, cost, now + retry - 1000).0.allowed,
                "{r:?} {cost} {tat:?} {now}"
            );
        }
        // Both outcomes were exercised, the denials (the point) most.
        eprintln!("admitted {admitted}, denied {denied}");
        assert!(denied >= 1_000 && admitted >= 200, "{admitted} / {denied}");
    }

    #[test]
    fn cost_above_burst_never_passes() {
        let (d, t) = decide(None, rate(10, "1", 3), 4, T0);
        assert_eq!((d.allowed, d.retry_after_ms, t), (false, -1, None));
        assert_eq!(d.remaining, 3);
    }

    #[test]
    fn steady_traffic_at_the_rate_is_always_admitted() {
        // Whole and fractional intervals, burst 1 (the strictest) and larger, over a
        // long run: arrivals never earlier than the exact schedule always pass.
        for (limit, window, burst) in [
            (10, "1", 1),
            (3, "1", 1),
            (7, "1", 1),
            (7, "3s", 4),
            (1000, "1", 1),
            (999_983, "60", 1),
        ] {
            let r = rate(limit, window, burst);
            let w = r.window.us() as u128;
            let arrivals: Vec<(u64, u64)> = (0..100_000u128)
                .map(|k| (T0 + 17 + (k * w).div_ceil(limit as u128) as u64, 1))
                .collect();
            assert_eq!(run(r, &arrivals).len(), arrivals.len(), "{limit}/{window}");
        }
    }

    #[test]
    fn burst_one_spaces_requests_evenly() {
        let r = rate(4, "1", 1);
        // Someone hammering every millisecond gets exactly one per 250 ms.
        let arrivals: Vec<(u64, u64)> = (0..2_000).map(|i| (T0 + i * 1000, 1)).collect();
        let admitted = run(r, &arrivals);
        let times: Vec<u64> = admitted.iter().map(|a| a.0 - T0).collect();
        assert_eq!(
            times,
            vec![0, 250_000, 500_000, 750_000, 1_000_000, 1_250_000, 1_500_000, 1_750_000]
        );
    }

    /// Over any interval between two admitted requests, what was admitted is at most
    /// burst + rate × interval (plus 2 µs of lattice rounding when the interval is not
    /// a whole number of microseconds).
    #[test]
    fn never_more_than_burst_plus_rate_times_interval() {
        let mut rng = StdRng::seed_from_u64(42);
        for case in 0..300 {
            let limit = rng.gen_range(1..20);
            let window = format!("{}ms", rng.gen_range(1..3_000));
            let r = rate(limit, &window, rng.gen_range(1..6));
            let mut t = T0 + rng.gen_range(0..1_000_000);
            let arrivals: Vec<(u64, u64)> = (0..300)
                .map(|_| {
                    t += rng.gen_range(0..(r.window.us() / limit).max(2) * 2);
                    (t, rng.gen_range(1..=r.burst))
                })
                .collect();
            let admitted = run(r, &arrivals);
            let (w, l) = (r.window.us() as u128, limit as u128);
            let slack = if w % l == 0 { 0 } else { 2 };
            for i in 0..admitted.len() {
                let mut units = 0u128;
                for a in &admitted[i..] {
                    units += a.1 as u128;
                    let span = (a.0 - admitted[i].0) as u128;
                    assert!(
                        units * w <= r.burst as u128 * w + (span + slack) * l,
                        "case {case}: {units} units in {span} µs at {r:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn integer_intervals_are_exact() {
        let r = rate(10, "1", 10);
        assert_eq!(r.advance(T0 + 5, 3), (T0 + 5 + 300_000) as u128);
        assert_eq!(r.tolerance(), 1_000_000);
    }

    /// A whole interval skips the lattice's divisions; it must land on the very
    /// points the lattice gives, and count the same remaining units.
    #[test]
    fn whole_intervals_take_the_lattice_points() {
        let mut rng = StdRng::seed_from_u64(19);
        let mut checked = 0;
        for _ in 0..50_000 {
            let limit = [1, 2, 3, 7, 10, 60, 64, 100, 1000, 1024][rng.gen_range(0..10)];
            let window = format!("{}ms", rng.gen_range(1..100_000));
            let r = rate(limit, &window, rng.gen_range(1..50));
            let Some(interval) = r.whole_interval() else {
                continue;
            };
            checked += 1;
            let from = T0 + rng.gen_range(0..10_000_000);
            let units = rng.gen_range(0..60);
            let lattice = r.advance_on_lattice(from, units);
            assert_eq!(r.advance(from, units), lattice, "{r:?}");
            // Any instant, and the ones a µs either side of a unit's boundary.
            let step = u64::try_from(interval).unwrap_or(u64::MAX);
            let k = rng.gen_range(0..=r.burst);
            let edge = from.saturating_sub(k.saturating_mul(step));
            for now in [
                from - rng.gen_range(0..=from - T0),
                edge,
                edge + 1,
                edge - 1,
            ] {
                let Some(ahead) = from.checked_sub(now).map(u128::from) else {
                    continue;
                };
                if let Some(room) = r.tolerance().checked_sub(ahead) {
                    let lattice = remaining_on_lattice(r, from, now, room);
                    let got = remaining(r, r.tolerance(), u128::from(from), now);
                    assert_eq!(got, lattice, "{r:?} {interval} {from} {now}");
                }
            }
        }
        assert!(checked > 10_000, "{checked}");
    }

    #[test]
    fn fractional_intervals_do_not_drift() {
        let r = rate(3, "1", 1);
        let mut t = T0 + 1;
        for _ in 0..3_000_000 {
            t = r.advance(t, 1) as u64;
        }
        // 3,000,000 steps of a third of a second: exactly 1,000,000 s.
        assert_eq!(t, T0 + 1 + 1_000_000_000_000);
    }

    #[test]
    fn extremes_do_not_overflow() {
        let r = rate(
            crate::limit::MAX_AMOUNT,
            "315360000s",
            crate::limit::MAX_AMOUNT,
        );
        let (d, tat) = decide(Some(u64::MAX), r, crate::limit::MAX_AMOUNT, (1 << 53) - 1);
        assert!(!d.allowed || tat.is_some());
        let r = rate(1, "1ms", 1);
        let (d, _) = decide(Some(u64::MAX), r, 1, T0);
        assert!(!d.allowed);
    }

    /// A refund puts the TAT back where the spend found it. On a fractional lattice
    /// two TATs 1 µs apart can advance to the same point (steps of 333 and 334 µs
    /// meet); the refund then gives back the later one: never more than was spent.
    #[test]
    fn retreat_undoes_advance() {
        let mut ambiguous = 0;
        for (limit, window) in [
            (3, "1ms"),
            (7, "3ms"),
            (10, "1ms"),
            (1000, "1s"),
            (999, "1s"),
        ] {
            let r = rate(limit, window, 10);
            for t0 in T0..T0 + 20_000 {
                for units in 1..=4 {
                    let t1 = r.advance(t0, units) as u64;
                    let back = r.retreat(t1, units);
                    assert_eq!(r.advance(back as u64, units), u128::from(t1));
                    let later = r.advance(t0 + 1, units) == u128::from(t1);
                    ambiguous += u32::from(later);
                    let want = u128::from(t0) + u128::from(later);
                    assert_eq!(back, want, "{limit}/{window} {t0} {units}");
                }
            }
        }
        assert!(ambiguous > 0, "the fractional cases meet at some points");
        // The case by hand: 3 per second, two spends at one instant, one refund.
        let r = rate(3, "1", 3);
        let once = r.advance(T0, 1) as u64;
        let twice = r.advance(once, 1) as u64;
        assert_eq!((once - T0, twice - T0), (333_334, 666_667));
        assert_eq!(r.retreat(twice, 1), u128::from(once));
        // Integer intervals are exact everywhere.
        let r = rate(10, "1", 10);
        assert_eq!(r.retreat(T0 + 300_005, 3), u128::from(T0 + 5));
    }
}
