//! The layer in a real axum 0.7 app, served over TCP with 0.7's own ConnectInfo: the
//! default (peer-IP) key extractor finds the client there too (feature `axum-07`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::{key, Server};
use axum07::routing::get;
use axum07::Router;
use redis_rl_client::{connect, FailurePolicy, Limit, RateLimitLayer};

fn get_once(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_axum_07_app_is_limited_by_its_peer_ip() {
    let server = Server::start();
    let limiter =
        crate::common::rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed);
    // An exact log: two a minute, whatever the wall clock's window boundaries.
    let layer = RateLimitLayer::new(
        limiter,
        [Limit::slidelog(
            "minute",
            key("axum07"),
            2,
            Duration::from_secs(60),
        )],
    );
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        axum07::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let responses = tokio::task::spawn_blocking(move || (0..3).map(|_| get_once(port)).collect())
        .await
        .unwrap();
    let responses: Vec<String> = responses;
    assert!(responses[0].starts_with("HTTP/1.1 200"), "{}", responses[0]);
    assert!(
        responses[1].contains("ratelimit: \"minute\";r=0;"),
        "{}",
        responses[1]
    );
    assert!(responses[2].starts_with("HTTP/1.1 429"), "{}", responses[2]);
    // The key is the peer's pseudonym, not a shared "unknown" identity.
    let keys: Vec<String> = server.query(redis::cmd("KEYS").arg(format!("{}*", key("axum07"))));
    assert_eq!(keys.len(), 1, "{keys:?}");
}
