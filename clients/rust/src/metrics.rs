//! Decisions and call latency through the `metrics` facade, so any exporter works
//! (Prometheus, StatsD, …). The names, labels and buckets are every kit's: see
//! docs/metrics.md. Off unless [`crate::RateLimiter::metrics`] turns them on.

use std::time::Duration;

use crate::limit::Limit;

pub const DECISIONS: &str = "redis_rl_decisions_total";
pub const DURATION: &str = "redis_rl_call_duration_seconds";

/// The histogram's buckets, in seconds: sub-millisecond calls, a tail to the timeout.
/// (An exporter takes them from here: `PrometheusBuilder::set_buckets(BUCKETS)`.)
pub const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5,
];

/// What became of one decision, as the `outcome` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Allowed,
    Denied,
    ShadowDenied,
    FailureOpen,
    FailureClosed,
    CacheDenied,
}

impl Outcome {
    /// A decision's outcome: from the failure policy (`failed`), else from Redis, where
    /// shadow mode turns a denial into `shadow_denied`.
    pub(crate) fn of(failed: bool, allowed: bool, shadow: bool) -> Outcome {
        match (failed, allowed) {
            (true, true) => Outcome::FailureOpen,
            (true, false) => Outcome::FailureClosed,
            (false, true) => Outcome::Allowed,
            (false, false) if shadow => Outcome::ShadowDenied,
            (false, false) => Outcome::Denied,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Denied => "denied",
            Outcome::ShadowDenied => "shadow_denied",
            Outcome::FailureOpen => "failure_open",
            Outcome::FailureClosed => "failure_closed",
            Outcome::CacheDenied => "cache_denied",
        }
    }
}

/// One decision, counted once per limit it names (labels are the limits' names, never
/// their keys), and the call's latency, unless the deny cache answered.
pub(crate) fn record(limits: &[Limit], outcome: Outcome, scripts: bool, took: Option<Duration>) {
    for limit in limits {
        record_named(limit.name.clone(), outcome, scripts, took);
    }
}

/// One decision of the limit labelled `name`.
pub(crate) fn record_named(name: String, outcome: Outcome, scripts: bool, took: Option<Duration>) {
    let backend = if scripts { "scripts" } else { "module" };
    metrics::counter!(DECISIONS,
        "limit" => name.clone(),
        "outcome" => outcome.label(),
        "backend" => backend)
    .increment(1);
    if let Some(took) = took {
        metrics::histogram!(DURATION, "limit" => name).record(took.as_secs_f64());
    }
}
