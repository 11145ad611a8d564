//! The tower layer inside a real axum app, driven with `tower::ServiceExt::oneshot`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{free_port, key, FakeClock, Server};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::{Extension, Router};
use http::{HeaderMap, Request, Response, StatusCode};
use redis_rl_client::{
    connect, Decision, Error, FailurePolicy, KeyExtractor, Limit, RateLimitLayer, RateLimiter,
};
use tower::ServiceExt;

const PEER: ([u8; 4], u16) = ([203, 0, 113, 7], 40000);
/// RL.PSEUDONYM of 203.0.113.7 on 2024-06-17 (HMAC-SHA256 of the test secret).
const PEER_PSEUDONYM: &str = "74df3b54d0678ef9a3140b55";

fn limiter(url: &str, clock: &FakeClock, policy: FailurePolicy) -> RateLimiter {
    crate::common::rate_limiter(connect(url).unwrap(), policy)
        .clock(clock.as_fn())
        .on_failure(|_, _| {})
}

/// The handler reports what the layer put in its extensions.
async fn handler(Extension(decision): Extension<Decision>) -> String {
    format!(
        "remaining={} source={:?}",
        decision.remaining, decision.source
    )
}

pub(crate) fn app(layer: RateLimitLayer<impl KeyExtractor>) -> Router {
    Router::new().route("/", get(handler)).layer(layer)
}

fn request() -> Request<Body> {
    Request::builder()
        .uri("/")
        .extension(ConnectInfo(SocketAddr::from(PEER)))
        .body(Body::empty())
        .unwrap()
}

pub(crate) async fn send(app: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, String) {
    let response: Response<Body> = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    (
        parts.status,
        parts.headers,
        String::from_utf8(bytes.to_vec()).unwrap(),
    )
}

pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|v| v.to_str().unwrap())
}

/// How many times the server ran `command`; on the scripts backend, a limiter command
/// is its script (EVALSHA), and RL.PSEUDONYM is computed in the app (0).
pub(crate) fn calls(server: &Server, command: &str) -> u64 {
    let command = match (crate::common::scripts_backend(), command) {
        (true, "rl.pseudonym") => return 0,
        (true, _) => "evalsha",
        (false, command) => command,
    };
    let info: String = server.query(redis::cmd("INFO").arg("commandstats"));
    let prefix = format!("cmdstat_{command}:");
    let field = |fields: &str, name: &str| -> u64 {
        fields
            .split(',')
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .map_or(0, |n| n.parse().unwrap())
    };
    // A script's first EVALSHA answers NOSCRIPT (counted as a failed call), then runs.
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |f| field(f, "calls") - field(f, "failed_calls"))
}

#[tokio::test]
async fn admits_then_refuses_with_429() {
    let server = Server::start();
    let clock = FakeClock::new();
    let burst = Limit::gcra("burst", key("layer"), 10, Duration::from_secs(1)).burst(2);
    let app = app(RateLimitLayer::new(
        limiter(&server.url(), &clock, FailurePolicy::Closed),
        [burst],
    ));

    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body, "remaining=1 source=Redis",
        "the decision is in the request's extensions"
    );
    assert_eq!(
        header(&headers, "ratelimit-policy"),
        Some(r#""burst";q=10;w=1"#)
    );
    assert_eq!(header(&headers, "ratelimit"), Some(r#""burst";r=1;t=1"#));
    assert_eq!(header(&headers, "retry-after"), None);

    let (status, _, body) = send(&app, request()).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "remaining=0 source=Redis")
    );

    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body, r#"{"error":"rate_limited"}"#);
    assert_eq!(header(&headers, "content-type"), Some("application/json"));
    assert_eq!(header(&headers, "retry-after"), Some("1"));
    assert_eq!(header(&headers, "ratelimit"), Some(r#""burst";r=0;t=1"#));

    // The key is the limit's prefix and the peer's pseudonym, never the raw address;
    // the pseudonym was looked up once for the three requests.
    let stored: bool =
        server.query(redis::cmd("EXISTS").arg(format!("{}:{{{PEER_PSEUDONYM}}}", key("layer"))));
    assert!(stored);
    let lookups = if crate::common::scripts_backend() {
        0
    } else {
        1
    };
    assert_eq!(calls(&server, "rl.pseudonym"), lookups);

    // Time moves on (NOW): admitted again.
    clock.advance_ms(100);
    assert_eq!(send(&app, request()).await.0, StatusCode::OK);
}

#[tokio::test]
async fn several_limits_are_one_rl_all() {
    let server = Server::start();
    let clock = FakeClock::new();
    let limits = [
        Limit::gcra("burst", "rl:b", 10, Duration::from_secs(1)).burst(5),
        Limit::slidelog("minute", "rl:m", 2, Duration::from_secs(60)),
    ];
    let layer = RateLimitLayer::new(
        limiter(&server.url(), &clock, FailurePolicy::Closed),
        limits,
    )
    .legacy_headers(true);
    let app = app(layer);
    let (_, headers, _) = send(&app, request()).await;
    assert_eq!(
        header(&headers, "ratelimit-policy"),
        Some(r#""burst";q=10;w=1, "minute";q=2;w=60"#)
    );
    assert_eq!(
        header(&headers, "ratelimit"),
        Some(r#""burst";r=4;t=1, "minute";r=1;t=60"#)
    );
    assert_eq!(header(&headers, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&headers, "x-ratelimit-remaining"), Some("1"));
    assert_eq!(header(&headers, "x-ratelimit-reset"), Some("60"));
    assert_eq!(send(&app, request()).await.0, StatusCode::OK);
    let (status, headers, _) = send(&app, request()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&headers, "retry-after"), Some("60"));
    assert_eq!(calls(&server, "rl.all"), 3);
    if !crate::common::scripts_backend() {
        assert_eq!(calls(&server, "rl.gcra"), 0);
    }
    // The denied request spent no burst: RL.ALL is all or nothing.
    let burst: Limit = Limit::gcra(
        "burst",
        format!("rl:b:{{{PEER_PSEUDONYM}}}"),
        10,
        Duration::from_secs(1),
    )
    .burst(5);
    let rl = limiter(&server.url(), &clock, FailurePolicy::Closed);
    assert_eq!(rl.peek(&burst, 1).await.remaining, 2);
}

/// Limits by an API key header, as a tower-governor user would write it.
#[derive(Clone)]
pub(crate) struct ApiKey;

impl KeyExtractor for ApiKey {
    type Key = String;

    fn extract<T>(&self, req: &Request<T>) -> Result<String, Error> {
        let value = req
            .headers()
            .get("x-api-key")
            .ok_or(Error::UnableToExtractKey)?;
        Ok(value
            .to_str()
            .map_err(|_| Error::UnableToExtractKey)?
            .to_string())
    }
}

#[tokio::test]
async fn custom_key_extractor_and_missing_key() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server.url(), &clock, FailurePolicy::Closed);
    let layer = RateLimitLayer::new(
        rl.clone(),
        [Limit::fixed(
            "daily",
            "rl:api",
            2,
            Duration::from_secs(86400),
        )],
    )
    .key_extractor(ApiKey)
    .pseudonymize(false);
    let app = app(layer);
    let with_key = || {
        Request::builder()
            .uri("/")
            .header("x-api-key", "key-1")
            .body(Body::empty())
            .unwrap()
    };
    assert_eq!(send(&app, with_key()).await.0, StatusCode::OK);
    let count: i64 = server.query(redis::cmd("GET").arg("rl:api:{key-1}:1718582400"));
    assert_eq!(count, 1, "raw key, as asked");
    let (status, _, body) = send(&app, Request::new(Body::empty())).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, r#"{"error":"rate_limit_key_unavailable"}"#);
    // The default extractor without ConnectInfo (served without connect info): 500 too.
    let peer = app_peer(rl);
    assert_eq!(
        send(&peer, Request::new(Body::empty())).await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
}

fn app_peer(rl: RateLimiter) -> Router {
    app(RateLimitLayer::new(
        rl,
        [Limit::fixed("f", "rl:p", 2, Duration::from_secs(10))],
    ))
}

#[tokio::test]
async fn failure_policy() {
    let clock = FakeClock::new();
    let dead = format!("redis://127.0.0.1:{}", free_port(0));
    let limits = [Limit::fixed("f", "rl:dead", 2, Duration::from_secs(10))];

    let reported = Arc::new(Mutex::new(0));
    let count = reported.clone();
    let open = crate::common::rate_limiter(connect(&dead).unwrap(), FailurePolicy::Open)
        .clock(clock.as_fn())
        .on_failure(move |_, _| *count.lock().unwrap() += 1);
    let app_open = app(RateLimitLayer::new(open, limits.clone()));
    let (status, headers, body) = send(&app_open, request()).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "remaining=0 source=Failure")
    );
    assert!(headers.get("ratelimit").is_none() && headers.get("retry-after").is_none());
    assert_eq!(
        *reported.lock().unwrap(),
        1,
        "the failed RL.PSEUDONYM was reported"
    );

    let app_closed = app(RateLimitLayer::new(
        limiter(&dead, &clock, FailurePolicy::Closed),
        limits.clone(),
    ));
    let (status, headers, body) = send(&app_closed, request()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, r#"{"error":"rate_limiter_unavailable"}"#);
    assert!(
        headers.get("retry-after").is_none(),
        "not the client's doing, and nobody knows when it ends"
    );

    // Redis up but without the module, on the module backend: the limit call itself
    // fails (keys unpseudonymized).
    let bare = Server::bare();
    let pinned = limiter(&bare.url(), &clock, FailurePolicy::Closed)
        .backend(redis_rl_client::Backend::Module);
    let layer = RateLimitLayer::new(pinned, limits).pseudonymize(false);
    let started = Instant::now();
    assert_eq!(
        send(&app(layer), request()).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn shadow_mode() {
    let server = Server::start();
    let clock = FakeClock::new();
    let shadowed = Arc::new(Mutex::new(Vec::<(i64, String)>::new()));
    let seen = shadowed.clone();
    let layer = RateLimitLayer::new(
        limiter(&server.url(), &clock, FailurePolicy::Closed),
        [Limit::fixed(
            "new-limit",
            "rl:shadow",
            1,
            Duration::from_secs(10),
        )],
    )
    .shadow(true)
    .on_shadow(move |decision, identity| {
        seen.lock()
            .unwrap()
            .push((decision.retry_after_ms, identity.to_string()))
    });
    let app = app(layer.clone());

    assert_eq!(send(&app, request()).await.0, StatusCode::OK);
    assert!(
        shadowed.lock().unwrap().is_empty(),
        "an admitted request is not reported"
    );
    let (status, headers, body) = send(&app, request()).await;
    assert_eq!(status, StatusCode::OK, "a would-be denial passes");
    assert_eq!(body, "remaining=0 source=Redis");
    assert_eq!(
        header(&headers, "ratelimit"),
        Some(r#""new-limit";r=0;t=1"#),
        "the real state"
    );
    assert_eq!(header(&headers, "retry-after"), None);
    assert_eq!(
        *shadowed.lock().unwrap(),
        [(200, PEER_PSEUDONYM.to_string())]
    );
    assert_eq!(layer.shadow_denied(), 1);
    assert_eq!(send(&app, request()).await.0, StatusCode::OK);
    assert_eq!(layer.shadow_denied(), 2);
    // Nothing was spent by the denied ones: the window holds the one admitted request.
    let count: i64 =
        server.query(redis::cmd("GET").arg(format!("rl:shadow:{{{PEER_PSEUDONYM}}}:1718609340")));
    assert_eq!(count, 1);
}

#[tokio::test]
async fn deny_cache_in_front_of_the_layer() {
    let server = Server::start();
    let clock = FakeClock::new();
    let rl = limiter(&server.url(), &clock, FailurePolicy::Closed)
        .deny_cache(redis_rl_client::DenyCache::new(100));
    let app = app(RateLimitLayer::new(
        rl,
        [Limit::fixed("f", "rl:cache", 1, Duration::from_secs(10))],
    ));
    assert_eq!(send(&app, request()).await.0, StatusCode::OK);
    for _ in 0..5 {
        let (status, headers, _) = send(&app, request()).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&headers, "retry-after"), Some("1"));
    }
    assert_eq!(
        calls(&server, "rl.fixed"),
        2,
        "four denials answered in-process"
    );
    clock.advance_ms(200);
    assert_eq!(
        send(&app, request()).await.0,
        StatusCode::OK,
        "the window ended: Redis admits again"
    );
}
