//! HTTP fields for a decision, after draft-ietf-httpapi-ratelimit-headers:
//!
//! ```text
//! RateLimit-Policy: "<name>";q=<limit>;w=<window s>      one item per limit
//! RateLimit:        "<name>";r=<remaining>;t=<s until the full budget is back>
//! Retry-After:      <s>                                    on denials that can pass later
//! ```
//!
//! The module answers in milliseconds; HTTP wants whole seconds, rounded **up**, so that
//! a client that waits as told is never early.

use crate::decision::{Decision, Source};
use crate::limit::Algorithm;

/// Response headers, in order, as `(name, value)`.
pub type Headers = Vec<(&'static str, String)>;

fn ceil_seconds(ms: i64) -> i64 {
    (ms.max(0) + 999) / 1000
}

/// A Structured Field string: quoted, `\` and `"` escaped. It only carries printable
/// ASCII, so anything else in a name becomes `?` rather than an invalid header.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '\\' | '"' => {
                out.push('\\');
                out.push(ch);
            }
            ' '..='~' => out.push(ch),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// The rate limits of a decision: its per-limit parts, without concurrency limits (a
/// count of requests in flight is no quota over a window, so it has no `RateLimit` item).
fn rate_parts(decision: &Decision) -> impl Iterator<Item = (&Decision, &crate::Limit)> {
    decision
        .limits()
        .iter()
        .filter_map(|p| p.limit.as_ref().map(|l| (p, l)))
        .filter(|(_, l)| l.algorithm != Algorithm::Concurrency)
}

/// The headers for `decision`; none when the failure policy decided (nothing is known).
/// `legacy` adds `X-RateLimit-Limit`, `-Remaining` and `-Reset` (seconds from now) for the
/// limit that binds: the denying one with the longest wait, else the one with least left.
pub fn ratelimit_headers(decision: &Decision, legacy: bool) -> Headers {
    let mut headers = Headers::new();
    if decision.source == Source::Failure {
        return headers;
    }
    let policy: Vec<String> = rate_parts(decision)
        .map(|(_, l)| {
            format!(
                "{};q={};w={}",
                sf_string(&l.name),
                l.limit,
                ceil_seconds(l.window_ms() as i64)
            )
        })
        .collect();
    if !policy.is_empty() {
        let state: Vec<String> = rate_parts(decision)
            .map(|(p, l)| {
                format!(
                    "{};r={};t={}",
                    sf_string(&l.name),
                    p.remaining.max(0),
                    ceil_seconds(p.reset_after_ms)
                )
            })
            .collect();
        headers.push(("RateLimit-Policy", policy.join(", ")));
        headers.push(("RateLimit", state.join(", ")));
    }
    if let Some(retry) = retry_after_seconds(decision) {
        headers.push(("Retry-After", retry.to_string()));
    }
    if legacy {
        if let Some((p, l)) = binding(decision) {
            headers.push(("X-RateLimit-Limit", capacity(l).to_string()));
            headers.push(("X-RateLimit-Remaining", p.remaining.max(0).to_string()));
            headers.push((
                "X-RateLimit-Reset",
                ceil_seconds(p.reset_after_ms).to_string(),
            ));
        }
    }
    headers
}

/// What `remaining` counts down from: a GCRA limit's burst (how many may come at once),
/// else its limit per window. So the legacy `Limit` is never below `Remaining`.
fn capacity(limit: &crate::Limit) -> u64 {
    match (limit.algorithm, limit.burst) {
        (Algorithm::Gcra, Some(burst)) => burst,
        _ => limit.limit,
    }
}

/// `Retry-After` in whole seconds: on a denial that can pass later, else none.
pub fn retry_after_seconds(decision: &Decision) -> Option<i64> {
    if decision.allowed || decision.never() || decision.source == Source::Failure {
        return None;
    }
    Some(ceil_seconds(decision.retry_after_ms))
}

fn binding(decision: &Decision) -> Option<(&Decision, &crate::Limit)> {
    if decision.allowed {
        // The first of the least remaining.
        rate_parts(decision).reduce(|a, b| if b.0.remaining < a.0.remaining { b } else { a })
    } else {
        let wait = |d: &Decision| {
            if d.never() {
                i64::MAX
            } else {
                d.retry_after_ms
            }
        };
        rate_parts(decision)
            .filter(|(p, _)| !p.allowed)
            .reduce(|a, b| if wait(b.0) > wait(a.0) { b } else { a })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limit;
    use std::time::Duration;

    fn part(limit: Limit, allowed: bool, remaining: i64, retry: i64, reset: i64) -> Decision {
        Decision {
            allowed,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: reset,
            limit: Some(limit),
            parts: vec![],
            source: Source::Redis,
            error: None,
        }
    }

    #[test]
    fn rounding_and_escaping() {
        let l = Limit::fixed("a\"b\\c\u{e9}", "k", 8, Duration::from_millis(1500));
        let h = ratelimit_headers(&part(l, false, 0, 200, 1001), true);
        assert_eq!(
            h,
            [
                ("RateLimit-Policy", r#""a\"b\\c?";q=8;w=2"#.to_string()),
                ("RateLimit", r#""a\"b\\c?";r=0;t=2"#.to_string()),
                ("Retry-After", "1".to_string()),
                ("X-RateLimit-Limit", "8".to_string()),
                ("X-RateLimit-Remaining", "0".to_string()),
                ("X-RateLimit-Reset", "2".to_string()),
            ]
        );
    }

    #[test]
    fn never_has_no_retry_after_and_binding_is_the_longest_denial() {
        let a = Limit::gcra("burst", "k1", 10, Duration::from_secs(1));
        let b = Limit::fixed("window", "k2", 3, Duration::from_secs(10));
        let c = Limit::concurrency("inflight", "k3", 1, Duration::from_secs(30));
        let all = Decision {
            parts: vec![
                part(a, false, 0, 100, 1000),
                part(b, false, 0, 4000, 4000),
                part(c, true, 0, 0, 30000),
            ],
            ..part(
                Limit::fixed("x", "x", 1, Duration::from_secs(1)),
                false,
                0,
                4000,
                30000,
            )
        };
        let h = ratelimit_headers(&all, true);
        assert_eq!(h[0].1, r#""burst";q=10;w=1, "window";q=3;w=10"#);
        assert_eq!(h[2], ("Retry-After", "4".to_string()));
        assert_eq!(h[3], ("X-RateLimit-Limit", "3".to_string()));
        let never = part(
            Limit::fixed("f", "k", 2, Duration::from_secs(10)),
            false,
            2,
            -1,
            0,
        );
        assert!(ratelimit_headers(&never, false)
            .iter()
            .all(|(n, _)| *n != "Retry-After"));
        let failed = Decision::failure(false, crate::Error::InvalidCall("x"));
        assert!(ratelimit_headers(&failed, true).is_empty());
    }

    #[test]
    fn a_gcra_burst_is_what_remaining_counts_down_from() {
        // 1 a second with 2 at once: after the first request 1 remains, of 2.
        let gcra = Limit::gcra("g", "k", 1, Duration::from_secs(1)).burst(2);
        let h = ratelimit_headers(&part(gcra, true, 1, 0, 1000), true);
        assert!(h.contains(&("X-RateLimit-Limit", "2".to_string())), "{h:?}");
        assert!(
            h.contains(&("X-RateLimit-Remaining", "1".to_string())),
            "{h:?}"
        );
        let plain = Limit::gcra("g", "k", 5, Duration::from_secs(1));
        let h = ratelimit_headers(&part(plain, true, 4, 0, 200), true);
        assert!(h.contains(&("X-RateLimit-Limit", "5".to_string())), "{h:?}");
    }
}
