//! The two backends: the module's commands, or the kit's scripts with the same
//! contract, on the same keys; `Auto` moving between them as the server changes.

use std::time::Duration;

use crate::common::{key, module, rate_limiter, FakeClock, Server};
use redis_rl_client::{connect, Backend, FailurePolicy, Limit, RateLimiter, Source};

fn stat(server: &Server, command: &str) -> u64 {
    let info: String = server.query(redis::cmd("INFO").arg("commandstats"));
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

fn limiter(server: &Server, clock: &FakeClock, backend: Backend) -> RateLimiter {
    rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .backend(backend)
        .clock(clock.as_fn())
        .on_failure(|error, command| panic!("{command} failed: {error}"))
}

#[tokio::test]
async fn module_and_scripts_share_one_budget_on_the_same_keys() {
    let server = Server::start();
    if crate::common::scripts_backend() {
        println!("SKIPPED: needs a server with the module (the suite runs without it)");
        return;
    }
    let clock = FakeClock::new();
    let native = limiter(&server, &clock, Backend::Module);
    let scripted = limiter(&server, &clock, Backend::Scripts);
    let window = Limit::slidecount("w", key("shared"), 3, Duration::from_secs(60));
    let answers: Vec<(bool, i64)> = [
        native.check(&window, 1).await,
        scripted.check(&window, 1).await,
        native.check(&window, 1).await,
        scripted.check(&window, 1).await,
    ]
    .iter()
    .map(|d| (d.allowed, d.remaining))
    .collect();
    assert_eq!(answers, [(true, 2), (true, 1), (true, 0), (false, 0)]);
    assert_eq!(stat(&server, "rl.slidecount"), 2);
    assert!(stat(&server, "evalsha") >= 2);
    // The same pseudonym, from the server's secret and from the app's copy of it.
    let from_module = native
        .pseudonym("2001:DB8::1", Some("s"), None)
        .await
        .unwrap();
    let in_app = scripted
        .pseudonym("2001:DB8::1", Some("s"), None)
        .await
        .unwrap();
    assert_eq!(from_module, in_app);
}

#[tokio::test]
async fn scripts_are_loaded_again_after_a_flush() {
    let server = Server::bare();
    let clock = FakeClock::new();
    let rl = limiter(&server, &clock, Backend::Scripts);
    let limit = Limit::gcra("g", key("flush"), 10, Duration::from_secs(1)).burst(2);
    assert!(rl.check(&limit, 1).await.allowed);
    // A restart or a failover empties the script cache: NOSCRIPT, then loaded again.
    let _: () = server.query(redis::cmd("SCRIPT").arg("FLUSH"));
    let second = rl.check(&limit, 1).await;
    assert_eq!((second.allowed, second.source), (true, Source::Redis));
    assert!(!rl.check(&limit, 1).await.allowed);
}

#[tokio::test]
async fn auto_takes_the_scripts_then_the_module_once_it_is_loaded() {
    let server = Server::bare();
    let clock = FakeClock::new();
    let rl = rate_limiter(connect(&server.url()).unwrap(), FailurePolicy::Closed)
        .clock(clock.as_fn())
        .on_failure(|_, _| {});
    let limit = Limit::fixed("f", key("auto"), 5, Duration::from_secs(60));
    // No module: the first call learns it and is answered by the script, not lost.
    let first = rl.check(&limit, 1).await;
    assert_eq!(
        (first.allowed, first.remaining, first.source),
        (true, 4, Source::Redis)
    );
    assert!(rl.on_scripts());
    // The module arrives; the next reconnect makes the kit try it again.
    let _: () = server.query(
        redis::cmd("MODULE")
            .arg("LOAD")
            .arg(module().to_str().unwrap()),
    );
    let _: () = server.query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal"));
    let mut answered = None;
    for _ in 0..5 {
        let d = rl.check(&limit, 1).await;
        if d.source == Source::Redis {
            answered = Some(d);
            break;
        }
    }
    let answered = answered.expect("no answer after the reconnect");
    assert!(!rl.on_scripts(), "still on the scripts after a reconnect");
    assert_eq!(stat(&server, "rl.fixed"), 1);
    // One budget across the switch: the script's spend is the module's too.
    assert_eq!(answered.remaining, 3);
}
