//! Real servers for the tests: redis-server with the module (or without it), and a
//! 3-node cluster, each started by the test that needs it on free loopback ports and
//! killed when it is dropped (also when the test fails).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SECRET: &str = "some-test-secret";
/// A fixed instant (2024-06-17 07:29:09.8 UTC), so replies are exact numbers.
pub const T0: i64 = 1_718_609_349_800_000;

pub fn module() -> PathBuf {
    match std::env::var_os("RL_MODULE") {
        Some(path) => PathBuf::from(path),
        None => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/release/libredis_rl.so")
        }
    }
}

fn server_binary() -> String {
    std::env::var("RL_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// Unix µs that only move when told: the NOW the limiter sends, stepped instead of slept.
#[derive(Clone)]
pub struct FakeClock(Arc<AtomicI64>);

impl FakeClock {
    pub fn new() -> Self {
        FakeClock(Arc::new(AtomicI64::new(T0)))
    }
    /// Starting at `start` (unix µs).
    pub fn at(start: i64) -> Self {
        FakeClock(Arc::new(AtomicI64::new(start)))
    }
    pub fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms * 1000, Ordering::SeqCst);
    }
    pub fn as_fn(&self) -> impl Fn() -> i64 + Send + Sync + 'static {
        let clock = self.clone();
        move || clock.now()
    }
}

/// A loopback port nobody listens on (and, for a cluster node, its bus port too).
pub fn free_port(also_free: u16) -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if also_free == 0 {
            return port;
        }
        if port
            .checked_add(also_free)
            .is_some_and(|bus| TcpListener::bind(("127.0.0.1", bus)).is_ok())
        {
            return port;
        }
    }
}

pub struct Server {
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

impl Server {
    /// A server for the suite's backend: with the module, or, with
    /// `RL_BACKEND=scripts`, without it (the kit then decides through its scripts).
    pub fn start() -> Server {
        Self::spawn(!scripts_backend(), false)
    }

    /// A server without the module: every RL.* is an unknown command.
    pub fn bare() -> Server {
        Self::spawn(false, false)
    }

    /// A server with the module on a given port (to bring one back after a stop).
    pub fn start_on(port: u16) -> Server {
        Self::spawn_on(!scripts_backend(), false, port)
    }

    fn spawn(with_module: bool, cluster: bool) -> Server {
        Self::spawn_on(
            with_module,
            cluster,
            free_port(if cluster { 10000 } else { 0 }),
        )
    }

    fn spawn_on(with_module: bool, cluster: bool, port: u16) -> Server {
        let module = module();
        assert!(
            !with_module || module.is_file(),
            "module not found at {}: build it (cargo build --release at the repo top) or set RL_MODULE",
            module.display()
        );
        let dir = std::env::temp_dir().join(format!("rl-rust-kit-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new(server_binary());
        cmd.args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            // A test loads the module into a server that started without it.
            "--enable-module-command",
            "yes",
        ])
        .arg("--dir")
        .arg(&dir)
        .args(["--logfile", "server.log"])
        .env("RL_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if cluster {
            cmd.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ]);
        }
        if with_module {
            cmd.arg("--loadmodule").arg(&module);
        }
        let child = cmd.spawn().expect("redis-server (RL_SERVER) did not start");
        let mut server = Server { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.admin().is_err() {
            let exited = server.child.try_wait().ok().flatten().is_some();
            if exited || Instant::now() > deadline {
                let log =
                    std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
                panic!("redis-server on port {port} did not start:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain synchronous connection, for looking at what the module wrote.
    pub fn admin(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(1))?;
        redis::cmd("PING").query::<String>(&mut conn)?;
        Ok(conn)
    }

    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        cmd.query(&mut self.admin().unwrap()).unwrap()
    }

    /// `errorstat_MOVED` of `INFO errorstats`: redirections this server answered.
    pub fn moved(&self) -> u64 {
        let info: String = self.query(redis::cmd("INFO").arg("errorstats"));
        info.lines()
            .find_map(|line| line.strip_prefix("errorstat_MOVED:count="))
            .map_or(0, |n| n.trim().parse().unwrap())
    }

    pub fn reset_stats(&self) {
        let _: () = self.query(redis::cmd("CONFIG").arg("RESETSTAT"));
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let nodes: Vec<Server> = (0..3)
            .map(|_| Server::spawn(!scripts_backend(), true))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let status = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("redis-cli did not run");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Cluster { nodes };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cluster.ready() {
            assert!(
                Instant::now() < deadline,
                "the cluster did not reach cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster
    }

    fn ready(&self) -> bool {
        self.nodes.iter().all(|node| {
            let Ok(mut conn) = node.admin() else {
                return false;
            };
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut conn)
                .unwrap_or_default();
            let nodes: String = redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut conn)
                .unwrap_or_default();
            info.contains("cluster_state:ok") && nodes.lines().count() == self.nodes.len()
        })
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Server::url).collect()
    }

    pub fn moved(&self) -> u64 {
        self.nodes.iter().map(Server::moved).sum()
    }

    pub fn reset_stats(&self) {
        self.nodes.iter().for_each(Server::reset_stats);
    }

    /// The node that holds `key`.
    pub fn node_of(&self, key: &str) -> &Server {
        let slot: u16 = self.nodes[0].query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key));
        let shards: redis::Value = self.nodes[0].query(redis::cmd("CLUSTER").arg("SLOTS"));
        let redis::Value::Array(ranges) = shards else {
            panic!("CLUSTER SLOTS: {shards:?}")
        };
        for range in ranges {
            let redis::Value::Array(fields) = range else {
                continue;
            };
            let (redis::Value::Int(lo), redis::Value::Int(hi), redis::Value::Array(master)) =
                (&fields[0], &fields[1], &fields[2])
            else {
                continue;
            };
            if (*lo..=*hi).contains(&(slot as i64)) {
                let redis::Value::Int(port) = master[1] else {
                    continue;
                };
                return self
                    .nodes
                    .iter()
                    .find(|n| i64::from(n.port) == port)
                    .unwrap();
            }
        }
        panic!("no node serves slot {slot}");
    }
}

/// A unique, hash-tagged base key per test.
/// Whether this run of the suite is the scripts backend's (`RL_BACKEND=scripts`: every
/// server the suite starts lacks the module).
pub fn scripts_backend() -> bool {
    std::env::var("RL_BACKEND").is_ok_and(|b| b == "scripts")
}

/// The suite's limiter: the default backend (auto), with the secret the servers have,
/// so that RL.PSEUDONYM gives the same answer on both backends.
pub fn rate_limiter(
    conn: impl Into<redis_rl_client::Connection>,
    policy: redis_rl_client::FailurePolicy,
) -> redis_rl_client::RateLimiter {
    redis_rl_client::RateLimiter::new(conn, policy)
        .pseudonym_secret(SECRET)
        // Tests that need an answer get one on a loaded 2-core machine too (a script's
        // first call loads it: three round trips); the failure tests set their bound.
        .timeout(std::time::Duration::from_secs(2))
}

pub fn key(name: &str) -> String {
    format!("rl:{{{name}}}")
}

/// Whether the module has `command` (RL.CONCURRENCY and RL.THROTTLE came with issue 16);
/// a test without it says so and passes.
pub fn has(server: &Server, command: &str) -> bool {
    let info: redis::Value = server.query(redis::cmd("COMMAND").arg("INFO").arg(command));
    let present = matches!(&info, redis::Value::Array(items) if items.first().is_some_and(|i| *i != redis::Value::Nil));
    if !present {
        eprintln!("SKIPPED: this build of the module has no {command}");
    }
    present
}

/// Runs `call` on its own task and returns its panic message, if it panicked.
pub async fn panic_of<F>(call: F) -> Option<String>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send,
{
    let error = tokio::spawn(call).await.err()?;
    let payload = error.into_panic();
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
}
