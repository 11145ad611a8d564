//! A real 3-node cluster: every call reaches the key's node first time (zero MOVED,
//! counted on the servers), RL.PSEUDONYM runs anywhere, and the tower layer works on it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::common::{self, Cluster, FakeClock};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::Router;
use http::{Request, StatusCode};
use redis_rl_client::{
    connect_cluster, FailurePolicy, Limit, Mode, RateLimitLayer, RateLimiter, Source,
};
use tower::ServiceExt;

/// The cluster connection learns the slot map in the background: wait for it.
async fn ready(rl: &RateLimiter) {
    let probe = Limit::fixed("probe", "rl:{probe}", 1_000_000, Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(10);
    while rl.peek(&probe, 1).await.source != Source::Redis {
        assert!(
            Instant::now() < deadline,
            "the cluster client never became ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn cluster_routing() {
    let cluster = Cluster::start();
    let clock = FakeClock::new();
    let failures = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = failures.clone();
    let rl = crate::common::rate_limiter(
        connect_cluster(cluster.urls()).unwrap(),
        FailurePolicy::Closed,
    )
    .clock(clock.as_fn())
    .on_failure(move |error, command| seen.lock().unwrap().push(format!("{command}: {error}")));
    ready(&rl).await;
    failures.lock().unwrap().clear();
    cluster.reset_stats();

    let window = Duration::from_secs(10);
    let mut nodes_used = std::collections::HashSet::new();
    for user in 0..24 {
        let tag = format!("rl:{{user{user}}}");
        let limits = [
            Limit::slidelog("log", format!("{tag}:log"), 5, window),
            Limit::slidecount("count", format!("{tag}:count"), 5, window),
            Limit::fixed("fixed", format!("{tag}:fixed"), 5, window),
            Limit::gcra("gcra", format!("{tag}:gcra"), 5, window).burst(2),
        ];
        for limit in &limits {
            for mode in [
                Mode::Spend,
                Mode::Peek,
                Mode::Refund,
                Mode::Reset,
                Mode::Spend,
            ] {
                let d = rl.call(limit, 1, mode).await;
                assert_eq!(
                    d.source,
                    Source::Redis,
                    "{} {mode:?}: {:?}",
                    limit.key,
                    d.error
                );
            }
        }
        let all = rl.check_all(&limits, 1, Mode::Spend).await;
        assert!(all.allowed && all.parts.len() == 4, "{:?}", all.error);
        // The writes are on the key's own node.
        let node = cluster.node_of(&limits[0].key);
        let exists: u64 = node.query(redis::cmd("EXISTS").arg(&limits[0].key));
        assert_eq!(exists, 1);
        nodes_used.insert(node.port);
        assert!(rl
            .pseudonym(&format!("192.0.2.{user}"), Some("s"), None)
            .await
            .is_ok());
    }
    if common::has(&cluster.nodes[0], "RL.CONCURRENCY") {
        for user in 0..24 {
            let tag = format!("rl:{{user{user}}}");
            let slots = Limit::concurrency("inflight", format!("{tag}:inflight"), 2, window);
            let rate = Limit::fixed("fixed", format!("{tag}:lease-rate"), 5, window);
            for d in [
                rl.acquire(&slots, "a").await,
                rl.heartbeat(&slots, "a").await,
                rl.release(&slots, "a").await,
                rl.check_all_leased(&[rate, slots.clone()], 1, Mode::Spend, "b")
                    .await,
                rl.release(&slots, "b").await,
            ] {
                assert!(d.allowed && d.source == Source::Redis, "{:?}", d.error);
            }
        }
    }
    if common::has(&cluster.nodes[0], "RL.THROTTLE") {
        for user in 0..24 {
            let t = rl
                .throttle(&format!("rl:{{user{user}}}:cell"), 15, 30, 60, 1)
                .await;
            assert!(!t.limited && t.source == Source::Redis, "{:?}", t.error);
        }
    }
    assert_eq!(nodes_used.len(), 3, "the keys spread over every node");
    assert!(
        failures.lock().unwrap().is_empty(),
        "{:?}",
        failures.lock().unwrap()
    );
    assert_eq!(
        cluster.moved(),
        0,
        "every call reached the key's node first time"
    );

    // The control (the module's RL.ALL through redis-rs's own routing) and the module's
    // refusal of an untagged key need the module.
    if crate::common::scripts_backend() {
        println!("SKIPPED: the MOVED control and the untagged-key refusal need the module");
    } else {
        // The count works: the same RL.ALL through redis-rs's own routing (by the first
        // argument, RL.ALL's count of limits) is redirected for keys on the other nodes.
        let client = redis::cluster::ClusterClient::new(cluster.urls()).unwrap();
        let mut raw = client.get_async_connection().await.unwrap();
        for user in 0..24 {
            let key = format!("rl:{{user{user}}}:raw");
            let mut cmd = redis::cmd("RL.ALL");
            cmd.arg(1).arg("FIXED").arg(&key).arg(5).arg(10);
            let _: redis::Value = cmd.query_async(&mut raw).await.unwrap();
        }
        assert!(cluster.moved() > 0, "the control call was never redirected");

        // An untagged key: the module's own refusal, through the failure policy.
        let untagged = rl
            .check(&Limit::fixed("f", "rl:untagged", 5, window), 1)
            .await;
        assert_eq!(untagged.source, Source::Failure);
        let message = untagged.error.as_ref().unwrap().to_string();
        assert!(message.contains("hash tag"), "{message}");
    }

    // The tower layer on the cluster: RL.PSEUDONYM of the peer, then RL.ALL on its node.
    cluster.reset_stats();
    let layer = RateLimitLayer::new(
        rl.clone(),
        [
            Limit::gcra("burst", "rl:layer:burst", 10, Duration::from_secs(1)).burst(2),
            Limit::slidecount("minute", "rl:layer:minute", 100, Duration::from_secs(60)),
        ],
    );
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let req = Request::builder()
            .uri("/")
            .extension(ConnectInfo(SocketAddr::from(([203, 0, 113, 7], 4000))))
            .body(Body::empty())
            .unwrap();
        statuses.push(app.clone().oneshot(req).await.unwrap().status());
    }
    assert_eq!(
        statuses,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    assert_eq!(cluster.moved(), 0);
}
