//! `top()`: RL.TOP on one server, and merged over a real cluster's primaries.

use std::time::{Duration, Instant};

use crate::common::{key, rate_limiter, scripts_backend, Cluster, FakeClock, Server, T0};
use redis_rl_client::{
    connect, connect_cluster, Backend, Error, FailurePolicy, Limit, RateLimiter, TopEntry, TopQuery,
};

const MINUTE: Duration = Duration::from_secs(60);

fn limiter(conn: redis_rl_client::Connection, clock: &FakeClock) -> RateLimiter {
    rate_limiter(conn, FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

/// `times` spends of 1 at the clock's instant.
async fn hits(rl: &RateLimiter, limit: &Limit, times: usize) {
    for _ in 0..times {
        rl.check(limit, 1).await;
    }
}

fn entry(key: &str, denied: u64, admitted: u64, last_denied_ms: i64, algorithm: &str) -> TopEntry {
    TopEntry {
        key: key.into(),
        denied,
        admitted,
        error: 0,
        last_denied_ms,
        command: format!("rl.{algorithm}"),
        algorithm: algorithm.into(),
    }
}

async fn top(rl: &RateLimiter, query: TopQuery) -> Vec<TopEntry> {
    match rl.top(&query).await {
        Ok(entries) => entries,
        Err(error) => panic!("top({query:?}): {error}"),
    }
}

fn keys(entries: &[TopEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.key.as_str()).collect()
}

#[tokio::test]
async fn one_server_answers_exact_entries_worst_first_with_count_algorithm_and_reset() {
    let server = Server::start();
    if scripts_backend() {
        println!("SKIPPED: RL.TOP needs a server with the module (the suite runs without it)");
        return;
    }
    let clock = FakeClock::new();
    let rl = limiter(connect(&server.url()).unwrap(), &clock);
    let heavy = Limit::fixed("heavy", key("heavy"), 1, MINUTE);
    let light = Limit::fixed("light", key("light"), 1, MINUTE);
    let gcra = Limit::gcra("g", key("g"), 1, MINUTE);
    // Limit 1: the first call of a window is admitted, every other one denied.
    hits(&rl, &heavy, 6).await;
    hits(&rl, &light, 2).await;
    hits(&rl, &gcra, 3).await;
    clock.advance_ms(60_000); // heavy's next window: one more admitted, one denied
    hits(&rl, &heavy, 2).await;

    let t0_ms = T0 / 1000;
    let all = vec![
        entry(&heavy.key, 6, 1, t0_ms + 60_000, "fixed"),
        entry(&gcra.key, 2, 0, t0_ms, "gcra"),
        entry(&light.key, 1, 0, t0_ms, "fixed"),
    ];
    assert_eq!(top(&rl, TopQuery::new()).await, all);
    assert_eq!(top(&rl, TopQuery::new().count(2)).await, all[..2]);
    assert_eq!(top(&rl, TopQuery::new().count(1)).await, all[..1]);
    assert_eq!(
        top(&rl, TopQuery::new().algorithm("gcra")).await,
        [all[1].clone()]
    );
    assert_eq!(
        top(&rl, TopQuery::new().algorithm("FIXED")).await,
        [all[0].clone(), all[2].clone()]
    );
    assert_eq!(
        top(&rl, TopQuery::new().count(1).algorithm("fixed")).await,
        all[..1]
    );
    assert_eq!(top(&rl, TopQuery::new().algorithm("slidelog")).await, []);
    // RESP3 replies maps: the same entries.
    let resp3 = limiter(
        connect(&format!("{}/?protocol=resp3", server.url())).unwrap(),
        &clock,
    );
    assert_eq!(top(&resp3, TopQuery::new()).await, all);

    assert_eq!(top(&rl, TopQuery::new().reset(true)).await, all);
    assert_eq!(top(&rl, TopQuery::new()).await, []);
}

#[tokio::test]
async fn mistakes_are_returned() {
    let server = Server::start();
    if scripts_backend() {
        println!("SKIPPED: RL.TOP needs a server with the module (the suite runs without it)");
        return;
    }
    let rl = limiter(connect(&server.url()).unwrap(), &FakeClock::new());
    match rl.top(&TopQuery::new().count(0)).await {
        Err(Error::InvalidCall(why)) => assert_eq!(why, "RL.TOP's count must be at least 1"),
        other => panic!("count 0: {other:?}"),
    }
    match rl.top(&TopQuery::new().algorithm("nope")).await {
        Err(Error::Redis(error)) => assert!(
            error
                .to_string()
                .contains("RL.TOP: unknown algorithm 'nope'"),
            "{error}"
        ),
        other => panic!("algorithm nope: {other:?}"),
    }
}

#[tokio::test]
async fn the_scripts_backend_says_the_module_is_needed() {
    let server = Server::start();
    let scripts =
        limiter(connect(&server.url()).unwrap(), &FakeClock::new()).backend(Backend::Scripts);
    match scripts.top(&TopQuery::new()).await {
        Err(error @ Error::ModuleRequired { .. }) => assert_eq!(
            error.to_string(),
            "RL.TOP needs the redis-rl module: this limiter is on Backend::Scripts, and the scripts keep no denial summary (the module does, in each server): load the module and use Backend::Auto or Backend::Module"
        ),
        other => panic!("scripts: {other:?}"),
    }
    let info: String = server.query(redis::cmd("INFO").arg("commandstats"));
    assert!(
        !info.contains("cmdstat_rl.top:"),
        "nothing was sent: {info}"
    );

    // Auto on a server without the module: the server's refusal, with how to load it.
    let bare = Server::bare();
    let auto = limiter(connect(&bare.url()).unwrap(), &FakeClock::new());
    match auto.top(&TopQuery::new()).await {
        Err(error @ Error::ModuleRequired { .. }) => {
            let text = error.to_string();
            assert!(
                text.starts_with("RL.TOP needs the redis-rl module: the server has no RL.TOP (")
                    && text.contains("unknown command 'RL.TOP'")
                    && text.ends_with("add `loadmodule /path/to/libredis_rl.so` to its redis.conf, or run MODULE LOAD"),
                "{text}"
            );
        }
        other => panic!("bare: {other:?}"),
    }
}

#[tokio::test]
async fn a_cluster_answers_every_primary_merged_worst_first() {
    if scripts_backend() {
        println!("SKIPPED: RL.TOP needs a cluster with the module (the suite runs without it)");
        return;
    }
    let cluster = Cluster::start();
    let clock = FakeClock::new();
    let rl = limiter(connect_cluster(cluster.urls()).unwrap(), &clock);
    // The cluster connection learns the slot map in the background: wait for it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while rl.top(&TopQuery::new().reset(true)).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the cluster client never became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Twelve hash tags, so twelve slots over the three primaries; key i is denied i + 1 times.
    for i in 0..12 {
        let limit = Limit::fixed("t", format!("{{t{i}}}:rl"), 1, MINUTE);
        hits(&rl, &limit, i + 2).await;
    }
    hits(&rl, &Limit::gcra("g", "{tg}:rl", 1, MINUTE), 4).await;

    let per_node: Vec<usize> = cluster
        .nodes
        .iter()
        .map(|node| {
            let rows: Vec<redis::Value> = node.query(redis::cmd("RL.TOP").arg("COUNT").arg(100));
            rows.len()
        })
        .collect();
    assert_eq!(
        per_node.iter().sum::<usize>(),
        13,
        "each key on one primary"
    );
    assert!(
        !per_node.contains(&0),
        "the keys are on all three primaries: {per_node:?}"
    );

    let t0_ms = T0 / 1000;
    let merged = top(&rl, TopQuery::new().count(5)).await;
    let counts: Vec<(&str, u64)> = merged.iter().map(|e| (e.key.as_str(), e.denied)).collect();
    assert_eq!(
        counts,
        [
            ("{t11}:rl", 12),
            ("{t10}:rl", 11),
            ("{t9}:rl", 10),
            ("{t8}:rl", 9),
            ("{t7}:rl", 8)
        ]
    );
    assert_eq!(merged[0], entry("{t11}:rl", 12, 0, t0_ms, "fixed"));
    // Equal counts come by key: {t2}:rl and {tg}:rl were both denied 3 times.
    let all = top(&rl, TopQuery::new().count(100)).await;
    assert_eq!(
        keys(&all[9..]),
        ["{t2}:rl", "{tg}:rl", "{t1}:rl", "{t0}:rl"]
    );
    assert_eq!(
        top(&rl, TopQuery::new().algorithm("gcra")).await,
        [entry("{tg}:rl", 3, 0, t0_ms, "gcra")]
    );
    assert_eq!(
        keys(&top(&rl, TopQuery::new().count(2).algorithm("fixed")).await),
        ["{t11}:rl", "{t10}:rl"]
    );

    assert_eq!(
        top(&rl, TopQuery::new().count(100).reset(true)).await.len(),
        13
    );
    assert_eq!(top(&rl, TopQuery::new()).await, []);
}
