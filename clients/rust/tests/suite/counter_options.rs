//! RL.COUNTER's own options through the kit (COUNTALL, RENEW, ESCALATE), its window
//! past ten years, and what the kit refuses before sending.
//!
//! These calls send no NOW: the counter's TTL is set from the server's clock, so a test
//! shortens a TTL with PEXPIRE rather than stepping time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::common::{key, panic_of, scripts_backend, Server};
use crate::layer::calls;
use redis_rl_client::{
    connect, Block, DenyCache, FailurePolicy, Limit, Mode, RateLimitLayer, RateLimiter,
};

/// How far a PTTL read after a call may be below the TTL the call set.
const SLACK_MS: i64 = 1000;
/// The longest TTL ESCALATE sets: 2^53 − 1 ms.
const MAX_ESCALATED_MS: i64 = (1 << 53) - 1;
/// RL.COUNTER's longest window in ms (2^63 − 1 µs).
const LONGEST_MS: u64 = 9_223_372_036_854_775;

fn limiter(server: &Server) -> RateLimiter {
    crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

fn get(server: &Server, key: &str) -> Option<i64> {
    server.query(redis::cmd("GET").arg(key))
}

fn pttl(server: &Server, key: &str) -> i64 {
    server.query(redis::cmd("PTTL").arg(key))
}

fn shorten(server: &Server, key: &str) {
    let set: bool = server.query(redis::cmd("PEXPIRE").arg(key).arg(1000));
    assert!(set);
}

/// `ttl` was just set: the key's PTTL is at most it, and not much less.
fn assert_ttl_near(server: &Server, key: &str, ttl: i64) {
    let left = pttl(server, key);
    assert!(
        ttl - SLACK_MS < left && left <= ttl,
        "PTTL {left}, set {ttl}"
    );
}

/// A reply past 2^53 ms equals the module's; the scripts' is within 2 ms of it (Redis
/// hands a script the expiry as a double and takes its reply as one, each 1 ms off at
/// most there).
fn near(reply: i64, expected: i64) -> bool {
    let off = if scripts_backend() { 2 } else { 0 };
    reply.abs_diff(expected) <= off
}

#[tokio::test]
async fn count_all_counts_a_denied_call() {
    let server = Server::start();
    let rl = limiter(&server);
    let window = Duration::from_secs(60);
    let plain = Limit::counter("c", key("countall-plain"), 2, window);
    let counting = Limit::counter("c", key("countall"), 2, window).count_all();
    for limit in [&plain, &counting] {
        assert!(rl.check(limit, 1).await.allowed);
        assert!(rl.check(limit, 1).await.allowed);
        let denied = rl.check(limit, 1).await;
        assert_eq!((denied.allowed, denied.remaining), (false, 0));
        assert_eq!(denied.retry_after_ms, denied.reset_after_ms);
        assert!(denied.retry_after_ms > 60_000 - SLACK_MS);
    }
    assert_eq!(
        get(&server, &plain.key),
        Some(2),
        "a plain denial spends nothing"
    );
    assert_eq!(
        get(&server, &counting.key),
        Some(3),
        "COUNTALL counts the denial"
    );
    // A PEEK answers the same and writes nothing.
    assert!(!rl.peek(&counting, 1).await.allowed);
    assert_eq!(get(&server, &counting.key), Some(3));
    // A deny cache must not answer a denial the server would count.
    let cached = limiter(&server).deny_cache(DenyCache::new(10));
    for _ in 0..2 {
        assert!(!cached.check(&counting, 1).await.allowed);
    }
    assert_eq!(get(&server, &counting.key), Some(5));
}

#[tokio::test]
async fn renew_restarts_the_window() {
    let server = Server::start();
    let rl = limiter(&server);
    let window = Duration::from_secs(60);
    // Without RENEW the first hit's TTL stays.
    let plain = Limit::counter("c", key("renew-plain"), 2, window);
    rl.check(&plain, 1).await;
    shorten(&server, &plain.key);
    assert!(rl.check(&plain, 1).await.allowed);
    assert_ttl_near(&server, &plain.key, 1000);

    let renewed = Limit::counter("c", key("renew"), 2, window).renew();
    rl.check(&renewed, 1).await;
    shorten(&server, &renewed.key);
    let again = rl.check(&renewed, 1).await;
    assert_eq!((again.allowed, again.reset_after_ms), (true, 60_000));
    assert_ttl_near(&server, &renewed.key, 60_000);
    // Without COUNTALL a denial writes nothing, so it renews nothing.
    shorten(&server, &renewed.key);
    assert!(!rl.check(&renewed, 1).await.allowed);
    assert_ttl_near(&server, &renewed.key, 1000);
    assert_eq!(get(&server, &renewed.key), Some(2));

    // With COUNTALL a denial counts, and so renews: its wait is a whole window.
    let both = renewed.with_key(key("renew-countall")).count_all();
    rl.check(&both, 2).await;
    shorten(&server, &both.key);
    let denied = rl.check(&both, 1).await;
    assert_eq!(
        (denied.allowed, denied.retry_after_ms, denied.reset_after_ms),
        (false, 60_000, 60_000)
    );
    assert_ttl_near(&server, &both.key, 60_000);
    assert_eq!(get(&server, &both.key), Some(3));
}

#[tokio::test]
async fn escalate_doubles_the_wait_per_denial() {
    let server = Server::start();
    let rl = limiter(&server);
    let window_ms = 10_000;
    let limit = Limit::counter("c", key("escalate"), 1, Duration::from_millis(10_000)).escalate();
    let first = rl.check(&limit, 1).await;
    assert_eq!((first.allowed, first.reset_after_ms), (true, window_ms));
    // The count after the k-th denial is k + 1: window × 2^(count − limit − 1).
    for k in 1..=4 {
        let count = k + 1;
        let ttl = window_ms << (count - 1 - 1);
        let denied = rl.check(&limit, 1).await;
        assert_eq!(
            (denied.allowed, denied.retry_after_ms, denied.reset_after_ms),
            (false, ttl, ttl),
            "denial {k}"
        );
        assert_ttl_near(&server, &limit.key, ttl);
        assert_eq!(get(&server, &limit.key), Some(count));
    }
    // A PEEK tells the next doubling and writes nothing.
    assert_eq!(rl.peek(&limit, 1).await.retry_after_ms, window_ms << 4);
    assert_eq!(get(&server, &limit.key), Some(5));

    // The exponent is the count's, not the number of denials: COST 2 on a limit of 3.
    let costly = limit.with_key(key("escalate-cost"));
    let costly = Limit { limit: 3, ..costly };
    assert!(rl.check(&costly, 2).await.allowed);
    assert_eq!(rl.check(&costly, 2).await.retry_after_ms, window_ms); // count 4
    assert_eq!(rl.check(&costly, 2).await.retry_after_ms, window_ms << 2); // count 6

    // At most 2^53 − 1 ms: a window of 2^52 ms doubles past it on the second denial.
    let long =
        Limit::counter("c", key("escalate-cap"), 1, Duration::from_millis(1 << 52)).escalate();
    rl.check(&long, 1).await;
    assert_eq!(rl.check(&long, 1).await.retry_after_ms, 1 << 52);
    let capped = rl.check(&long, 1).await.retry_after_ms;
    assert!(near(capped, MAX_ESCALATED_MS), "{capped}");
}

#[tokio::test]
async fn a_counter_window_up_to_292_000_years() {
    let server = Server::start();
    let rl = limiter(&server);
    let longest = Limit::counter("c", key("longest"), 2, Duration::from_millis(LONGEST_MS));
    let first = rl.check(&longest, 1).await;
    assert!(first.allowed);
    assert!(
        near(first.reset_after_ms, LONGEST_MS as i64),
        "{}",
        first.reset_after_ms
    );
    let left = pttl(&server, &longest.key);
    assert!(LONGEST_MS as i64 - left < SLACK_MS, "PTTL {left}");
    // Every other limiter's window may last ten years.
    let ten_years = Duration::from_secs(315_360_000);
    let fixed = Limit::fixed("f", key("fixed-long"), 2, ten_years);
    assert!(limiter(&server).check(&fixed, 1).await.allowed);
    // (On the scripts backend both are EVALSHA.)
    let sent = (calls(&server, "rl.counter"), calls(&server, "rl.fixed"));

    // One ms more is refused before anything is sent.
    let over = Limit {
        window: Duration::from_millis(LONGEST_MS + 1),
        ..longest.with_key(key("longer"))
    };
    let rl = limiter(&server);
    let refused = panic_of(async move { rl.check(&over, 1).await })
        .await
        .expect("a window past 2^63 − 1 µs was sent");
    assert!(
        refused.contains("from 1 ms to 9223372036854775 ms (about 292,000 years) for RL.COUNTER"),
        "{refused}"
    );
    // And no longer.
    let rl = limiter(&server);
    let past = fixed.with_key(key("fixed-longer"));
    let past = Limit {
        window: ten_years + Duration::from_millis(1),
        ..past
    };
    let refused = panic_of(async move { rl.check(&past, 1).await })
        .await
        .expect("a fixed window past ten years was sent");
    assert!(
        refused.contains("from 1 ms to ten years (315360000 s) for RL.FIXED"),
        "{refused}"
    );
    let after = (calls(&server, "rl.counter"), calls(&server, "rl.fixed"));
    assert_eq!(after, sent);
    let keys: Vec<String> = server.query(redis::cmd("KEYS").arg("rl:{longer}*"));
    assert!(keys.is_empty());
    let keys: Vec<String> = server.query(redis::cmd("KEYS").arg("rl:{fixed-longer}*"));
    assert!(keys.is_empty());
}

#[tokio::test]
async fn invalid_combinations_are_refused_before_sending() {
    let server = Server::start();
    let s = Duration::from_secs(1);
    let counter = Limit::counter("c", key("bad"), 5, 60 * s);
    let fixed = Limit::fixed("f", key("bad-f"), 5, 60 * s);
    let refusal = |limits: Vec<Limit>, all: bool| {
        let rl = limiter(&server);
        async move {
            panic_of(async move {
                if all {
                    rl.check_all(&limits, 1, Mode::Spend).await
                } else {
                    rl.check(&limits[0], 1).await
                }
            })
            .await
            .expect("sent")
        }
    };
    let text = refusal(vec![counter.clone().renew().escalate()], false).await;
    assert!(
        text.contains("RENEW and ESCALATE exclude each other"),
        "{text}"
    );
    let text = refusal(vec![fixed.clone().count_all()], false).await;
    assert!(text.contains("RL.FIXED takes no COUNTALL"), "{text}");
    let text = refusal(vec![Limit::gcra("g", "k", 5, s).escalate()], false).await;
    assert!(text.contains("RL.GCRA takes no ESCALATE"), "{text}");
    // RL.ALL, even of one limit: a denied RL.ALL writes nothing.
    for (limits, word) in [
        (vec![counter.clone().count_all()], "COUNTALL"),
        (vec![fixed.clone(), counter.clone().renew()], "RENEW"),
        (vec![counter.clone().escalate(), fixed.clone()], "ESCALATE"),
    ] {
        let text = refusal(limits, true).await;
        let expected = format!("invalid limit 'c': {word} is not accepted in RL.ALL");
        assert!(text.contains(&expected), "{text}");
    }

    // The layer: several limits are one RL.ALL, and so is a lease beside a limit.
    let error = RateLimitLayer::try_new(limiter(&server), [counter.clone().renew(), fixed])
        .err()
        .expect("a renewing counter in the layer's RL.ALL");
    assert!(error
        .to_string()
        .contains("RENEW is not accepted in RL.ALL"));
    let layer = RateLimitLayer::new(limiter(&server), [counter.clone().escalate()]);
    let leased = catch_unwind(AssertUnwindSafe(|| {
        layer.concurrency(Limit::concurrency("l", "rl:inflight", 5, 30 * s))
    }));
    assert!(leased.is_err(), "an escalating counter beside a lease");
    let alone = RateLimitLayer::try_new(limiter(&server), [counter.block(Block::new(s))]);
    assert!(alone.is_ok());

    for command in ["rl.counter", "rl.all", "rl.fixed", "rl.gcra"] {
        assert_eq!(calls(&server, command), 0, "{command}");
    }
    let keys: u64 = server.query(&redis::cmd("DBSIZE"));
    assert_eq!(keys, 0);
}
