//! The limiter: typed calls, the failure policy, the deny cache, the clock.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::{Cmd, Value};

use crate::backend::{self, Backend, Detected};
use crate::cache::{DenyCache, Entry};
use crate::connection::{Connection, Target};
use crate::decision::{self, Decision, Source, Throttle};
use crate::error::Error;
use crate::limit::{self, Algorithm, LeaseOp, Limit, Mode};
use crate::metrics::{self, Outcome};
use crate::top::{self, TopEntry, TopQuery};

/// Each call's bound, whatever the connection is configured with.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(300);

/// What a call answers when Redis cannot: admit (`Open`) or refuse (`Closed`).
///
/// There is no default on purpose: a limiter that fails open by accident is an outage
/// waiting for a flood; one that fails closed by accident turns a Redis blip into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Open,
    Closed,
}

impl FailurePolicy {
    fn word(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        }
    }
}

/// Told about every failure: the error and the command that failed.
pub type FailureHandler = Arc<dyn Fn(&Error, &str) + Send + Sync>;
/// Unix time in microseconds.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// One cost for every limit of a call, or one per limit.
#[derive(Debug, Clone, Copy)]
pub enum Cost<'a> {
    Each(u64),
    PerLimit(&'a [u64]),
}

impl From<u64> for Cost<'_> {
    fn from(cost: u64) -> Self {
        Cost::Each(cost)
    }
}

impl<'a> From<&'a [u64]> for Cost<'a> {
    fn from(costs: &'a [u64]) -> Self {
        Cost::PerLimit(costs)
    }
}

impl<'a, const N: usize> From<&'a [u64; N]> for Cost<'a> {
    fn from(costs: &'a [u64; N]) -> Self {
        Cost::PerLimit(costs)
    }
}

/// `pseudonym()` could not get an answer; `decision` is what the failure policy decided
/// for the request that needed it (already reported).
#[derive(Debug, Clone, thiserror::Error)]
#[error("redis-rl unavailable: {}", .decision.error.as_ref().map(|e| e.to_string()).unwrap_or_default())]
pub struct Unavailable {
    pub decision: Decision,
}

/// Rate-limit checks on a [`Connection`]. Cheap to clone; clones share everything.
///
/// Every way Redis can fail to decide (refused or lost connection, timeout, any error
/// reply, an unexpected reply) is reported to the failure handler (default: a line on
/// stderr) and answered by the [`FailurePolicy`], with `source: Source::Failure`.
#[derive(Clone)]
pub struct RateLimiter {
    conn: Connection,
    failure: FailurePolicy,
    on_failure: Option<FailureHandler>,
    clock: Option<Clock>,
    deny_cache: Option<Arc<DenyCache>>,
    timeout: Duration,
    backend: Backend,
    detected: Arc<Detected>,
    secret: Option<Arc<[u8]>>,
    metrics: bool,
    /// Set on the tower layer's own copy in shadow mode: a denial it lets through is
    /// counted as `shadow_denied`.
    pub(crate) shadow: bool,
}

/// µs on a monotonic timeline (for the deny cache when the server's clock decides).
fn monotonic_us() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let elapsed = START.get_or_init(Instant::now).elapsed();
    i64::try_from(elapsed.as_micros()).unwrap_or(i64::MAX)
}

fn wall_clock_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

impl RateLimiter {
    /// `failure` is required: see [`FailurePolicy`].
    pub fn new(conn: impl Into<Connection>, failure: FailurePolicy) -> Self {
        RateLimiter {
            conn: conn.into(),
            failure,
            on_failure: None,
            clock: None,
            deny_cache: None,
            timeout: DEFAULT_TIMEOUT,
            backend: Backend::Auto,
            detected: Arc::new(Detected::default()),
            secret: None,
            metrics: false,
            shadow: false,
        }
    }

    /// Count every decision and time every call through the `metrics` facade
    /// (`redis_rl_decisions_total`, `redis_rl_call_duration_seconds`; see
    /// [`crate::metrics`]). Off by default.
    pub fn metrics(mut self, on: bool) -> Self {
        self.metrics = on;
        self
    }

    /// Which commands decide (default [`Backend::Auto`]: the module where the server has
    /// it, else Lua scripts with the module's contract, on the same keys).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// RL.PSEUDONYM's secret, for the scripts backend: Redis Lua has no SHA-256, so the
    /// kit computes the module's pseudonym itself (the same HMAC, day and output). The
    /// module's backend never uses it: there the server's secret decides.
    pub fn pseudonym_secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secret = Some(Arc::from(secret.as_ref()));
        self
    }

    /// Whether calls go to the scripts now (with `Auto`: what was detected).
    pub fn on_scripts(&self) -> bool {
        match self.backend {
            Backend::Module => false,
            Backend::Scripts => true,
            Backend::Auto => self.detected.scripts(),
        }
    }

    /// Where failures are reported instead of stderr (e.g. `tracing::warn!`).
    pub fn on_failure(mut self, handler: impl Fn(&Error, &str) + Send + Sync + 'static) -> Self {
        self.on_failure = Some(Arc::new(handler));
        self
    }

    /// An app clock (unix µs), sent as `NOW` on every call, so the module, the deny cache
    /// and the pseudonym day share one timeline. Without it the server's clock decides.
    pub fn clock(mut self, clock: impl Fn() -> i64 + Send + Sync + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Opt in to the local deny cache (see [`DenyCache`]).
    pub fn deny_cache(mut self, cache: DenyCache) -> Self {
        self.deny_cache = Some(Arc::new(cache));
        self
    }

    /// Each call's bound (default 300 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn failure_policy(&self) -> FailurePolicy {
        self.failure
    }

    /// The wall-clock time this limiter works with (its clock, if any), in unix µs.
    pub fn now_us(&self) -> i64 {
        self.clock
            .as_ref()
            .map_or_else(wall_clock_us, |clock| clock())
    }

    /// Spend `cost` on `limit` if it admits: `RL.<ALGO> key limit window [COST n]`.
    pub async fn check(&self, limit: &Limit, cost: u64) -> Decision {
        self.call(limit, cost, Mode::Spend).await
    }

    /// The same decision, spending and writing nothing (`PEEK`).
    pub async fn peek(&self, limit: &Limit, cost: u64) -> Decision {
        self.call(limit, cost, Mode::Peek).await
    }

    /// Give back `cost` units an admitted call spent (`REFUND`).
    pub async fn refund(&self, limit: &Limit, cost: u64) -> Decision {
        self.call(limit, cost, Mode::Refund).await
    }

    /// Clear the limiter's state (`RESET`).
    pub async fn reset(&self, limit: &Limit) -> Decision {
        self.call(limit, 1, Mode::Reset).await
    }

    /// Start the limit's block now, whatever the limiter says (`IMPOSE`).
    pub async fn impose(&self, limit: &Limit) -> Decision {
        self.call(limit, 1, Mode::Impose).await
    }

    /// One limit, any mode. A concurrency limit takes only `Peek` and `Reset` here; its
    /// leases go through [`RateLimiter::acquire`] and friends.
    pub async fn call(&self, limit: &Limit, cost: u64, mode: Mode) -> Decision {
        let command = limit.algorithm.command();
        if limit.algorithm == Algorithm::Concurrency && matches!(mode, Mode::Spend | Mode::Refund) {
            misuse(Error::InvalidCall(
                "a concurrency limit takes a lease id (acquire/release)",
            ));
        }
        if mode == Mode::Impose && limit.block.is_none() {
            misuse(Error::InvalidCall("IMPOSE needs a limit with a block"));
        }
        checked(limit, cost);
        let entry = Entry {
            limits: vec![limit.clone()],
            costs: vec![cost],
            all: false,
        };
        self.decide(
            command,
            entry,
            mode,
            mode == Mode::Spend,
            |now| limit::command(limit, cost, mode, now),
            |reply| decision::parse(command, reply, limit),
        )
        .await
    }

    /// RL.ALL: admitted only if every limit admits; then all spend, else none does.
    /// `cost` is one for all limits or one per limit.
    pub async fn check_all<'c>(
        &self,
        limits: &[Limit],
        cost: impl Into<Cost<'c>>,
        mode: Mode,
    ) -> Decision {
        self.all(limits, cost.into(), mode, None).await
    }

    /// RL.ALL with a concurrency limit among `limits`: its lease is named `lease`.
    /// "At most 5 in flight and 100 a minute" is then one atomic call: a denied rate
    /// limit takes no lease, a full concurrency limit spends no rate budget. With
    /// `Mode::Refund` the lease is released.
    pub async fn check_all_leased<'c>(
        &self,
        limits: &[Limit],
        cost: impl Into<Cost<'c>>,
        mode: Mode,
        lease: &str,
    ) -> Decision {
        self.all(limits, cost.into(), mode, Some(lease)).await
    }

    async fn all(
        &self,
        limits: &[Limit],
        cost: Cost<'_>,
        mode: Mode,
        lease: Option<&str>,
    ) -> Decision {
        let costs = match cost {
            Cost::Each(n) => vec![n; limits.len()],
            Cost::PerLimit(costs) => costs.to_vec(),
        };
        if limits.is_empty() {
            misuse(Error::InvalidCall("RL.ALL needs at least one limit"));
        }
        if costs.len() != limits.len() {
            misuse(Error::InvalidCall("RL.ALL needs one cost per limit"));
        }
        for (limit, &cost) in limits.iter().zip(&costs) {
            checked(limit, cost);
            if let Err(error) = limit.validate_in_all() {
                misuse(error);
            }
        }
        if mode == Mode::Impose && limits.iter().all(|l| l.block.is_none()) {
            misuse(Error::InvalidCall("IMPOSE needs a limit with a block"));
        }
        let leased = limits.iter().any(|l| l.algorithm == Algorithm::Concurrency);
        if leased && lease.is_none() && matches!(mode, Mode::Spend | Mode::Refund) {
            misuse(Error::InvalidCall(
                "a concurrency limit in RL.ALL takes a lease id (check_all_leased)",
            ));
        }
        if lease.is_some() && !leased {
            misuse(Error::InvalidCall(
                "a lease id needs a concurrency limit among the limits",
            ));
        }
        let entry = Entry {
            limits: limits.to_vec(),
            costs: costs.clone(),
            all: true,
        };
        self.decide(
            "RL.ALL",
            entry,
            mode,
            mode == Mode::Spend,
            |now| limit::all_command(limits, &costs, mode, lease, now),
            |reply| decision::parse_all(reply, limits),
        )
        .await
    }

    /// RL.CONCURRENCY on a [`Limit::concurrency`].
    pub async fn concurrency(&self, limit: &Limit, op: LeaseOp<'_>) -> Decision {
        if limit.algorithm != Algorithm::Concurrency {
            misuse(Error::InvalidCall(
                "leases are taken on a Limit::concurrency",
            ));
        }
        checked(limit, 1);
        let entry = Entry {
            limits: vec![limit.clone()],
            costs: vec![1],
            all: false,
        };
        let mode = op.mode();
        self.decide(
            "RL.CONCURRENCY",
            entry,
            mode,
            matches!(op, LeaseOp::Acquire(_)),
            |now| limit::lease_command(limit, &op, now),
            |reply| decision::parse("RL.CONCURRENCY", reply, limit),
        )
        .await
    }

    /// Take (or renew) the lease `id`: allowed when a slot was free or `id` held one.
    pub async fn acquire(&self, limit: &Limit, id: &str) -> Decision {
        self.concurrency(limit, LeaseOp::Acquire(id)).await
    }

    /// Give the lease `id` back.
    pub async fn release(&self, limit: &Limit, id: &str) -> Decision {
        self.concurrency(limit, LeaseOp::Release(id)).await
    }

    /// Keep the lease `id` for another ttl; denied if it holds none any more.
    pub async fn heartbeat(&self, limit: &Limit, id: &str) -> Decision {
        self.concurrency(limit, LeaseOp::Heartbeat(id)).await
    }

    /// RL.THROTTLE, redis-cell's CL.THROTTLE: `count` per `period` seconds, `max_burst + 1`
    /// at once; `quantity` 0 reports without spending. On a failure `limited` is the
    /// policy's answer (`Closed` → limited) and `source` is `Failure`.
    pub async fn throttle(
        &self,
        key: &str,
        max_burst: u64,
        count: u64,
        period_s: u64,
        quantity: u64,
    ) -> Throttle {
        throttle_checked(max_burst, count, period_s, quantity);
        let mut cmd = redis::cmd("RL.THROTTLE");
        cmd.arg(key)
            .arg(max_burst)
            .arg(count)
            .arg(period_s)
            .arg(quantity);
        if let Some(now) = self.clock.as_ref().map(|clock| clock_checked(clock())) {
            cmd.arg("NOW").arg(now);
        }
        let started = Instant::now();
        let throttle = match self
            .send_limiter(cmd, &[key])
            .await
            .and_then(|reply| decision::parse_throttle(&reply))
        {
            Ok(throttle) => throttle,
            Err(error) => {
                let failed = self.fail(error, "RL.THROTTLE");
                Throttle {
                    limited: !failed.allowed,
                    limit: 0,
                    remaining: 0,
                    retry_after_s: -1,
                    reset_after_s: 0,
                    source: Source::Failure,
                    error: failed.error,
                }
            }
        };
        // Quantity 0 only reports: it is no decision.
        if self.metrics && quantity > 0 {
            let failed = throttle.source == Source::Failure;
            let outcome = Outcome::of(failed, !throttle.limited, self.shadow);
            let name = format!("throttle:{count}/{period_s}s");
            metrics::record_named(name, outcome, self.on_scripts(), Some(started.elapsed()));
        }
        throttle
    }

    /// RL.PSEUDONYM: a daily-rotating pseudonym of `identity` (an IP is canonicalised
    /// first; `prefix6` hashes an IPv6 address's network instead), so that no raw IP
    /// becomes a key. Always sends `NOW`, so the UTC day is this limiter's.
    pub async fn pseudonym(
        &self,
        identity: &str,
        scope: Option<&str>,
        prefix6: Option<u8>,
    ) -> Result<String, Unavailable> {
        let mut cmd = redis::cmd("RL.PSEUDONYM");
        cmd.arg(identity);
        if let Some(scope) = scope {
            cmd.arg(scope);
        }
        if let Some(bits) = prefix6 {
            cmd.arg("PREFIX6").arg(bits);
        }
        let now = self.now_us();
        cmd.arg("NOW").arg(now);
        if self.on_scripts() {
            return self.local_pseudonym(identity, scope, prefix6, now);
        }
        let answer = match self.send(cmd, Target::Any).await {
            Err(Error::ModuleNotLoaded(_)) if self.backend == Backend::Auto => {
                self.detected.found_no_module();
                return self.local_pseudonym(identity, scope, prefix6, now);
            }
            Ok(Value::BulkString(bytes)) => {
                String::from_utf8(bytes).map_err(|e| Error::UnexpectedReply {
                    command: "RL.PSEUDONYM".into(),
                    reply: format!("{:?}", e.as_bytes()),
                })
            }
            Ok(Value::SimpleString(text)) => Ok(text),
            Ok(other) => Err(Error::unexpected("RL.PSEUDONYM", &other)),
            Err(error) => Err(error),
        };
        answer.map_err(|error| Unavailable {
            decision: self.fail(error, "RL.PSEUDONYM"),
        })
    }

    /// RL.TOP: the keys the server denied most, worst first (the module's docs/top.md).
    /// On a cluster every primary is asked and their answers merged (a key on two, after
    /// a slot migration, gets its counts added), then cut to the query's count. Not a
    /// decision: the failure policy does not apply, every failure is returned. On
    /// `Backend::Scripts` it is [`Error::ModuleRequired`] without asking the server; so is
    /// a server without the module.
    pub async fn top(&self, query: &TopQuery) -> Result<Vec<TopEntry>, Error> {
        let cmd = query.command()?;
        if self.backend == Backend::Scripts {
            return Err(Error::ModuleRequired {
                command: "RL.TOP",
                why: "this limiter is on Backend::Scripts, and the scripts keep no denial summary (the module does, in each server): load the module and use Backend::Auto or Backend::Module".into(),
            });
        }
        let replies = tokio::time::timeout(self.timeout, self.conn.send_to_primaries(cmd))
            .await
            .map_err(|_| Error::Timeout(self.timeout))?
            .map_err(top_error)?;
        let answers = replies
            .iter()
            .map(|reply| match reply {
                Value::ServerError(error) => Err(top_error(error.clone().into())),
                reply => top::parse(reply),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(top::merge(answers, query.limit()))
    }

    /// RL.PSEUDONYM computed here, for the scripts backend.
    // The same error type as `pseudonym()`, whose callers get it.
    #[allow(clippy::result_large_err)]
    fn local_pseudonym(
        &self,
        identity: &str,
        scope: Option<&str>,
        prefix6: Option<u8>,
        now: i64,
    ) -> Result<String, Unavailable> {
        match &self.secret {
            Some(secret) => Ok(crate::pseudonym::pseudonym(
                secret, identity, scope, prefix6, now,
            )),
            None => Err(Unavailable {
                decision: self.fail(Error::NoSecret, "RL.PSEUDONYM"),
            }),
        }
    }

    /// The cache, the round trip, the reading of the reply, and the policy on failure.
    /// `counted`: the call is a decision for the metrics (a spend or an acquire; a peek,
    /// refund, reset, release or heartbeat belongs to a request already counted).
    #[allow(clippy::too_many_arguments)]
    async fn decide(
        &self,
        command: &'static str,
        entry: Entry,
        mode: Mode,
        counted: bool,
        build: impl FnOnce(Option<i64>) -> Cmd,
        read: impl FnOnce(&Value) -> Result<Decision, Error>,
    ) -> Decision {
        // With a clock its time goes to the server as NOW, so the cache and the module
        // share one timeline. Without one the server's clock decides, and the cache uses
        // the monotonic clock read *before* sending: the server decides no earlier, so a
        // cached denial ends no later than the real one, whatever the clocks' offset.
        let now = self.clock.as_ref().map(|clock| clock_checked(clock()));
        let instant = now.unwrap_or_else(monotonic_us);
        if let Some(cache) = &self.deny_cache {
            match mode {
                Mode::Refund | Mode::Reset | Mode::Impose => cache.forget(&entry.limits),
                Mode::Spend | Mode::Peek => {
                    if let Some(hit) = cache.lookup(&entry, instant) {
                        if self.metrics && counted {
                            let scripts = self.on_scripts();
                            metrics::record(&entry.limits, Outcome::CacheDenied, scripts, None);
                        }
                        return hit;
                    }
                }
            }
        }
        if entry.limits.is_empty() {
            return self.fail(Error::InvalidCall("no limit"), command);
        }
        let keys: Vec<&str> = entry.limits.iter().map(|l| l.key.as_str()).collect();
        let started = Instant::now();
        let result = self
            .send_limiter(build(now), &keys)
            .await
            .and_then(|reply| read(&reply));
        let took = started.elapsed();
        let decision = match result {
            Ok(decision) => {
                if let (Some(cache), Mode::Spend | Mode::Peek) = (&self.deny_cache, mode) {
                    cache.remember(entry.clone(), instant, &decision);
                }
                decision
            }
            Err(error) => self.fail(error, command),
        };
        if self.metrics && counted {
            let failed = decision.source == Source::Failure;
            let outcome = Outcome::of(failed, decision.allowed, self.shadow);
            metrics::record(&entry.limits, outcome, self.on_scripts(), Some(took));
        }
        decision
    }

    /// A limiter command on the backend in force: the module's, or its script (loaded
    /// again on NOSCRIPT, after a restart or a failover); with `Auto`, a server without
    /// the module switches this limiter to the scripts, for this call too.
    async fn send_limiter(&self, cmd: Cmd, keys: &[&str]) -> Result<Value, Error> {
        let target = keys.first().map_or(Target::Any, |k| Target::Key(k));
        if !self.on_scripts() {
            match self.send(cmd.clone(), target).await {
                Err(Error::ModuleNotLoaded(_)) if self.backend == Backend::Auto => {
                    self.detected.found_no_module();
                }
                other => return other,
            }
        }
        let Some((eval, script)) = backend::as_script(&cmd, keys) else {
            return Err(Error::InvalidCall("this command has no script"));
        };
        match self.send(eval.clone(), target).await {
            Err(Error::Redis(e)) if e.code() == Some("NOSCRIPT") => {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(script.source);
                let loaded = self.send(load, target).await?;
                if loaded != Value::BulkString(script.sha.clone().into_bytes())
                    && loaded != Value::SimpleString(script.sha.clone())
                {
                    return Err(Error::unexpected("SCRIPT LOAD", &loaded));
                }
                self.send(eval, target).await
            }
            other => other,
        }
    }

    async fn send(&self, cmd: Cmd, target: Target<'_>) -> Result<Value, Error> {
        let sent = tokio::time::timeout(self.timeout, self.conn.send(cmd, target)).await;
        if let Ok(Err(error)) = &sent {
            if error.is_io_error() || error.is_connection_dropped() || error.is_connection_refusal()
            {
                // Reconnected, the server may be another one, or have the module now.
                self.detected.forget();
            }
        }
        match sent {
            Ok(Ok(Value::ServerError(error))) => Err(not_loaded_hint(error.into())),
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(not_loaded_hint(error)),
            Err(_) => Err(Error::Timeout(self.timeout)),
        }
    }

    fn fail(&self, error: Error, command: &str) -> Decision {
        let report = || match &self.on_failure {
            Some(handler) => handler(&error, command),
            None => eprintln!(
                "redis-rl: {command} failed, failing {}: {error}",
                self.failure.word()
            ),
        };
        // A broken reporter must not take the request down with it.
        if catch_unwind(AssertUnwindSafe(report)).is_err() {
            eprintln!("redis-rl: the failure handler panicked");
        }
        Decision::failure(self.failure == FailurePolicy::Open, error)
    }
}

/// A mistake in the app's own limits is raised where it is made: the failure policy is
/// for Redis being unreachable or failing, and would otherwise hide it (fail open: every
/// request admitted; fail closed: every request refused).
fn misuse(error: Error) -> ! {
    panic!("{error}")
}

fn checked(limit: &Limit, cost: u64) {
    if let Err(error) = limit.validate().and_then(|()| limit.validate_cost(cost)) {
        misuse(error);
    }
}

/// 1973-01-01 in µs: below it, a clock is probably in seconds or milliseconds, which
/// the module refuses.
const MIN_NOW_US: i64 = 94_694_400_000_000;
/// The largest instant a sorted-set score holds exactly (year 2255).
const MAX_NOW_US: i64 = (1 << 53) - 1;

fn clock_checked(now: i64) -> i64 {
    if !(MIN_NOW_US..=MAX_NOW_US).contains(&now) {
        let unit = if now < 100_000_000_000 {
            "seconds"
        } else {
            "milliseconds"
        };
        panic!(
            "redis-rl: the limiter's clock must return unix time in microseconds; {now} looks like {unit}"
        );
    }
    now
}

fn throttle_checked(max_burst: u64, count: u64, period_s: u64, quantity: u64) {
    const MAX: u64 = 1_000_000_000_000_000;
    let bad = if max_burst > MAX {
        Some("max_burst must be from 0 to 10^15")
    } else if count == 0 || count > MAX {
        Some("count must be from 1 to 10^15")
    } else if period_s == 0 || period_s > 315_360_000 {
        Some("period must be from 1 s to ten years")
    } else if quantity > MAX {
        Some("quantity must be from 0 to 10^15")
    } else {
        None
    };
    if let Some(reason) = bad {
        misuse(Error::InvalidLimit {
            name: "RL.THROTTLE".into(),
            reason: reason.into(),
        });
    }
}

/// RL.TOP's failures; `unknown command` says the module is needed.
fn top_error(error: redis::RedisError) -> Error {
    if backend::is_unknown_rl_command(&error) {
        Error::ModuleRequired {
            command: "RL.TOP",
            why: format!("the server has no RL.TOP ({error}): add `loadmodule /path/to/libredis_rl.so` to its redis.conf, or run MODULE LOAD"),
        }
    } else {
        Error::Redis(error)
    }
}

/// `unknown command 'RL.…'` means the module is not loaded on this server: say so, and
/// what to do, in what the failure handler reports.
fn not_loaded_hint(error: redis::RedisError) -> Error {
    let text = error.to_string();
    if backend::is_unknown_rl_command(&error) {
        Error::ModuleNotLoaded(text)
    } else {
        Error::Redis(error)
    }
}
