//! Every way Redis can fail goes through the failure policy, bounded in time, reported.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::{free_port, panic_of, FakeClock, Server};
use redis_rl_client::{
    connect, ratelimit_headers, Decision, Error, FailurePolicy, Limit, RateLimiter, Source,
};

/// Generous against a loaded 2-core machine, far below what a default client waits.
const BOUND: Duration = Duration::from_secs(2);

fn limit() -> Limit {
    Limit::gcra("api", "rl:{failure}", 10, Duration::from_secs(1))
}

#[derive(Clone, Default)]
struct Reports(Arc<Mutex<Vec<(String, String)>>>);

impl Reports {
    fn limiter(&self, url: &str, policy: FailurePolicy) -> RateLimiter {
        let seen = self.0.clone();
        crate::common::rate_limiter(connect(url).unwrap(), policy)
            // The kit's own bound, which these tests measure.
            .timeout(redis_rl_client::limiter::DEFAULT_TIMEOUT)
            .on_failure(move |error, command| {
                seen.lock()
                    .unwrap()
                    .push((command.to_string(), error.to_string()))
            })
    }
    fn seen(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().clone()
    }
}

async fn checked(url: &str, policy: FailurePolicy) -> (Decision, Reports, Duration) {
    let reports = Reports::default();
    let rl = reports.limiter(url, policy);
    let started = Instant::now();
    let decision = rl.check(&limit(), 1).await;
    (decision, reports, started.elapsed())
}

/// A TCP listener that accepts and then never answers, or hangs up after reading.
struct Listener {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    fn new(hang_up: bool) -> Listener {
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        socket.set_nonblocking(true).unwrap();
        let port = socket.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !stopping.load(Ordering::SeqCst) {
                match socket.accept() {
                    Ok((mut conn, _)) => {
                        if hang_up {
                            conn.set_nonblocking(false).unwrap();
                            conn.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
                            let _ = conn.read(&mut [0; 4096]);
                        } else {
                            held.push(conn);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Listener {
            port,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[tokio::test]
async fn dead_port() {
    let url = format!("redis://127.0.0.1:{}", free_port(0));
    for policy in [FailurePolicy::Open, FailurePolicy::Closed] {
        let (decision, reports, took) = checked(&url, policy).await;
        assert_eq!(decision.allowed, policy == FailurePolicy::Open);
        assert_eq!(decision.source, Source::Failure);
        let error = decision.error.as_deref().expect("the error is kept");
        assert!(
            matches!(error, Error::Redis(e) if e.is_connection_refusal()),
            "{error:?}"
        );
        assert_eq!(reports.seen().len(), 1, "reported exactly once");
        assert_eq!(reports.seen()[0].0, "RL.GCRA");
        assert!(took < BOUND, "took {took:?}");
        assert!(
            ratelimit_headers(&decision, true).is_empty(),
            "nothing is known, so no headers"
        );
    }
}

#[tokio::test]
async fn server_that_never_answers() {
    let silent = Listener::new(false);
    let reports = Reports::default();
    let rl = reports
        .limiter(&silent.url(), FailurePolicy::Closed)
        .timeout(Duration::from_millis(100));
    let started = Instant::now();
    let decision = rl.check(&limit(), 1).await;
    let took = started.elapsed();
    assert!(!decision.allowed);
    assert!(
        matches!(decision.error.as_deref(), Some(Error::Timeout(t)) if *t == Duration::from_millis(100))
    );
    assert_eq!(reports.seen().len(), 1);
    assert!(
        took >= Duration::from_millis(100) && took < BOUND,
        "took {took:?}"
    );
    // The same with the default timeout: whatever fires first, the call is bounded.
    let (decision, reports, took) = checked(&silent.url(), FailurePolicy::Open).await;
    assert!(decision.allowed && decision.source == Source::Failure);
    assert_eq!(reports.seen().len(), 1);
    assert!(took < BOUND, "took {took:?}");
}

#[tokio::test]
async fn lost_connection() {
    let hang_up = Listener::new(true);
    let (decision, reports, took) = checked(&hang_up.url(), FailurePolicy::Open).await;
    assert!(decision.allowed && decision.source == Source::Failure);
    assert!(
        matches!(decision.error.as_deref(), Some(Error::Redis(_))),
        "{:?}",
        decision.error
    );
    assert_eq!(reports.seen().len(), 1);
    assert!(took < BOUND, "took {took:?}");
}

#[tokio::test]
async fn module_not_loaded() {
    let bare = Server::bare();
    for policy in [FailurePolicy::Open, FailurePolicy::Closed] {
        let reports = Reports::default();
        let rl = reports
            .limiter(&bare.url(), policy)
            .backend(redis_rl_client::Backend::Module);
        let decision = rl.check(&limit(), 1).await;
        assert_eq!(decision.allowed, policy == FailurePolicy::Open);
        let message = decision.error.as_ref().unwrap().to_string();
        assert!(message.contains("unknown command"), "{message}");
        assert!(message.contains("module is not loaded"), "{message}");
        assert!(message.contains("loadmodule"), "{message}");
        assert_eq!(reports.seen().len(), 1);
        assert!(reports.seen()[0].1.contains("unknown command"));
    }
}

#[tokio::test]
async fn mistakes_are_raised_to_the_caller_never_sent_to_the_failure_policy() {
    let server = Server::start();
    let reports = Reports::default();
    let url = server.url();
    for policy in [FailurePolicy::Open, FailurePolicy::Closed] {
        let rl = reports.limiter(&url, policy);
        let zero = panic_of(async move {
            rl.check(
                &Limit::fixed("f", "rl:{bad}", 0, Duration::from_secs(10)),
                1,
            )
            .await
        })
        .await
        .expect("a limit of 0 was sent");
        assert!(zero.contains("invalid limit 'f'"), "{zero}");
        assert!(zero.contains("from 1 to"), "{zero}");
    }
    // The line docs/frameworks/tower.md shows, as it is.
    let burst = Limit::gcra("burst", "rl:{bad}", 10, Duration::from_secs(1)).burst(0);
    assert_eq!(
        burst.validate().unwrap_err().to_string(),
        "redis-rl: invalid limit 'burst': the burst must be from 1 to 1000000000000000, not 0"
    );
    // A clock in milliseconds instead of µs: the kit names the unit.
    let ms_clock = reports
        .limiter(&url, FailurePolicy::Open)
        .clock(|| 1_718_609_349_800);
    let wrong_unit = panic_of(async move { ms_clock.check(&limit(), 1).await })
        .await
        .expect("a millisecond clock was sent");
    assert!(
        wrong_unit.contains("looks like milliseconds"),
        "{wrong_unit}"
    );
    // COST on a lease, RL.ALL misuse: caught before sending.
    let rl = reports.limiter(&url, FailurePolicy::Open);
    let lease = Limit::concurrency("inflight", "rl:{bad}:c", 5, Duration::from_secs(30));
    let cost = panic_of(async move {
        rl.check_all_leased(
            &[lease, limit()],
            &[2, 1],
            redis_rl_client::Mode::Spend,
            "id",
        )
        .await
    })
    .await
    .expect("COST 2 on a lease was sent");
    assert!(cost.contains("a lease is one slot"), "{cost}");
    let rl = reports.limiter(&url, FailurePolicy::Open);
    let mismatch = panic_of(async move {
        rl.check_all(
            &[limit(), limit()],
            &[1, 2, 3],
            redis_rl_client::Mode::Spend,
        )
        .await
    })
    .await
    .expect("three costs for two limits were sent");
    assert!(mismatch.contains("one cost per limit"), "{mismatch}");
    let rl = reports.limiter(&url, FailurePolicy::Open);
    assert!(
        panic_of(async move { rl.check_all(&[], 1, redis_rl_client::Mode::Spend).await })
            .await
            .is_some()
    );
    // IMPOSE on limits without a block.
    for all in [false, true] {
        let rl = reports.limiter(&url, FailurePolicy::Open);
        let imposed = panic_of(async move {
            let counter = Limit::counter("c", "rl:{bad}:n", 5, Duration::from_secs(30));
            if all {
                rl.check_all(&[counter, limit()], 1, redis_rl_client::Mode::Impose)
                    .await
            } else {
                rl.impose(&counter).await
            }
        })
        .await
        .expect("IMPOSE without a block was sent");
        assert!(
            imposed.contains("IMPOSE needs a limit with a block"),
            "{imposed}"
        );
    }
    // Nothing reached Redis, and the failure policy decided nothing.
    assert!(reports.seen().is_empty(), "{:?}", reports.seen());
    let calls: String = server.query(redis::cmd("INFO").arg("commandstats"));
    assert!(!calls.contains("cmdstat_rl."), "{calls}");
}

#[tokio::test]
async fn a_layer_with_a_bad_limit_fails_at_startup() {
    let rl =
        crate::common::rate_limiter(connect("redis://127.0.0.1:1").unwrap(), FailurePolicy::Open);
    let bad = Limit::gcra("burst", "rl:demo", 10, Duration::from_secs(1)).burst(0);
    match redis_rl_client::RateLimitLayer::try_new(rl, [bad]) {
        Err(Error::InvalidLimit { name, reason }) => {
            assert_eq!(name, "burst");
            assert!(reason.contains("burst"), "{reason}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a burst of 0 was accepted"),
    }
}

#[tokio::test]
async fn a_broken_reporter_does_not_take_the_request_down() {
    let bare = Server::bare();
    let broken = crate::common::rate_limiter(connect(&bare.url()).unwrap(), FailurePolicy::Open)
        .backend(redis_rl_client::Backend::Module)
        .on_failure(|_, _| panic!("broken reporter"));
    let d = broken.check(&limit(), 1).await;
    assert!(d.allowed && d.source == Source::Failure);
}

#[tokio::test]
async fn pseudonym_failure_carries_the_policy() {
    let url = format!("redis://127.0.0.1:{}", free_port(0));
    let reports = Reports::default();
    let rl = reports
        .limiter(&url, FailurePolicy::Closed)
        .clock(FakeClock::new().as_fn());
    let unavailable = rl.pseudonym("192.0.2.1", None, None).await.unwrap_err();
    assert!(!unavailable.decision.allowed);
    assert_eq!(
        reports.seen(),
        [("RL.PSEUDONYM".to_string(), reports.seen()[0].1.clone())]
    );
}

#[tokio::test]
async fn recovers_when_redis_comes_back() {
    // The connection is lazy and reconnects: a limiter made while Redis was away works
    // once it is there, with no restart of the app.
    let server = Server::start();
    let port = server.port;
    drop(server);
    let reports = Reports::default();
    let rl = reports.limiter(&format!("redis://127.0.0.1:{port}"), FailurePolicy::Closed);
    assert_eq!(rl.check(&limit(), 1).await.source, Source::Failure);
    let _back = Server::start_on(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = rl.check(&limit(), 1).await;
        if d.source == Source::Redis {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never reconnected: {:?}",
            d.error
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn dead_cluster() {
    // A cluster client whose nodes are all gone: the same policy, the same bound.
    let urls = [
        format!("redis://127.0.0.1:{}", free_port(0)),
        format!("redis://127.0.0.1:{}", free_port(0)),
    ];
    let reports = Reports::default();
    let seen = reports.0.clone();
    let rl = crate::common::rate_limiter(
        redis_rl_client::connect_cluster(&urls).unwrap(),
        FailurePolicy::Closed,
    )
    .on_failure(move |error, command| {
        seen.lock()
            .unwrap()
            .push((command.to_string(), error.to_string()))
    });
    let started = Instant::now();
    let decision = rl.check(&limit(), 1).await;
    assert!(!decision.allowed && decision.source == Source::Failure);
    assert_eq!(reports.seen().len(), 1);
    assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
    assert!(rl.pseudonym("192.0.2.1", None, None).await.is_err());
}
