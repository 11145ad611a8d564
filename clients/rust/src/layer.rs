//! A tower `Layer`/`Service`: identify the request, check its limits, add the headers,
//! answer 429 (or 503 when Redis is down and the policy fails closed).
//!
//! Each limit is a template: its `key` is a prefix, and a request's key is
//! `<prefix>:{<identity>}`, so all of one client's limits share a cluster slot, as
//! RL.ALL requires.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use crate::cache::PseudonymCache;
use crate::decision::{Decision, Source};
use crate::error::Error;
use crate::headers::{ratelimit_headers, Headers};
use crate::key::{KeyExtractor, PeerIpKeyExtractor};
use crate::limit::{Algorithm, Limit};
use crate::limiter::RateLimiter;

/// Told about every request that shadow mode let through although a limit denied it:
/// the decision and the identity it was keyed by.
pub type ShadowHandler = Arc<dyn Fn(&Decision, &str) + Send + Sync>;

/// The lease id of a request under the concurrency option, in its extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(pub String);

#[derive(Clone)]
struct Settings<K> {
    limiter: RateLimiter,
    limits: Vec<Limit>,
    concurrency: Option<Limit>,
    key_extractor: K,
    pseudonymize: bool,
    scope: Option<String>,
    prefix6: Option<u8>,
    pseudonyms: Arc<PseudonymCache>,
    legacy_headers: bool,
    shadow: bool,
    on_shadow: Option<ShadowHandler>,
    shadow_denied: Arc<AtomicU64>,
}

/// The layer. Build it once and clone it: clones share the pseudonym cache and the
/// shadow count.
///
/// ```no_run
/// # use std::time::Duration;
/// # use redis_rl_client::{connect, FailurePolicy, Limit, RateLimiter, RateLimitLayer};
/// # async fn app() -> Result<(), Box<dyn std::error::Error>> {
/// let limiter = RateLimiter::new(connect("redis://127.0.0.1:6379")?, FailurePolicy::Open);
/// let layer = RateLimitLayer::new(limiter, [Limit::gcra("burst", "rl:api", 10, Duration::from_secs(1)).burst(5)]);
/// let app: axum::Router = axum::Router::new().layer(layer);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer<K = PeerIpKeyExtractor> {
    settings: Arc<Settings<K>>,
}

impl RateLimitLayer<PeerIpKeyExtractor> {
    /// The limits (key prefixes) every request is checked against: one limit is a single
    /// command, several are one RL.ALL. The identity is the peer IP, through RL.PSEUDONYM.
    ///
    /// # Panics
    ///
    /// When a limit is one the module would refuse (see [`Limit::validate`]): a mistake
    /// in the app stops it at startup, instead of every request going to the failure
    /// policy. [`RateLimitLayer::try_new`] returns the error instead.
    pub fn new(limiter: RateLimiter, limits: impl IntoIterator<Item = Limit>) -> Self {
        Self::try_new(limiter, limits).unwrap_or_else(|error| panic!("{error}"))
    }

    /// [`RateLimitLayer::new`], with the first invalid limit as an error.
    pub fn try_new(
        limiter: RateLimiter,
        limits: impl IntoIterator<Item = Limit>,
    ) -> Result<Self, Error> {
        let limits: Vec<Limit> = limits.into_iter().collect();
        for limit in &limits {
            limit.validate()?;
            // Several limits go as one RL.ALL.
            if limits.len() > 1 {
                limit.validate_in_all()?;
            }
        }
        Ok(RateLimitLayer {
            settings: Arc::new(Settings {
                limiter,
                limits,
                concurrency: None,
                key_extractor: PeerIpKeyExtractor,
                pseudonymize: true,
                scope: None,
                prefix6: None,
                pseudonyms: Arc::new(PseudonymCache::default()),
                legacy_headers: false,
                shadow: false,
                on_shadow: None,
                shadow_denied: Arc::new(AtomicU64::new(0)),
            }),
        })
    }
}

impl<K: KeyExtractor> RateLimitLayer<K> {
    fn with(mut self, change: impl FnOnce(&mut Settings<K>)) -> Self {
        change(Arc::make_mut(&mut self.settings));
        self
    }

    /// What requests are limited by (as tower-governor's `.key_extractor(...)`).
    pub fn key_extractor<K2: KeyExtractor>(self, key_extractor: K2) -> RateLimitLayer<K2> {
        let s = Arc::unwrap_or_clone(self.settings);
        RateLimitLayer {
            settings: Arc::new(Settings {
                limiter: s.limiter,
                limits: s.limits,
                concurrency: s.concurrency,
                key_extractor,
                pseudonymize: s.pseudonymize,
                scope: s.scope,
                prefix6: s.prefix6,
                pseudonyms: s.pseudonyms,
                legacy_headers: s.legacy_headers,
                shadow: s.shadow,
                on_shadow: s.on_shadow,
                shadow_denied: s.shadow_denied,
            }),
        }
    }

    /// Key by the extracted key itself rather than its RL.PSEUDONYM (default: pseudonym,
    /// looked up once per identity and UTC day, so no raw IP becomes a Redis key).
    pub fn pseudonymize(self, on: bool) -> Self {
        self.with(|s| s.pseudonymize = on)
    }

    /// RL.PSEUDONYM's scope and `PREFIX6` (an IPv6 client is its /bits network).
    pub fn pseudonym_options(self, scope: Option<&str>, prefix6: Option<u8>) -> Self {
        self.with(|s| {
            s.scope = scope.map(str::to_string);
            s.prefix6 = prefix6;
        })
    }

    /// Also `X-RateLimit-Limit`, `-Remaining` and `-Reset`.
    pub fn legacy_headers(self, on: bool) -> Self {
        self.with(|s| s.legacy_headers = on)
    }

    /// At most `limit.limit` requests of one identity in flight: a lease (named by a
    /// generated [`RequestId`]) is taken before the handler, in the same RL.ALL as the
    /// rate limits, and released when the handler's future finishes, fails or is dropped.
    /// A lease that is never released (a crashed process) expires after `limit.window`.
    ///
    /// # Panics
    ///
    /// When the limit is one the module would refuse (see [`Limit::validate`]).
    pub fn concurrency(self, limit: Limit) -> Self {
        let limit = Limit {
            algorithm: Algorithm::Concurrency,
            ..limit
        };
        // The lease and the rate limits go as one RL.ALL.
        let in_all = self.settings.limits.iter().map(Limit::validate_in_all);
        if let Err(error) = limit.validate().and(in_all.collect::<Result<(), _>>()) {
            panic!("{error}");
        }
        self.with(|s| s.concurrency = Some(limit))
    }

    /// Shadow mode: a request a limit denies passes anyway, is counted
    /// ([`RateLimitLayer::shadow_denied`]) and reported to `on_shadow`; its headers still
    /// tell the real state. How a new limit is rolled out safely.
    pub fn shadow(self, on: bool) -> Self {
        self.with(|s| {
            s.shadow = on;
            s.limiter.shadow = on;
        })
    }

    /// Where shadow mode reports a would-be denial (default: a line on stderr).
    pub fn on_shadow(self, handler: impl Fn(&Decision, &str) + Send + Sync + 'static) -> Self {
        self.with(|s| s.on_shadow = Some(Arc::new(handler)))
    }

    /// Requests shadow mode let through that a limit denied, since start.
    pub fn shadow_denied(&self) -> u64 {
        self.settings.shadow_denied.load(Ordering::Relaxed)
    }
}

impl<S, K: KeyExtractor> Layer<S> for RateLimitLayer<K> {
    type Service = RateLimit<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            settings: self.settings.clone(),
        }
    }
}

/// The service [`RateLimitLayer`] wraps around yours.
#[derive(Clone)]
pub struct RateLimit<S, K = PeerIpKeyExtractor> {
    inner: S,
    settings: Arc<Settings<K>>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    K: KeyExtractor,
    ReqBody: Send + 'static,
    ResBody: From<&'static str> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<ResBody>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // The clone that was polled ready is the one that serves this request.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let settings = self.settings.clone();
        Box::pin(async move { settings.serve(req, inner).await })
    }
}

/// What the limits said about a request, before the handler runs.
enum Verdict {
    /// Run the handler with these headers (none when the failure policy admitted).
    /// (The lease is boxed: it holds a limiter, and most requests take none.)
    Pass(Headers, Option<Box<Lease>>),
    /// Answer this instead.
    Refuse(StatusCode, Headers, &'static str),
}

impl<K: KeyExtractor> Settings<K> {
    async fn serve<S, ReqBody, ResBody>(
        &self,
        mut req: Request<ReqBody>,
        mut inner: S,
    ) -> Result<Response<ResBody>, S::Error>
    where
        S: Service<Request<ReqBody>, Response = Response<ResBody>>,
        ResBody: From<&'static str>,
    {
        match self.judge(&mut req).await {
            Verdict::Refuse(status, headers, body) => Ok(respond(status, headers, body)),
            Verdict::Pass(headers, lease) => {
                let result = inner.call(req).await;
                if let Some(lease) = lease {
                    lease.release().await;
                }
                result.map(|mut response| {
                    add_headers(&mut response, headers);
                    response
                })
            }
        }
    }

    async fn judge<B>(&self, req: &mut Request<B>) -> Verdict {
        let key = match self.key_extractor.extract(req) {
            Ok(key) => key.to_string(),
            Err(_) => {
                return Verdict::Refuse(StatusCode::INTERNAL_SERVER_ERROR, Vec::new(), KEY_ERROR)
            }
        };
        let identity = match self.identity(key).await {
            Ok(identity) => identity,
            Err(failed) => return self.on_failure(req, failed),
        };
        let keyed = |limit: &Limit| limit.with_key(format!("{}:{{{identity}}}", limit.key));
        let mut limits: Vec<Limit> = self.limits.iter().map(keyed).collect();
        let lease = self
            .concurrency
            .as_ref()
            .map(|limit| (keyed(limit), request_id()));
        let decision = match (&lease, limits.len()) {
            (None, 1) => self.limiter.check(&limits[0], 1).await,
            (None, _) => self.limiter.check_all(&limits, 1, crate::Mode::Spend).await,
            (Some((limit, id)), 0) => self.limiter.acquire(limit, id).await,
            (Some((limit, id)), _) => {
                limits.push(limit.clone());
                self.limiter
                    .check_all_leased(&limits, 1, crate::Mode::Spend, id)
                    .await
            }
        };
        if decision.source == Source::Failure {
            return self.on_failure(req, decision);
        }
        let mut headers = ratelimit_headers(&decision, self.legacy_headers);
        if !decision.allowed && !self.shadow {
            return Verdict::Refuse(StatusCode::TOO_MANY_REQUESTS, headers, RATE_LIMITED);
        }
        if !decision.allowed {
            self.shadow_denied.fetch_add(1, Ordering::Relaxed);
            match &self.on_shadow {
                Some(handler) => handler(&decision, &identity),
                None => {
                    eprintln!("redis-rl: shadow mode let a denied request of {identity} through")
                }
            }
            // The request goes through: a wait on a success would mislead.
            headers.retain(|(name, _)| *name != "Retry-After");
        }
        // Denied in shadow mode: RL.ALL took no lease, there is nothing to give back.
        let lease = lease.filter(|_| decision.allowed).map(|(limit, id)| {
            req.extensions_mut().insert(RequestId(id.clone()));
            Box::new(Lease::new(self.limiter.clone(), limit, id))
        });
        req.extensions_mut().insert(decision);
        Verdict::Pass(headers, lease)
    }

    /// The extracted key, or its pseudonym (cached per identity and UTC day).
    async fn identity(&self, key: String) -> Result<String, Decision> {
        if !self.pseudonymize {
            return Ok(key);
        }
        let now = self.limiter.now_us();
        if let Some(name) = self.pseudonyms.get(&key, now) {
            return Ok(name);
        }
        let name = self
            .limiter
            .pseudonym(&key, self.scope.as_deref(), self.prefix6)
            .await
            .map_err(|unavailable| unavailable.decision)?;
        self.pseudonyms.put(&key, now, name.clone());
        Ok(name)
    }

    /// Redis could not decide (already reported): open runs the handler without rate
    /// headers, closed answers 503 without `Retry-After` (not the client's doing, and no
    /// one knows when it ends).
    fn on_failure<B>(&self, req: &mut Request<B>, decision: Decision) -> Verdict {
        if decision.allowed {
            req.extensions_mut().insert(decision);
            Verdict::Pass(Vec::new(), None)
        } else {
            Verdict::Refuse(StatusCode::SERVICE_UNAVAILABLE, Vec::new(), UNAVAILABLE)
        }
    }
}

const RATE_LIMITED: &str = r#"{"error":"rate_limited"}"#;
const UNAVAILABLE: &str = r#"{"error":"rate_limiter_unavailable"}"#;
const KEY_ERROR: &str = r#"{"error":"rate_limit_key_unavailable"}"#;

fn respond<B: From<&'static str>>(
    status: StatusCode,
    headers: Headers,
    body: &'static str,
) -> Response<B> {
    let mut response = Response::new(B::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    add_headers(&mut response, headers);
    response
}

fn add_headers<B>(response: &mut Response<B>, headers: Headers) {
    for (name, value) in headers {
        // Every name is a fixed token and every value ASCII digits or escaped printable
        // text, so both always parse.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
}

/// A fresh id per request, unique across processes with overwhelming odds. Never taken
/// from the request: two requests sharing an id would share one slot (an acquire of a
/// held id renews it).
fn request_id() -> String {
    static SEED: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(|| {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish()
    });
    format!("{seed:016x}-{:x}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// A held lease. Released when the handler is done; if the handler's future is dropped
/// or panics first, the drop sends the release from a spawned task.
struct Lease {
    held: Option<(RateLimiter, Limit, String)>,
}

impl Lease {
    fn new(limiter: RateLimiter, limit: Limit, id: String) -> Self {
        Lease {
            held: Some((limiter, limit, id)),
        }
    }

    async fn release(mut self) {
        if let Some((limiter, limit, id)) = self.held.take() {
            limiter.release(&limit, &id).await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((limiter, limit, id)) = self.held.take() {
            // Outside a runtime the lease simply expires after its ttl.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    limiter.release(&limit, &id).await;
                });
            }
        }
    }
}
