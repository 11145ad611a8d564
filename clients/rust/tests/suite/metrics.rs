//! The kit's metrics, scraped from a real Prometheus registry's text after a known
//! sequence of decisions: exact counts per outcome, one latency per call.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use crate::common::{free_port, key, rate_limiter, FakeClock, Server};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::Request;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redis_rl_client::metrics::{BUCKETS, DURATION};
use redis_rl_client::{connect, DenyCache, FailurePolicy, Limit, RateLimitLayer};
use tower::ServiceExt;

/// The value of the sample whose labels include every pair of `labels`.
pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0.0, |v| v.parse().unwrap())
}

/// docs/metrics.md's machine-readable list of names.
fn documented_names() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md"),
    )
    .expect("docs/metrics.md");
    let block = doc.split("```metrics\n").nth(1).unwrap();
    let block = block.split("```").next().unwrap();
    block
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn every_decision_is_counted_by_limit_and_outcome() {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(DURATION.to_string()), BUCKETS)
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    // The runtime of a tokio test is one thread: every record below lands here.
    let _local = metrics::set_default_local_recorder(&recorder);

    let server = Server::start();
    let clock = FakeClock::new();
    let rl = rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|_, _| {})
        .metrics(true);
    let api = Limit::fixed("api", key("metrics"), 2, Duration::from_secs(60));
    for _ in 0..3 {
        rl.check(&api, 1).await; // allowed, allowed, denied
    }
    let cached = rl.clone().deny_cache(DenyCache::new(100));
    cached.check(&api, 1).await; // denied by Redis, remembered
    cached.check(&api, 1).await; // cache_denied: no call
    let dead = format!("redis://127.0.0.1:{}", free_port(0));
    let open = rate_limiter(connect(&dead).unwrap(), FailurePolicy::Open)
        .on_failure(|_, _| {})
        .metrics(true);
    open.check(&api, 1).await; // failure_open
    let closed = rate_limiter(connect(&dead).unwrap(), FailurePolicy::Closed)
        .on_failure(|_, _| {})
        .metrics(true);
    closed.check(&api, 1).await; // failure_closed
                                 // Shadow mode through the layer: the second request is let through.
    let one = Limit::fixed(
        "shadowed",
        key("metrics-shadow"),
        1,
        Duration::from_secs(60),
    );
    let layer = RateLimitLayer::new(rl.clone(), [one])
        .pseudonymize(false)
        .shadow(true);
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    for _ in 0..2 {
        let req = Request::builder()
            .uri("/")
            .extension(ConnectInfo(SocketAddr::from(([192, 0, 2, 9], 1000))))
            .body(Body::empty())
            .unwrap();
        app.clone().oneshot(req).await.unwrap();
    }

    // A peek, a refund and a reset belong to a request already counted: not decisions.
    rl.peek(&api, 1).await;
    rl.refund(&api, 1).await;
    rl.reset(&api).await;
    // RL.THROTTLE: quantity 1 twice (allowed, then denied), quantity 0 only reports.
    let cell = key("metrics-throttle");
    rl.throttle(&cell, 0, 1, 60, 1).await;
    rl.throttle(&cell, 0, 1, 60, 1).await;
    rl.throttle(&cell, 0, 1, 60, 0).await;

    let text = handle.render();
    let backend = if crate::common::scripts_backend() {
        "scripts"
    } else {
        "module"
    };
    let count = |limit: &str, outcome: &str| {
        sample(
            &text,
            "redis_rl_decisions_total",
            &[("limit", limit), ("outcome", outcome), ("backend", backend)],
        )
    };
    assert_eq!(count("api", "allowed"), 2.0, "{text}");
    assert_eq!(count("api", "denied"), 2.0, "{text}");
    assert_eq!(count("api", "cache_denied"), 1.0, "{text}");
    assert_eq!(
        sample(
            &text,
            "redis_rl_decisions_total",
            &[("limit", "api"), ("outcome", "failure_open")]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "redis_rl_decisions_total",
            &[("limit", "api"), ("outcome", "failure_closed")]
        ),
        1.0
    );
    assert_eq!(count("shadowed", "allowed"), 1.0, "{text}");
    assert_eq!(count("shadowed", "shadow_denied"), 1.0, "{text}");
    assert_eq!(count("shadowed", "denied"), 0.0, "{text}");
    // One latency per call that reached for Redis: 4 answered, 2 failed, the cache
    // hit made none.
    let calls = sample(
        &text,
        "redis_rl_call_duration_seconds_count",
        &[("limit", "api")],
    );
    assert_eq!(calls, 6.0, "{text}");
    assert_eq!(count("throttle:1/60s", "allowed"), 1.0, "{text}");
    assert_eq!(count("throttle:1/60s", "denied"), 1.0, "{text}");
    let throttled = sample(
        &text,
        "redis_rl_call_duration_seconds_count",
        &[("limit", "throttle:1/60s")],
    );
    assert_eq!(throttled, 2.0, "{text}");
    assert!(text.contains("redis_rl_call_duration_seconds_bucket{limit=\"api\",le=\"0.00005\"}"));
    // Nothing else, and nothing named by a key or an identity.
    assert!(
        !text.contains("metrics-shadow") && !text.contains("192.0.2.9"),
        "{text}"
    );
    let documented = documented_names();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(
            documented.contains(name),
            "{name} is not in docs/metrics.md"
        );
    }
}

#[tokio::test]
async fn off_by_default() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let _local = metrics::set_default_local_recorder(&recorder);
    let server = Server::start();
    let rl = rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed);
    rl.check(
        &Limit::fixed("quiet", key("quiet"), 2, Duration::from_secs(60)),
        1,
    )
    .await;
    assert!(!handle.render().contains("redis_rl_"));
}
