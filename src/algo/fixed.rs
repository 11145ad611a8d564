//! Fixed window: one counter per clock-aligned window. Cheap, and it lets a caller
//! spend two budgets back to back across a boundary; it is here as the baseline.

use super::state::Stored;
use super::{
    ceil_ms, remaining, retry_ms, Algorithm, Decision, KeyKind, KeyName, KeyUse, Keys, Verdict,
    Write, Writes, NO_WRITES,
};
use crate::error::Result;
use crate::layout::fixed_window_name;
use crate::limit::{Spec, Window};

/// Start of the window holding `now` (all in microseconds).
pub fn window_start(now: u64, window: Window) -> u64 {
    // A window is never empty, so neither the remainder nor the difference can fail.
    now - now % window.us()
}

/// Decides on a window whose counter holds `count`. Unlike the seed script, which
/// increments first, a denied request is not counted.
pub fn decide(count: u64, limit: u64, cost: u64, window: Window, now: u64) -> Decision {
    let used = u128::from(count);
    let allowed = u128::from(cost) + used <= u128::from(limit);
    let used_after = if allowed {
        used + u128::from(cost)
    } else {
        used
    };
    let until_next =
        u128::from(window_start(now, window)) + u128::from(window.us()) - u128::from(now);
    Decision {
        allowed,
        remaining: remaining(limit, used_after),
        retry_after_ms: if allowed {
            0
        } else if cost > limit {
            -1
        } else {
            retry_ms(until_next)
        },
        reset_after_ms: if used_after == 0 {
            0
        } else {
            ceil_ms(until_next)
        },
    }
}

/// RL.FIXED: `<key>:<window start>`.
pub struct Fixed;

impl Algorithm for Fixed {
    fn name(&self) -> &'static str {
        "FIXED"
    }

    fn keys(&self, spec: &Spec, now: u64) -> Keys {
        let start = fixed_window_name(window_start(now, spec.window), spec.window);
        [
            Some(KeyUse {
                name: KeyName::Derived(start),
                kind: KeyKind::Integer,
                written: true,
            }),
            None,
        ]
    }

    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let count = stored.first().and_then(Stored::integer).unwrap_or(0);
        counter_verdict(decide(count, spec.limit, spec.cost, spec.window, now), spec)
    }

    fn refund(&self, stored: &[Stored], spec: &Spec, _now: u64) -> Result<Writes> {
        Ok(counter_refund(stored, spec))
    }
}

/// An admitted call INCRBYs the current window's counter (key 0), with the scripts'
/// TTL of two windows when that creates it; a denied one writes nothing.
pub fn counter_verdict(decision: Decision, spec: &Spec) -> Verdict {
    let spend = Write::IncrBy {
        key: 0,
        by: spec.cost,
        ttl_ms: spec.window.ms().saturating_mul(2),
    };
    Verdict {
        decision,
        writes: Ok([decision.allowed.then_some(spend), None, None]),
    }
}

/// Lowers the current window's counter (key 0) by the cost, not below 0.
pub fn counter_refund(stored: &[Stored], spec: &Spec) -> Writes {
    let value = stored.first().and_then(Stored::integer).unwrap_or(0);
    match value.min(spec.cost) {
        0 => NO_WRITES,
        by => [Some(Write::DecrBy { key: 0, by }), None, None],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W_US: u64 = 10_000_000;
    const W: Window = Window::TEN_SECONDS;
    const T0: u64 = 1_764_480_000_000_000; // a multiple of W

    #[test]
    fn counts_up_to_the_limit_then_waits_for_the_next_window() {
        let d = decide(7, 8, 1, W, T0 + 9_800_000);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (true, 0, 0, 200)
        );
        let d = decide(8, 8, 1, W, T0 + 9_800_000);
        assert_eq!(
            (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
            (false, 0, 200, 200)
        );
        // Exactly at the boundary the new window starts empty.
        assert_eq!(window_start(T0 + W_US, W), T0 + W_US);
        assert_eq!(window_start(T0 + W_US - 1, W), T0);
    }

    #[test]
    fn cost() {
        let d = decide(5, 8, 4, W, T0);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 3);
        assert_eq!(d.retry_after_ms, 10_000);
        let d = decide(5, 8, 3, W, T0);
        assert!(d.allowed);
        assert_eq!(d.remaining, 0);
        let d = decide(0, 8, 9, W, T0);
        assert_eq!(
            (d.allowed, d.retry_after_ms, d.reset_after_ms),
            (false, -1, 0)
        );
    }

    #[test]
    fn retry_rounds_up_to_whole_ms() {
        let d = decide(8, 8, 1, W, T0 + W_US - 1);
        assert_eq!(d.retry_after_ms, 1);
        let d = decide(8, 8, 1, W, T0 + W_US - 1001);
        assert_eq!(d.retry_after_ms, 2);
    }

    #[test]
    fn counter_above_limit_from_a_script_is_safe() {
        let d = decide(u64::MAX, 8, 1, W, T0);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
    }
}
