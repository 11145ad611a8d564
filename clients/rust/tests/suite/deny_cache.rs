//! The deny cache never denies what Redis would admit: each algorithm and RL.ALL walk a
//! stepped clock, and before every call the server is asked (PEEK, same NOW) what it
//! would say.

use std::time::Duration;

use crate::common::{key, FakeClock, Server};
use redis_rl_client::{connect, DenyCache, FailurePolicy, Limit, Mode, Source};

/// A small deterministic generator (no dependency): the steps and costs of the walk.
struct Steps(u64);

impl Steps {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[tokio::test]
async fn never_denies_what_redis_would_admit() {
    let server = Server::start();
    let window = Duration::from_secs(2);
    let cases: Vec<Vec<Limit>> = vec![
        vec![Limit::fixed("f", key("dc-fixed"), 5, window)],
        vec![Limit::slidelog("l", key("dc-log"), 5, window)],
        vec![Limit::slidecount("c", key("dc-count"), 5, window)],
        vec![Limit::gcra("g", key("dc-gcra"), 5, window).burst(3)],
        vec![
            Limit::gcra("g", format!("{}:g", key("dc-all")), 5, window).burst(3),
            Limit::slidelog("l", format!("{}:l", key("dc-all")), 8, window),
        ],
    ];
    for limits in cases {
        let clock = FakeClock::new();
        let cached =
            crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
                .clock(clock.as_fn())
                .deny_cache(DenyCache::new(100));
        let oracle =
            crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
                .clock(clock.as_fn());
        let mut steps = Steps(0x9e37_79b9_7f4a_7c15);
        let mut hits = 0;
        for _ in 0..300 {
            clock.advance_ms(steps.next(120) as i64);
            let cost = 1 + steps.next(2);
            let (truth, decision) = if limits.len() == 1 {
                (
                    oracle.peek(&limits[0], cost).await,
                    cached.check(&limits[0], cost).await,
                )
            } else {
                (
                    oracle.check_all(&limits, cost, Mode::Peek).await,
                    cached.check_all(&limits, cost, Mode::Spend).await,
                )
            };
            assert_eq!(truth.source, Source::Redis);
            if decision.source == Source::Cache {
                hits += 1;
                assert!(
                    !truth.allowed,
                    "{}: the cache denied what Redis admits",
                    limits[0].name
                );
                assert!(
                    decision.retry_after_ms <= truth.retry_after_ms,
                    "a cached wait is never longer"
                );
            } else {
                assert_eq!(decision.allowed, truth.allowed);
            }
        }
        assert!(
            hits > 20,
            "{}: the cache answered only {hits} times",
            limits[0].name
        );
    }
}

#[tokio::test]
async fn refund_and_reset_forget_the_keys() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .deny_cache(DenyCache::new(100));
    let limit = Limit::fixed("f", key("dc-refund"), 2, Duration::from_secs(10));
    assert!(rl.check(&limit, 2).await.allowed);
    assert_eq!(rl.check(&limit, 1).await.source, Source::Redis);
    assert_eq!(rl.check(&limit, 1).await.source, Source::Cache);
    assert!(rl.refund(&limit, 1).await.allowed);
    let after = rl.check(&limit, 1).await;
    assert_eq!((after.allowed, after.source), (true, Source::Redis));
    assert!(!rl.check(&limit, 1).await.allowed);
    assert_eq!(rl.check(&limit, 1).await.source, Source::Cache);
    rl.reset(&limit).await;
    assert!(rl.check(&limit, 1).await.allowed);
    // A cost that can never pass is not cached: every such call asks Redis.
    let never = rl.check(&limit, 3).await;
    assert!(never.never());
    assert_eq!(rl.check(&limit, 3).await.source, Source::Redis);
}
