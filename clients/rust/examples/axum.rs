//! `cargo run --example axum` with Redis and the module at REDIS_URL (default
//! redis://127.0.0.1:6379, as `make run` starts it), then `curl -i localhost:3000/`.
use std::net::SocketAddr;
use std::time::Duration;

use axum::{routing::get, Extension, Router};
use redis_rl_client::{connect, Decision, FailurePolicy, Limit, RateLimitLayer, RateLimiter};

async fn hello(Extension(decision): Extension<Decision>) -> String {
    format!("hello, {} left\n", decision.remaining)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let port = std::env::var("PORT").unwrap_or_else(|_| "3000".into());
    // Redis down → admit, and report it on stderr. Without an edge limiter, choose Closed.
    let mut limiter = RateLimiter::new(connect(&url)?, FailurePolicy::Open);
    // On a Redis without the module the kit decides through scripts, and computes
    // RL.PSEUDONYM itself from the same secret as the server's.
    if let Ok(secret) = std::env::var("RL_SECRET") {
        limiter = limiter.pseudonym_secret(secret);
    }
    // Key prefixes: a request's key is `<prefix>:{<RL.PSEUDONYM of its IP>}`.
    let layer = RateLimitLayer::new(
        limiter,
        [
            Limit::gcra("burst", "rl:demo:burst", 10, Duration::from_secs(1)).burst(2),
            Limit::slidecount("minute", "rl:demo:minute", 100, Duration::from_secs(60)),
        ],
    );
    let app = Router::new().route("/", get(hello)).layer(layer);
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
