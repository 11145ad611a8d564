//! RL.COUNTER: a fixed window that starts at a key's first hit (one counter at the key
//! itself, its TTL the window), alone, in RL.ALL and behind the tower layer.
//!
//! The window's end is the key's expiry on the server clock, so NOW here is the real
//! time, BEHIND_MS behind the server: a window's end is then reported BEHIND_MS to
//! BEHIND_MS + SLACK_MS late, never early, and the rounded-up header seconds are fixed
//! as long as the server runs the first hit within 800 ms of the clock's reading.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::{key, FakeClock, Server};
use crate::layer::{app, calls, header, send, ApiKey};
use axum::body::Body;
use http::{Request, StatusCode};
use redis_rl_client::{
    connect, ratelimit_headers, Block, Decision, FailurePolicy, Limit, Mode, RateLimitLayer,
    RateLimiter,
};

const SLACK_MS: i64 = 1000;
const BEHIND_MS: i64 = 200;

fn real_clock() -> FakeClock {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    FakeClock::at(now.as_micros() as i64 - BEHIND_MS * 1000)
}

fn limiter(server: &Server, clock: &FakeClock) -> RateLimiter {
    crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

fn reply(d: &Decision) -> (bool, i64, i64) {
    (d.allowed, d.remaining, d.retry_after_ms)
}

fn headers(d: &Decision) -> Vec<(&'static str, String)> {
    ratelimit_headers(d, true)
}

fn owned(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|&(n, v)| (n, v.to_string())).collect()
}

fn get(server: &Server, key: &str) -> Option<i64> {
    server.query(redis::cmd("GET").arg(key))
}

fn pttl(server: &Server, key: &str) -> i64 {
    server.query(redis::cmd("PTTL").arg(key))
}

#[tokio::test]
async fn the_window_starts_at_the_first_hit_and_ends_when_the_key_expires() {
    let server = Server::start();
    let clock = real_clock();
    let rl = limiter(&server, &clock);
    let limit = Limit::counter("c", key("counter-window"), 8, Duration::from_secs(10));

    let first = rl.check(&limit, 1).await;
    // A whole window from the first hit (an aligned window would end sooner).
    assert_eq!(
        (reply(&first), first.reset_after_ms),
        ((true, 7, 0), 10_000)
    );
    assert_eq!(
        headers(&first),
        owned(&[
            ("RateLimit-Policy", r#""c";q=8;w=10"#),
            ("RateLimit", r#""c";r=7;t=10"#),
            ("X-RateLimit-Limit", "8"),
            ("X-RateLimit-Remaining", "7"),
            ("X-RateLimit-Reset", "10"),
        ])
    );
    // The counter is the key itself: no `:<window>` key beside it.
    let keys: Vec<String> = server.query(redis::cmd("KEYS").arg(format!("{}*", limit.key)));
    assert_eq!(keys, [limit.key.as_str()]);
    assert_eq!(get(&server, &limit.key), Some(1));
    let ttl = pttl(&server, &limit.key);
    assert!(10_000 - SLACK_MS < ttl && ttl <= 10_000, "PTTL {ttl}");
    assert_eq!(calls(&server, "rl.counter"), 1);

    let full = rl.check(&limit, 7).await;
    assert_eq!(reply(&full), (true, 0, 0));
    // Now the end is the key's expiry, read from the server: NOW is behind it.
    let late = 10_000 + BEHIND_MS;
    assert!(
        (late..=late + SLACK_MS).contains(&full.reset_after_ms),
        "{}",
        full.reset_after_ms
    );

    clock.advance_ms(4_000);
    let denied = rl.check(&limit, 1).await;
    assert_eq!((denied.allowed, denied.remaining), (false, 0));
    // The wait is the time to the key's expiry: waiting as told is admitted.
    assert_eq!(denied.retry_after_ms, denied.reset_after_ms);
    assert!(
        (6_000 + BEHIND_MS..=6_000 + BEHIND_MS + SLACK_MS).contains(&denied.retry_after_ms),
        "{}",
        denied.retry_after_ms
    );
    assert_eq!(
        headers(&denied),
        owned(&[
            ("RateLimit-Policy", r#""c";q=8;w=10"#),
            ("RateLimit", r#""c";r=0;t=7"#),
            ("Retry-After", "7"),
            ("X-RateLimit-Limit", "8"),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", "7"),
        ])
    );
    assert_eq!(get(&server, &limit.key), Some(8), "a denial spends nothing");
    assert!(rl.check(&limit, 9).await.never());

    // NOW past the key's expiry: that window ended (even if the server has not removed
    // the key yet), and the next hit opens a new, whole one.
    clock.advance_ms(denied.retry_after_ms);
    let peek = rl.peek(&limit, 8).await;
    assert_eq!(reply(&peek), (true, 0, 0));
    let again = rl.check(&limit, 2).await;
    assert_eq!(
        (reply(&again), again.reset_after_ms),
        ((true, 6, 0), 10_000)
    );
    assert_eq!(get(&server, &limit.key), Some(2));
    let ttl = pttl(&server, &limit.key);
    assert!(10_000 - SLACK_MS < ttl && ttl <= 10_000, "PTTL {ttl}");
}

#[tokio::test]
async fn refund_and_reset() {
    let server = Server::start();
    let clock = real_clock();
    let rl = limiter(&server, &clock);
    let limit = Limit::counter("c", key("counter-modes"), 3, Duration::from_secs(60));
    assert_eq!(rl.check(&limit, 3).await.remaining, 0);
    let refunded = rl.refund(&limit, 2).await;
    // REFUND answers as PEEK with the same cost: 2 are back, a cost of 2 leaves 0.
    assert_eq!(reply(&refunded), (true, 0, 0));
    assert_eq!(get(&server, &limit.key), Some(1));
    let reset = rl.call(&limit, 1, Mode::Reset).await;
    assert_eq!(reply(&reset), (true, 2, 0));
    assert_eq!(get(&server, &limit.key), None, "RESET deletes the counter");
}

#[tokio::test]
async fn in_rl_all_with_a_fixed_window() {
    let server = Server::start();
    let clock = real_clock();
    let rl = limiter(&server, &clock);
    let base = key("counter-all");
    let counter = Limit::counter("c", format!("{base}:c"), 2, Duration::from_secs(60));
    let fixed = Limit::fixed("f", format!("{base}:f"), 5, Duration::from_secs(60));
    let limits = [counter.clone(), fixed];
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(rl.check_all(&limits, 1, Mode::Spend).await);
    }
    let parts: Vec<(bool, Vec<i64>)> = seen
        .iter()
        .map(|d| (d.allowed, d.parts.iter().map(|p| p.remaining).collect()))
        .collect();
    // RL.ALL's denial: what each would leave.
    assert_eq!(
        parts,
        [(true, vec![1, 4]), (true, vec![0, 3]), (false, vec![0, 2])]
    );
    let denied = &seen[2];
    let deniers: Vec<&str> = denied
        .parts
        .iter()
        .filter(|p| !p.allowed)
        .map(|p| p.limit.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(deniers, ["c"]);
    let late = 60_000 + BEHIND_MS;
    assert!(
        (late..=late + SLACK_MS).contains(&denied.retry_after_ms),
        "{}",
        denied.retry_after_ms
    );
    // The legacy headers name the denying counter.
    assert_eq!(
        headers(denied)[3..],
        owned(&[
            ("X-RateLimit-Limit", "2"),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", "61"),
        ])
    );
    assert_eq!(get(&server, &counter.key), Some(2));
    let ttl = pttl(&server, &counter.key);
    assert!(60_000 - SLACK_MS < ttl && ttl <= 60_000, "PTTL {ttl}");
    assert_eq!(calls(&server, "rl.all"), 3);
}

#[tokio::test]
async fn the_layer_answers_429_with_the_counters_headers() {
    let server = Server::start();
    let clock = real_clock();
    let layer = RateLimitLayer::new(
        limiter(&server, &clock),
        [Limit::counter(
            "c",
            "rl:counter-layer",
            2,
            Duration::from_secs(60),
        )],
    )
    .key_extractor(ApiKey)
    .pseudonymize(false)
    .legacy_headers(true);
    let app = app(layer);
    let request = || {
        Request::builder()
            .uri("/")
            .header("x-api-key", "key-1")
            .body(Body::empty())
            .unwrap()
    };
    let (status, h, _) = send(&app, request()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&h, "ratelimit-policy"), Some(r#""c";q=2;w=60"#));
    assert_eq!(header(&h, "ratelimit"), Some(r#""c";r=1;t=60"#));
    assert_eq!(header(&h, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&h, "x-ratelimit-remaining"), Some("1"));
    assert_eq!(header(&h, "x-ratelimit-reset"), Some("60"));
    assert_eq!(send(&app, request()).await.0, StatusCode::OK);

    let (status, h, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body, r#"{"error":"rate_limited"}"#);
    // The wait to the key's expiry, a little more than the window (NOW is behind).
    assert_eq!(header(&h, "retry-after"), Some("61"));
    assert_eq!(header(&h, "ratelimit"), Some(r#""c";r=0;t=61"#));
    assert_eq!(header(&h, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&h, "x-ratelimit-reset"), Some("61"));
    // One counter at the limit's key and the caller's, spent twice.
    assert_eq!(get(&server, "rl:counter-layer:{key-1}"), Some(2));
    assert_eq!(calls(&server, "rl.counter"), 3);

    // Past the key's expiry a new window opens.
    clock.advance_ms(61_500);
    let (status, h, _) = send(&app, request()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(header(&h, "ratelimit"), Some(r#""c";r=1;t=60"#));
}

#[tokio::test]
async fn block_on_a_counter() {
    let server = Server::start();
    let clock = real_clock();
    let rl = limiter(&server, &clock);
    let limit = Limit::counter("c", key("counter-block"), 2, Duration::from_secs(10))
        .block(Block::new(Duration::from_secs(30)));
    let block_key = format!("{}:block", limit.key);
    assert!(rl.check(&limit, 1).await.allowed);
    assert!(rl.check(&limit, 1).await.allowed);
    // The denial starts the block: its wait is the block's, and the counter is cleared.
    let denied = rl.check(&limit, 1).await;
    assert_eq!(reply(&denied), (false, 0, 30_000));
    assert_eq!(get(&server, &limit.key), None);
    let boxed: bool = server.query(redis::cmd("EXISTS").arg(&block_key));
    assert!(boxed);

    // Past the counter's window the block still holds, counted down on NOW.
    clock.advance_ms(15_000);
    let held = rl.check(&limit, 1).await;
    assert_eq!(reply(&held), (false, 0, 15_000));
    assert_eq!(headers(&held)[2], ("Retry-After", "15".to_string()));

    // Once it ends the budget is full: a new window from this hit.
    clock.advance_ms(15_000);
    let back = rl.check(&limit, 1).await;
    assert_eq!((reply(&back), back.reset_after_ms), ((true, 1, 0), 10_000));

    // IMPOSE starts one whatever the counter says; RESET lifts it.
    assert_eq!(reply(&rl.impose(&limit).await), (false, 0, 30_000));
    assert!(!rl.check(&limit, 1).await.allowed);
    assert_eq!(reply(&rl.reset(&limit).await), (true, 1, 0));
    let boxed: bool = server.query(redis::cmd("EXISTS").arg(&block_key));
    assert!(!boxed);

    // EXTEND: a call while blocked restarts the block. (A clock back at the server's:
    // the one above is 30 s ahead of it now, past any expiry the server sets.)
    let clock = real_clock();
    let rl = limiter(&server, &clock);
    let extended = limit
        .with_key(key("counter-extend"))
        .block(Block::new(Duration::from_secs(30)).extend());
    rl.check(&extended, 2).await;
    assert_eq!(reply(&rl.check(&extended, 1).await), (false, 0, 30_000));
    clock.advance_ms(10_000);
    assert_eq!(reply(&rl.check(&extended, 1).await), (false, 0, 30_000));
}
