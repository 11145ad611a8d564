//! RL.SLIDEWINDOW (Symfony's sliding window, anchored at the first admitted call) and
//! RL.TOKENBUCKET (Symfony's token bucket, refilled in steps) through the kit, on the
//! suite's backend; their decisions depend on NOW only, so the clock is stepped.

use std::time::Duration;

use crate::common::{key, panic_of, rate_limiter, FakeClock, Server, T0};
use redis_rl_client::{connect, Backend, Decision, Error, FailurePolicy, Limit, Mode, RateLimiter};

const S: Duration = Duration::from_secs(1);

fn limiter(server: &Server, clock: &FakeClock, backend: Backend) -> RateLimiter {
    rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .backend(backend)
        .clock(clock.as_fn())
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

fn reply(d: &Decision) -> (bool, i64, i64, i64) {
    (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms)
}

fn stored(server: &Server, key: &str) -> Option<String> {
    server.query(redis::cmd("GET").arg(key))
}

fn reason(limit: &Limit) -> String {
    match limit.validate() {
        Err(Error::InvalidLimit { reason, .. }) => reason,
        other => panic!("{limit:?} was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    let bucket = |refill| Limit::token_bucket("b", "rl:{bad}:b", 10, S, refill);
    assert!(reason(&bucket(0)).contains("the refill must be from 1 to"));
    assert!(reason(&bucket(1_000_000_000_000_001)).contains("the refill must be from 1 to"));
    assert!(bucket(1_000_000_000_000_000).validate().is_ok());
    let empty = Limit::token_bucket("b", "k", 0, S, 1);
    assert!(reason(&empty).contains("from 1 to 1000000000000000 for RL.TOKENBUCKET"));
    let window = Limit::slide_window("w", "k", 1, Duration::ZERO);
    assert!(reason(&window).contains("the window must be"));
    let refilled = Limit {
        refill: Some(2),
        ..Limit::gcra("g", "k", 5, S)
    };
    assert!(reason(&refilled).contains("RL.GCRA takes no refill"));
    let burst = Limit::slide_window("w", "k", 5, S).burst(2);
    assert!(reason(&burst).contains("RL.SLIDEWINDOW takes no burst"));
    // A call with one panics (a bug in the app, not a Redis failure) and sends nothing.
    let server = Server::start();
    let rl = limiter(&server, &FakeClock::new(), Backend::Auto);
    let sent = panic_of(async move {
        rl.check_all(&[bucket(0)], 1, Mode::Spend).await;
    })
    .await
    .expect("REFILL 0 was sent");
    assert!(sent.contains("the refill must be from 1 to"), "{sent}");
    let calls: String = server.query(redis::cmd("INFO").arg("commandstats"));
    assert!(
        !calls.contains("cmdstat_rl.") && !calls.contains("cmdstat_evalsha"),
        "{calls}"
    );
}

/// docs/commands.md's example, Symfony's own test: 10 per 12 s; 8, then 15 s later (a
/// quarter into the next window, 8 × 9 / 12 = 6 still counted) 1 more, 5 more refused.
#[tokio::test]
async fn slide_window_weighs_the_previous_window() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock, Backend::Auto);
    let k = key("slide-window");
    let limit = Limit::slide_window("w", &k, 10, 12 * S);
    assert_eq!(reply(&rl.check(&limit, 8).await), (true, 2, 0, 24_000));
    assert_eq!(
        stored(&server, &k),
        Some(format!("{}:8:0", T0 + 12_000_000))
    );
    clock.advance_ms(15_000);
    assert_eq!(reply(&rl.check(&limit, 1).await), (true, 3, 0, 21_000));
    assert_eq!(reply(&rl.check(&limit, 5).await), (false, 3, 1501, 21_000));
    assert_eq!(
        stored(&server, &k),
        Some(format!("{}:1:8", T0 + 24_000_000))
    );
    // REFUND, then RESET, each answering as a PEEK of its cost.
    assert_eq!(reply(&rl.refund(&limit, 1).await), (true, 3, 0, 21_000));
    assert_eq!(
        stored(&server, &k),
        Some(format!("{}:0:8", T0 + 24_000_000))
    );
    assert_eq!(reply(&rl.reset(&limit).await), (true, 9, 0, 0));
    assert_eq!(stored(&server, &k), None);
}

/// Symfony's testBucketRefilledWithStrictFrequency: 100 tokens back at each 15 s step.
#[tokio::test]
async fn token_bucket_refills_in_steps() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock, Backend::Auto);
    let k = key("token-bucket");
    let limit = Limit::token_bucket("b", &k, 1000, 15 * S, 100);
    assert_eq!(reply(&rl.check(&limit, 300).await), (true, 700, 0, 45_000));
    assert_eq!(stored(&server, &k), Some(format!("700:{T0}")));
    let mut seen = Vec::new();
    for _ in 0..20 {
        seen.push(rl.check(&limit, 1).await.remaining);
        clock.advance_ms(4000);
    }
    assert_eq!(
        seen,
        [
            699, 698, 697, 696, 795, 794, 793, 792, 891, 890, 889, 888, 987, 986, 985, 999, 998,
            997, 996, 999
        ]
    );
    // Emptied, it waits for the next step, not for a smooth trickle.
    assert!(rl.check(&limit, 999).await.allowed);
    let denied = rl.check(&limit, 1).await;
    assert_eq!(
        (denied.allowed, denied.retry_after_ms),
        (false, 15_000 - 4000)
    );
    assert_eq!(rl.refund(&limit, 5).await.remaining, 0);
    assert_eq!(rl.peek(&limit, 1).await.remaining, 4);
    // A cost above the capacity is the module's "never", not an error.
    assert!(rl.check(&limit, 1001).await.never());
}

#[tokio::test]
async fn rl_all_spends_on_both_or_neither() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock, Backend::Auto);
    let window = Limit::slide_window("w", format!("{}:w", key("all")), 6, 10 * S);
    let bucket = Limit::token_bucket("b", format!("{}:b", key("all")), 4, 10 * S, 2);
    let limits = [window.clone(), bucket.clone()];
    let mut admitted = Vec::new();
    for _ in 0..3 {
        admitted.push(rl.check_all(&limits, 2, Mode::Spend).await.allowed);
    }
    assert_eq!(admitted, [true, true, false]);
    // The bucket refused the third: the window did not spend either.
    assert_eq!(
        stored(&server, &window.key),
        Some(format!("{}:4:0", T0 + 10_000_000))
    );
    let denied = rl.check_all(&limits, 2, Mode::Spend).await;
    let parts: Vec<_> = denied.parts.iter().map(reply).collect();
    assert_eq!(parts, [(true, 0, 0, 20_000), (false, 0, 10_000, 20_000)]);
    // REFILL 2 inside RL.ALL: one step brings two tokens back, not one. (The window's
    // end is included: it still counts its 4.)
    clock.advance_ms(10_000);
    let stepped = rl.check_all(&limits, &[1, 2], Mode::Spend).await;
    let remaining: Vec<_> = stepped.parts.iter().map(|p| p.remaining).collect();
    assert_eq!((stepped.allowed, remaining), (true, vec![1, 0]));
    assert_eq!(
        stored(&server, &bucket.key),
        Some(format!("0:{}", T0 + 10_000_000))
    );
}

async fn answers(server: &Server, backend: Backend, limit: &Limit) -> Vec<(bool, i64, i64, i64)> {
    let clock = FakeClock::new();
    let rl = limiter(server, &clock, backend);
    let mut seen = Vec::new();
    for (advance_ms, cost) in [
        (0, 2),
        (0, 1),
        (1, 9),
        (9_999, 2),
        (1, 2),
        (5_000, 3),
        (12_000, 1),
        (30_000, 4),
    ] {
        clock.advance_ms(advance_ms);
        seen.push(reply(&rl.check(limit, cost).await));
    }
    rl.reset(limit).await;
    seen
}

#[tokio::test]
async fn the_scripts_answer_as_the_module() {
    if crate::common::scripts_backend() {
        println!("SKIPPED: the_scripts_answer_as_the_module: needs a server with the module (the suite runs without it)");
        return;
    }
    let server = Server::start();
    for limit in [
        Limit::slide_window("w", key("parity-w"), 10, 12 * S),
        Limit::token_bucket("b", key("parity-b"), 3, 10 * S, 2),
    ] {
        let native = answers(&server, Backend::Module, &limit).await;
        let scripted = answers(&server, Backend::Scripts, &limit).await;
        assert_eq!(scripted, native, "{:?}", limit.algorithm);
        assert!(native.iter().any(|a| !a.0), "the steps reach a denial");
    }
}
