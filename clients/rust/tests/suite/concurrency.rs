//! RL.CONCURRENCY and RL.THROTTLE through the typed calls, and the tower layer's
//! concurrency option: a lease before the handler, released after it, also when the
//! handler panics or its future is dropped, and never held past its ttl.
//!
//! On a module without these commands (before issue 16) each test says so and passes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{has, key, panic_of, FakeClock, Server, T0};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::{Extension, Router};
use http::{Request, StatusCode};
use redis_rl_client::{
    connect, Decision, FailurePolicy, LeaseOp, Limit, Mode, RateLimitLayer, RateLimiter, RequestId,
    Source,
};
use tokio::sync::Notify;
use tower::ServiceExt;

fn limiter(server: &Server, clock: &FakeClock) -> RateLimiter {
    crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|error, command| eprintln!("{command} failed: {error}"))
}

fn numbers(d: &Decision) -> (bool, i64, i64, i64) {
    assert_eq!(d.source, Source::Redis, "{:?}", d.error);
    (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms)
}

fn leases(server: &Server, key: &str) -> u64 {
    server.query(redis::cmd("ZCARD").arg(key))
}

#[tokio::test]
async fn lease_calls() {
    let server = Server::start();
    if !has(&server, "RL.CONCURRENCY") {
        return;
    }
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    let limit = Limit::concurrency("inflight", key("leases"), 2, Duration::from_secs(10));
    assert_eq!(
        numbers(&rl.acquire(&limit, "a").await),
        (true, 1, 0, 10_000)
    );
    clock.advance_ms(1000);
    assert_eq!(
        numbers(&rl.acquire(&limit, "b").await),
        (true, 0, 0, 10_000)
    );
    // Full: the wait is until the earliest lease (a's) expires.
    assert_eq!(
        numbers(&rl.acquire(&limit, "c").await),
        (false, 0, 9000, 10_000)
    );
    // A retried acquire renews, it never takes a second slot.
    assert_eq!(
        numbers(&rl.acquire(&limit, "a").await),
        (true, 0, 0, 10_000)
    );
    let score: i64 = server.query(redis::cmd("ZSCORE").arg(&limit.key).arg("a"));
    assert_eq!(
        score,
        T0 + 11_000_000,
        "member = lease id, score = its expiry in µs"
    );
    clock.advance_ms(5000);
    assert_eq!(
        numbers(&rl.heartbeat(&limit, "b").await),
        (true, 0, 0, 10_000)
    );
    // RELEASE answers as PEEK: what an acquire of a new id would get now (a slot, none
    // left after it), with the state's own reset (until "a", the last lease held,
    // expires at +11 s), and PEEK writes nothing.
    assert_eq!(numbers(&rl.release(&limit, "b").await), (true, 0, 0, 5_000));
    assert_eq!(leases(&server, &limit.key), 1);
    assert_eq!(
        numbers(&rl.concurrency(&limit, LeaseOp::Peek).await),
        (true, 0, 0, 5_000)
    );
    assert_eq!(leases(&server, &limit.key), 1);
    assert!(
        rl.release(&limit, "never-held").await.allowed,
        "releasing an unknown id is no error"
    );
    // a expires at +11 s: reclaimed, and its heartbeat is denied (its slot may be gone).
    clock.advance_ms(6000);
    let lost = rl.heartbeat(&limit, "a").await;
    assert!(
        !lost.allowed && lost.never(),
        "waiting will not bring a lost lease back"
    );
    // No live lease: an empty limiter's own reset is 0.
    assert_eq!(
        numbers(&rl.concurrency(&limit, LeaseOp::Peek).await),
        (true, 1, 0, 0)
    );
    assert_eq!(
        numbers(&rl.acquire(&limit, "d").await),
        (true, 1, 0, 10_000)
    );
    assert_eq!(
        leases(&server, &limit.key),
        1,
        "the expired lease was trimmed by the acquire"
    );
    assert_eq!(
        numbers(&rl.concurrency(&limit, LeaseOp::Reset).await),
        (true, 1, 0, 0)
    );
    let exists: u64 = server.query(redis::cmd("EXISTS").arg(&limit.key));
    assert_eq!(exists, 0);
    // A concurrency limit takes a lease id: a plain check is raised before sending.
    let plain = panic_of(async move { rl.check(&limit, 1).await })
        .await
        .expect("a plain check of a concurrency limit was sent");
    assert!(plain.contains("takes a lease id"), "{plain}");
}

#[tokio::test]
async fn leases_in_rl_all() {
    let server = Server::start();
    if !has(&server, "RL.CONCURRENCY") {
        return;
    }
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    let rate = Limit::fixed(
        "minute",
        format!("{}:rate", key("all-lease")),
        1,
        Duration::from_secs(60),
    );
    let slots = Limit::concurrency(
        "inflight",
        format!("{}:inflight", key("all-lease")),
        1,
        Duration::from_secs(30),
    );
    let limits = [rate.clone(), slots.clone()];
    assert!(numbers(&rl.check_all_leased(&limits, 1, Mode::Spend, "r1").await).0);
    assert_eq!(leases(&server, &slots.key), 1);
    // The concurrency limit is full: the rate limit spends nothing.
    let full = rl
        .check_all_leased(
            &[
                rate.with_key(format!("{}:rate2", key("all-lease"))),
                slots.clone(),
            ],
            1,
            Mode::Spend,
            "r2",
        )
        .await;
    assert!(!full.allowed);
    assert_eq!(
        rl.peek(&rate.with_key(format!("{}:rate2", key("all-lease"))), 1)
            .await
            .remaining,
        0
    );
    let rate2_spent: Option<i64> =
        server.query(redis::cmd("GET").arg(format!("{}:rate2:1718609340", key("all-lease"))));
    assert_eq!(
        rate2_spent, None,
        "a full concurrency limit spends no rate budget"
    );
    // The rate limit denies: no lease is taken.
    rl.release(&slots, "r1").await;
    let denied = rl.check_all_leased(&limits, 1, Mode::Spend, "r3").await;
    assert!(!denied.allowed);
    assert_eq!(
        leases(&server, &slots.key),
        0,
        "a denied rate limit takes no lease"
    );
}

#[tokio::test]
async fn throttle_as_redis_cell() {
    let server = Server::start();
    if !has(&server, "RL.THROTTLE") {
        return;
    }
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    let k = key("throttle");
    // redis-cell's README example: 15 burst, 30 per 60 s (docs/frameworks/tower.md shows
    // this first reply).
    let t = rl.throttle(&k, 15, 30, 60, 1).await;
    assert_eq!(
        (
            t.limited,
            t.limit,
            t.remaining,
            t.retry_after_s,
            t.reset_after_s,
            t.source
        ),
        (false, 16, 15, -1, 2, Source::Redis)
    );
    let peek = rl.throttle(&k, 15, 30, 60, 0).await;
    assert_eq!(
        (peek.limited, peek.remaining),
        (false, 15),
        "quantity 0 spends nothing"
    );
    let rest = rl.throttle(&k, 15, 30, 60, 15).await;
    assert_eq!((rest.limited, rest.remaining), (false, 0));
    let limited = rl.throttle(&k, 15, 30, 60, 1).await;
    assert_eq!((limited.limited, limited.retry_after_s), (true, 2));
    // The app clock (NOW) decides: one emission interval (2 s) later, one more passes.
    clock.advance_ms(2000);
    let later = rl.throttle(&k, 15, 30, 60, 1).await;
    assert_eq!((later.limited, later.remaining), (false, 0));
    let bare = Server::bare();
    // The module backend, pinned: a server without it is a failure there.
    let failed = limiter(&bare, &clock)
        .backend(redis_rl_client::Backend::Module)
        .throttle(&k, 15, 30, 60, 1)
        .await;
    assert_eq!((failed.limited, failed.source), (true, Source::Failure));
}

const PEER: ([u8; 4], u16) = ([198, 51, 100, 9], 5000);

fn request(path: &str) -> Request<Body> {
    Request::builder()
        .uri(path)
        .extension(ConnectInfo(SocketAddr::from(PEER)))
        .body(Body::empty())
        .unwrap()
}

/// The layer with one lease per identity at a time (ttl 10 s) and a generous rate limit;
/// keys unpseudonymized so the test can look at them.
fn app(server: &Server, clock: &FakeClock, gate: Arc<Notify>) -> (Router, String) {
    let layer = RateLimitLayer::new(
        limiter(server, clock),
        [Limit::slidecount(
            "minute",
            "rl:cc:minute",
            100,
            Duration::from_secs(60),
        )],
    )
    .pseudonymize(false)
    .concurrency(Limit::concurrency(
        "inflight",
        "rl:cc:inflight",
        1,
        Duration::from_secs(10),
    ));
    let lease_key = "rl:cc:inflight:{198.51.100.9}".to_string();
    let router = Router::new()
        .route(
            "/",
            get(|Extension(id): Extension<RequestId>| async move { id.0 }),
        )
        .route(
            "/hold",
            get(move || {
                let gate = gate.clone();
                async move {
                    gate.notified().await;
                    "held"
                }
            }),
        )
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("handler failed");
                }
                "unreachable"
            }),
        )
        .layer(layer);
    (router, lease_key)
}

async fn eventually_no_lease(server: &Server, key: &str) {
    // The release after a panic or a drop runs on a spawned task: wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(5);
    while leases(server, key) != 0 {
        assert!(Instant::now() < deadline, "the lease was never released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn layer_concurrency_option() {
    let server = Server::start();
    if !has(&server, "RL.CONCURRENCY") {
        return;
    }
    let clock = FakeClock::new();
    let gate = Arc::new(Notify::new());
    let (app, lease_key) = app(&server, &clock, gate.clone());

    // A plain request: the lease is named by the generated id, and gone after the response.
    let response = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let id = String::from_utf8(
        axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(id.len() > 16, "a generated request id: {id}");
    assert_eq!(
        leases(&server, &lease_key),
        0,
        "released after the response"
    );

    // A request in flight holds the one slot: the next one gets 429 with a Retry-After.
    let held = tokio::spawn(app.clone().oneshot(request("/hold")));
    let deadline = Instant::now() + Duration::from_secs(5);
    while leases(&server, &lease_key) == 0 {
        assert!(
            Instant::now() < deadline,
            "the held request never took its lease"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let refused = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "10");
    gate.notify_one();
    assert_eq!(held.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(leases(&server, &lease_key), 0);
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        StatusCode::OK
    );

    // A handler that panics: the lease is released all the same.
    let panicked = tokio::spawn(app.clone().oneshot(request("/panic"))).await;
    assert!(panicked.unwrap_err().is_panic());
    eventually_no_lease(&server, &lease_key).await;

    // A request whose future is dropped (the client went away): released.
    let abandoned = tokio::spawn(app.clone().oneshot(request("/hold")));
    while leases(&server, &lease_key) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    abandoned.abort();
    eventually_no_lease(&server, &lease_key).await;

    // A handler that hangs past the ttl does not hold the slot for ever.
    let hanging = tokio::spawn(app.clone().oneshot(request("/hold")));
    while leases(&server, &lease_key) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    clock.advance_ms(10_001);
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        StatusCode::OK
    );
    gate.notify_one();
    assert_eq!(
        hanging.await.unwrap().unwrap().status(),
        StatusCode::OK,
        "its late release is no error"
    );
}

#[tokio::test]
async fn concurrency_alone() {
    // No rate limit at all: the layer acquires the lease directly (no RL.ALL).
    let server = Server::start();
    if !has(&server, "RL.CONCURRENCY") {
        return;
    }
    let clock = FakeClock::new();
    let layer = RateLimitLayer::new(limiter(&server, &clock), [])
        .pseudonymize(false)
        .concurrency(Limit::concurrency(
            "inflight",
            "rl:solo",
            1,
            Duration::from_secs(5),
        ));
    let app = Router::new()
        .route(
            "/",
            get(|Extension(d): Extension<Decision>| async move { d.remaining.to_string() }),
        )
        .layer(layer);
    let response = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers().get("ratelimit").is_none(),
        "no rate limit, no RateLimit item"
    );
    let body = axum::body::to_bytes(response.into_body(), 64)
        .await
        .unwrap();
    assert_eq!(&body[..], b"0", "the handler saw its lease's decision");
    assert_eq!(leases(&server, "rl:solo:{198.51.100.9}"), 0);
    let all: String = server.query(redis::cmd("INFO").arg("commandstats"));
    assert!(
        !all.contains("cmdstat_rl.all:"),
        "a lease alone needs no RL.ALL"
    );
}
