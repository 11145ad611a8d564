//! Typed calls and their headers on a real server, pinned to exact replies by a fixed NOW.

use std::time::Duration;

use crate::common::{key, FakeClock, Server};
use redis_rl_client::{
    connect, ratelimit_headers, Decision, FailurePolicy, Limit, Mode, RateLimiter, Source,
};

fn limiter(server: &Server, clock: &FakeClock) -> RateLimiter {
    crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

fn numbers(d: &Decision) -> (bool, i64, i64, i64) {
    (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms)
}

fn header_list(d: &Decision) -> Vec<String> {
    ratelimit_headers(d, false)
        .into_iter()
        .map(|(n, v)| format!("{n}: {v}"))
        .collect()
}

struct Step {
    cost: u64,
    reply: (bool, i64, i64, i64),
    rate: &'static str,
    retry_after: Option<&'static str>,
    advance_ms: i64,
}

const fn step(
    cost: u64,
    reply: (bool, i64, i64, i64),
    rate: &'static str,
    retry: Option<&'static str>,
) -> Step {
    Step {
        cost,
        reply,
        rate,
        retry_after: retry,
        advance_ms: 0,
    }
}

// Per algorithm, calls at T0 (2024-06-17 07:29:09.8 UTC), what the module answers and
// what the headers say (the same numbers as the Python and Node kits' suites). The last
// step of each is a cost above the limit (or burst): denied for ever, so no Retry-After.
fn scenarios() -> Vec<(Limit, &'static str, Vec<Step>)> {
    vec![
        (
            Limit::fixed("fixed", "", 8, Duration::from_secs(10)),
            r#""fixed";q=8;w=10"#,
            vec![
                step(1, (true, 7, 0, 200), r#""fixed";r=7;t=1"#, None),
                step(7, (true, 0, 0, 200), r#""fixed";r=0;t=1"#, None),
                step(1, (false, 0, 200, 200), r#""fixed";r=0;t=1"#, Some("1")),
                step(9, (false, 0, -1, 200), r#""fixed";r=0;t=1"#, None),
            ],
        ),
        (
            Limit::slidelog("log", "", 3, Duration::from_secs(10)),
            r#""log";q=3;w=10"#,
            vec![
                step(1, (true, 2, 0, 10000), r#""log";r=2;t=10"#, None),
                step(2, (true, 0, 0, 10000), r#""log";r=0;t=10"#, None),
                Step {
                    advance_ms: 4001,
                    ..step(1, (false, 0, 5999, 5999), r#""log";r=0;t=6"#, Some("6"))
                },
                step(4, (false, 0, -1, 5999), r#""log";r=0;t=6"#, None),
            ],
        ),
        (
            Limit::slidecount("count", "", 100, Duration::from_secs(60)),
            r#""count";q=100;w=60"#,
            vec![
                step(1, (true, 99, 0, 50201), r#""count";r=99;t=51"#, None),
                step(99, (true, 0, 0, 109601), r#""count";r=0;t=110"#, None),
                step(
                    1,
                    (false, 0, 50201, 109601),
                    r#""count";r=0;t=110"#,
                    Some("51"),
                ),
                step(101, (false, 0, -1, 109601), r#""count";r=0;t=110"#, None),
            ],
        ),
        (
            Limit::gcra("gcra", "", 10, Duration::from_millis(1000)).burst(2),
            r#""gcra";q=10;w=1"#,
            vec![
                step(1, (true, 1, 0, 100), r#""gcra";r=1;t=1"#, None),
                step(1, (true, 0, 0, 200), r#""gcra";r=0;t=1"#, None),
                step(1, (false, 0, 100, 200), r#""gcra";r=0;t=1"#, Some("1")),
                step(3, (false, 0, -1, 200), r#""gcra";r=0;t=1"#, None),
            ],
        ),
    ]
}

#[tokio::test]
async fn replies_and_headers_per_algorithm() {
    let server = Server::start();
    for (template, policy, steps) in scenarios() {
        let clock = FakeClock::new();
        let rl = limiter(&server, &clock);
        let limit = template.with_key(key(&template.name));
        for step in steps {
            clock.advance_ms(step.advance_ms);
            let d = rl.check(&limit, step.cost).await;
            assert_eq!(d.source, Source::Redis);
            assert_eq!(numbers(&d), step.reply, "{} cost {}", limit.name, step.cost);
            let mut expected = vec![
                format!("RateLimit-Policy: {policy}"),
                format!("RateLimit: {}", step.rate),
            ];
            if let Some(retry) = step.retry_after {
                expected.push(format!("Retry-After: {retry}"));
            }
            assert_eq!(header_list(&d), expected);
        }
    }
}

#[tokio::test]
async fn never_admitted_is_explicit() {
    let server = Server::start();
    let clock = FakeClock::new();
    let d = limiter(&server, &clock)
        .check(
            &Limit::fixed("fixed", key("never"), 8, Duration::from_secs(10)),
            9,
        )
        .await;
    assert_eq!(
        (d.allowed, d.never(), d.retry_after_ms, d.retry_after()),
        (false, true, -1, None)
    );
    let names: Vec<_> = ratelimit_headers(&d, false)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["RateLimit-Policy", "RateLimit"]);
}

#[tokio::test]
async fn legacy_headers() {
    let server = Server::start();
    let clock = FakeClock::new();
    let d = limiter(&server, &clock)
        .check(
            &Limit::fixed("fixed", key("legacy"), 8, Duration::from_secs(10)),
            3,
        )
        .await;
    let headers = ratelimit_headers(&d, true);
    assert_eq!(
        headers[2..],
        [
            ("X-RateLimit-Limit", "8".to_string()),
            ("X-RateLimit-Remaining", "5".to_string()),
            ("X-RateLimit-Reset", "1".to_string())
        ]
    );
}

#[tokio::test]
async fn peek_refund_reset() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    let log = Limit::slidelog("log", key("peek"), 2, Duration::from_secs(10));
    for _ in 0..3 {
        assert_eq!(rl.peek(&log, 1).await.remaining, 1);
    }
    let cardinality: u64 = server.query(redis::cmd("ZCARD").arg(&log.key));
    assert_eq!(cardinality, 0, "PEEK wrote nothing");

    let fixed = Limit::fixed("fixed", key("refund"), 8, Duration::from_secs(10));
    assert_eq!(rl.check(&fixed, 8).await.remaining, 0);
    assert!(!rl.check(&fixed, 1).await.allowed);
    let refunded = rl.refund(&fixed, 3).await;
    // REFUND then answers as PEEK with the same cost: 3 are back, a cost of 3 leaves 0.
    assert_eq!((refunded.allowed, refunded.remaining), (true, 0));
    assert_eq!(rl.call(&fixed, 1, Mode::Peek).await.remaining, 2);
    let reset = rl.reset(&fixed).await;
    assert_eq!((reset.allowed, reset.remaining), (true, 7));
    assert_eq!(
        rl.check(&fixed, 8).await.remaining,
        0,
        "the whole budget is back after RESET"
    );
}

#[tokio::test]
async fn all_or_nothing() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    let burst = Limit::gcra(
        "burst",
        format!("{}:burst", key("all")),
        10,
        Duration::from_secs(1),
    )
    .burst(2);
    let window = Limit::fixed(
        "window",
        format!("{}:window", key("all")),
        3,
        Duration::from_secs(10),
    );
    let limits = [burst.clone(), window.clone()];
    let first = rl.check_all(&limits, 1, Mode::Spend).await;
    assert!(first.allowed);
    assert_eq!(first.parts.len(), 2);
    assert_eq!(first.parts[0].limit.as_ref(), Some(&burst));
    assert_eq!((first.parts[1].remaining, first.remaining), (2, 1));
    assert!(rl.check_all(&limits, 1, Mode::Spend).await.allowed);
    let denied = rl.check_all(&limits, 1, Mode::Spend).await;
    assert!(!denied.allowed);
    assert_eq!(
        ratelimit_headers(&denied, true),
        [
            (
                "RateLimit-Policy",
                r#""burst";q=10;w=1, "window";q=3;w=10"#.to_string()
            ),
            (
                "RateLimit",
                r#""burst";r=0;t=1, "window";r=0;t=1"#.to_string()
            ),
            ("Retry-After", "1".to_string()),
            // The burst binds: its remaining counts down from 2, not from the rate's 10.
            ("X-RateLimit-Limit", "2".to_string()),
            ("X-RateLimit-Remaining", "0".to_string()),
            ("X-RateLimit-Reset", "1".to_string()),
        ]
    );
    // The burst denied, so the window spent nothing: one left, as after two calls.
    assert_eq!(rl.peek(&window, 1).await.remaining, 0);
    assert_eq!(
        rl.peek(&window, 1).await.remaining,
        rl.peek(&window, 1).await.remaining
    );
    let count: i64 = server.query(redis::cmd("GET").arg(format!("{}:1718609340", window.key)));
    assert_eq!(count, 2, "a denied RL.ALL spends on no limit");
    // Per-limit costs, and REFUND through RL.ALL.
    clock.advance_ms(10_000);
    let costly = rl.check_all(&limits, &[1, 3], Mode::Spend).await;
    assert_eq!((costly.allowed, costly.parts[1].remaining), (true, 0));
    let refunded = rl.check_all(&limits, &[1, 3], Mode::Refund).await;
    assert!(refunded.allowed);
    assert_eq!(
        rl.peek(&window, 1).await.remaining,
        2,
        "REFUND gave the window's 3 back"
    );
}

#[tokio::test]
async fn pseudonym() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock);
    // NOW is always sent, so the UTC day is the clock's: 2024-06-17. The expected values
    // are HMAC-SHA256("some-test-secret", identity + "|" + day), first 24 hex digits.
    assert_eq!(
        rl.pseudonym("::ffff:192.0.2.1", None, None).await.unwrap(),
        "e3c38906d01329af5fe8e09c"
    );
    assert_eq!(
        rl.pseudonym("user-42", Some("search"), None).await.unwrap(),
        "129db315a1ebeba47b4c2c6b:search"
    );
    assert_eq!(
        rl.pseudonym("2001:db8:1:2:aaaa::1", None, Some(64))
            .await
            .unwrap(),
        "3da54fd9eef5c7acaa1f56dd"
    );
    clock.advance_ms(86_400_000);
    assert_eq!(
        rl.pseudonym("192.0.2.1", None, None).await.unwrap(),
        "a6ff49682a4233a9b9ce71fc"
    );
}

#[tokio::test]
async fn server_clock_without_now() {
    // Without a clock the server's clock decides (no NOW is sent).
    let server = Server::start();
    let rl = crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed);
    let limit = Limit::slidelog("log", key("server-clock"), 1, Duration::from_secs(60));
    assert!(rl.check(&limit, 1).await.allowed);
    let denied = rl.check(&limit, 1).await;
    assert!(!denied.allowed);
    assert!(denied.retry_after_ms > 55_000 && denied.retry_after_ms <= 60_000);
}
