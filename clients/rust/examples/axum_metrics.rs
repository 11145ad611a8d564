//! `cargo run --example axum_metrics` with Redis and the module at REDIS_URL (default
//! redis://127.0.0.1:6379), then `curl localhost:3000/` a few times and
//! `curl localhost:3000/metrics`. Needs `metrics-exporter-prometheus` beside the kit.
use std::net::SocketAddr;
use std::time::Duration;

use axum::{routing::get, Router};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use redis_rl_client::metrics::{BUCKETS, DURATION};
use redis_rl_client::{connect, FailurePolicy, Limit, RateLimitLayer, RateLimiter};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".into());
    // The exporter every `metrics::counter!`/`histogram!` of the process records into,
    // with the kit's sub-millisecond buckets for the latency histogram.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(DURATION.to_string()), BUCKETS)?
        .install_recorder()?;
    // The exporter keeps histogram samples until upkeep folds them in.
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.run_upkeep();
        }
    });

    let mut limiter = RateLimiter::new(connect(&url)?, FailurePolicy::Open).metrics(true);
    if let Ok(secret) = std::env::var("RL_SECRET") {
        limiter = limiter.pseudonym_secret(secret);
    }
    // 100 an hour, 5 at once: the 6th request in a row is refused.
    let layer = RateLimitLayer::new(
        limiter,
        [Limit::gcra("api", "rl:demo:api", 100, Duration::from_secs(3600)).burst(5)],
    );
    // `/metrics` is added after the layer, so scraping it is not rate limited.
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer)
        .route("/metrics", get(move || async move { prometheus.render() }));
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
