//! Real servers for the integration tests: each test starts its own redis-server (or
//! valkey-server, with RL_SERVER) on a free loopback port with the module loaded, and
//! the server is killed when the handle is dropped.
#![allow(dead_code)]

pub mod cluster;
pub mod leases;
pub mod workload;

// source_files() and source_hash(): the build id, computed as build.rs computes it.
include!("../../tools/source_hash.rs");

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use redis::{Connection, Value};

/// The server's stderr, in its temp dir.
const STDERR_FILE: &str = "stderr.log";

pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

/// The module under test: RL_MODULE, or the release build of this checkout.
pub fn module_path() -> PathBuf {
    let path = std::env::var_os("RL_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_rl.so")
        });
    assert!(
        path.exists(),
        "{} is missing: build it first (make test does)",
        path.display()
    );
    path
}

/// The build id of the sources in this checkout (what `INFO rl` shows as `rl_build`
/// for a module built from them).
pub fn current_build_id() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    source_hash(root).unwrap_or_else(|e| panic!("cannot hash the sources: {e}"))
}

/// `rl_build` from `INFO rl`, if the module shows one.
pub fn build_id(c: &mut Connection) -> Option<String> {
    let info: String = redis::cmd("INFO").arg("rl").query(c).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("rl_build:"))
        .map(|v| v.trim().to_string())
}

/// Refuses (once per test process, on the first server with the module) to test a
/// module built from other sources than this checkout's: `cargo test` does not rebuild
/// target/release/libredis_rl.so. A module given by RL_MODULE is the user's choice.
fn check_build_id(c: &mut Connection) {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    if std::env::var_os("RL_MODULE").is_some() {
        return;
    }
    let verdict = CHECKED.get_or_init(|| {
        let want = current_build_id();
        match build_id(c) {
            Some(got) if got == want => Ok(()),
            got => Err(format!(
                "target/release/libredis_rl.so was built from other sources: run \
                 `cargo build --release` or `make test` (its build id is {}, the \
                 sources' is {want})",
                got.as_deref().unwrap_or("missing")
            )),
        }
    });
    if let Err(e) = verdict {
        panic!("{e}");
    }
}

/// Reports the running test as skipped, with why and what would let it run: a
/// `SKIPPED: <test>: <why>` line written straight to stderr. `cargo test` captures
/// only `print!`/`eprint!`, so the line shows even for a test that then returns
/// (and counts as passed there); the Makefile counts these lines and prints them
/// after each run, so a skip is never read as a pass.
pub fn skipped(why: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("?");
    let line = format!("\nSKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

pub fn server_binary() -> String {
    std::env::var("RL_SERVER").unwrap_or_else(|_| "redis-server".into())
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

impl Server {
    /// A server with the module and nothing persisted.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Extra `--name value` configuration on top of the defaults.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::launch(extra, true)
    }

    /// A server without the module (a replica that only applies core commands).
    pub fn start_without_module(extra: &[&str]) -> Server {
        Server::launch(extra, false)
    }

    /// A server without the module, with extra environment variables.
    pub fn start_without_module_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch_full(extra, false, env)
    }

    /// A server with the module and extra environment variables (e.g. RL_SECRET).
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Server {
        Server::launch_full(extra, true, env)
    }

    fn launch(extra: &[&str], with_module: bool) -> Server {
        Server::launch_full(extra, with_module, &[])
    }

    fn launch_full(extra: &[&str], with_module: bool, env: &[(&str, &str)]) -> Server {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        Server::launch_each(|| extra.clone(), with_module, env)
    }

    /// A server with the module whose extra configuration is made afresh for each
    /// attempt (a cluster node's bus port, chosen free like the client port).
    pub fn start_with_fresh(extra: impl Fn() -> Vec<String>, env: &[(&str, &str)]) -> Server {
        Server::launch_each(extra, true, env)
    }

    fn launch_each(
        make_extra: impl Fn() -> Vec<String>,
        with_module: bool,
        env: &[(&str, &str)],
    ) -> Server {
        let mut last_error = String::new();
        // A port can be taken between choosing and binding it: try a few.
        for _ in 0..5 {
            let extra = make_extra();
            let dir = tempfile::tempdir().expect("temp dir");
            let port = free_port();
            let mut cmd = Command::new(server_binary());
            cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .args(["--logfile", "server.log"]);
            if with_module {
                cmd.arg("--loadmodule").arg(module_path());
            }
            cmd.args(&extra)
                .env_remove("RL_SECRET")
                .envs(env.iter().copied())
                .stdout(Stdio::null())
                // A Rust panic's message goes to stderr (the panic hook), not to the
                // server log: keep it, for `panics()`.
                .stderr(
                    std::fs::File::create(dir.path().join(STDERR_FILE))
                        .map(Stdio::from)
                        .expect("stderr file"),
                );
            let child = cmd.spawn().expect("could not start redis-server");
            let mut server = Server { child, port, dir };
            // A later `--dir` in `extra` wins over the harness's own.
            let expected_dir = extra
                .windows(2)
                .rfind(|w| w[0] == "--dir")
                .map(|w| PathBuf::from(&w[1]))
                .unwrap_or_else(|| server.dir.path().to_path_buf());
            match server.wait_ready(&expected_dir) {
                Ok(()) => {
                    if with_module {
                        check_build_id(&mut server.conn());
                    }
                    return server;
                }
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start: {last_error}");
    }

    fn wait_ready(&mut self, expected_dir: &std::path::Path) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("exited with {status}: {}", self.log()));
            }
            if let Ok(mut c) = self.try_conn() {
                // PING fails while the dataset is still loading.
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    // Another process may have taken the port between choosing and
                    // binding it: only our own server reports our data directory.
                    let dir: Vec<String> = redis::cmd("CONFIG")
                        .arg("GET")
                        .arg("dir")
                        .query(&mut c)
                        .unwrap_or_default();
                    let ours = expected_dir.canonicalize().ok();
                    let theirs = dir
                        .get(1)
                        .and_then(|d| std::path::Path::new(d).canonicalize().ok());
                    if ours.is_some() && ours == theirs {
                        return Ok(());
                    }
                    return Err(format!("port {} answered by another server", self.port));
                }
            }
            if Instant::now() > deadline {
                return Err(format!("no answer within 10 s: {}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// What the server process wrote to its stderr (a panic's message, among others).
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join(STDERR_FILE)).unwrap_or_default()
    }

    /// The lines of the server log and of stderr that report a Rust panic.
    pub fn panics(&self) -> Vec<String> {
        let (log, stderr) = (self.log(), self.stderr());
        log.lines()
            .chain(stderr.lines())
            .filter(|l| l.contains("panicked"))
            .map(String::from)
            .collect()
    }

    fn try_conn(&self) -> redis::RedisResult<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    pub fn conn(&self) -> Connection {
        self.try_conn().expect("connect")
    }

    /// Whether the process is still running (a panic in a module aborts it).
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The four integers of a limiter reply.
pub type Reply = (i64, i64, i64, i64);

/// Runs a command given as words, e.g. `rl(&mut c, "RL.FIXED k 8 10 NOW 17...")`.
pub fn rl(c: &mut Connection, line: &str) -> Reply {
    let mut cmd = redis::Cmd::new();
    for word in line.split_whitespace() {
        cmd.arg(word);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Runs a command and returns its error text (panics if it succeeded).
pub fn rl_err(c: &mut Connection, args: &[&[u8]]) -> String {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(v) => panic!("{:?} succeeded: {v:?}", lossy(args)),
        Err(e) => e.to_string(),
    }
}

fn lossy(args: &[&[u8]]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A fixed instant (a multiple of every window the tests use) in microseconds.
pub const T0: u64 = 1_764_480_000_000_000;

/// Every key with its DUMP and PEXPIRETIME, sorted: a snapshot to compare before and
/// after. (One pipeline for all the keys: the stepwise tests take one per step.)
pub fn snapshot(c: &mut Connection) -> Vec<(Vec<u8>, Option<Vec<u8>>, i64)> {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("DUMP").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let replies: Vec<Value> = if keys.is_empty() {
        Vec::new()
    } else {
        pipe.query(c).expect("DUMP, PEXPIRETIME")
    };
    assert_eq!(replies.len(), 2 * keys.len());
    let mut out: Vec<_> = keys
        .into_iter()
        .zip(replies.chunks(2))
        .map(|(k, pair)| {
            let dump: Option<Vec<u8>> = redis::from_redis_value(&pair[0]).expect("DUMP");
            let at: i64 = redis::from_redis_value(&pair[1]).expect("PEXPIRETIME");
            (k, dump, at)
        })
        .collect();
    out.sort();
    out
}

/// Runs a command given as words and returns the raw result.
pub fn query_line(c: &mut Connection, line: &str) -> redis::RedisResult<Value> {
    let mut cmd = redis::Cmd::new();
    for w in line.split_whitespace() {
        cmd.arg(w);
    }
    cmd.query(c)
}

/// The error a call gets, as the server's line `CODE detail`; panics if it succeeded.
pub fn err_line(c: &mut Connection, line: &str) -> String {
    match query_line(c, line) {
        Ok(v) => panic!("{line}: succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// Bounded polling until the replica reports its link to the primary up.
pub fn wait_link(primary: &Server, replica: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut r = replica.conn();
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut r)
            .unwrap_or_default();
        if info.lines().any(|l| l.trim() == "master_link_status:up") {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replication link not up within 30 s\nprimary log:\n{}\nreplica log:\n{}",
            primary.log(),
            replica.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A primary with an AOF and a replica without the module, linked.
pub fn primary_with_aof_and_replica() -> (Server, Server) {
    let primary = Server::start_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--appendonly",
        "yes",
        "--enable-debug-command",
        "yes",
    ]);
    let port = primary.port.to_string();
    let replica = Server::start_without_module(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &replica);
    (primary, replica)
}

/// Once the replica has every write: each key has a TTL, and the replica and an AOF
/// reload hold the primary's keys, values and expiry instants. Returns that snapshot.
pub fn same_on_the_replica_and_after_loadaof(
    p: &mut redis::Connection,
    replica: &Server,
) -> Vec<(Vec<u8>, Option<Vec<u8>>, i64)> {
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(p).unwrap();
    let expected = snapshot(p);
    assert!(
        expected.iter().all(|(_, _, at)| *at > 0),
        "a key without a TTL: {expected:?}"
    );
    assert_eq!(
        snapshot(&mut replica.conn()),
        expected,
        "the replica differs"
    );
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(p).unwrap();
    assert_eq!(snapshot(p), expected, "the AOF reload differs");
    expected
}

/// `CONFIG SET rl.secret-file <value>`.
pub fn set_secret_file(c: &mut Connection, value: &str) -> redis::RedisResult<()> {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("rl.secret-file")
        .arg(value)
        .query(c)
}

/// What `CONFIG GET rl.secret-file` shows.
pub fn secret_file_config(c: &mut Connection) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rl.secret-file")
        .query(c)
        .expect("CONFIG GET");
    assert_eq!(pair.first().map(String::as_str), Some("rl.secret-file"));
    pair.get(1).cloned().unwrap_or_default()
}

/// redis-cell's release build: RL_REDIS_CELL if set (and then only there), else
/// `<repo>/../shared/anchors/...` (a CI checkout has `shared/` beside it), else
/// /work/shared. Without it, the calling test is reported as skipped (SKIPPED on
/// stderr, saying how to provide it), and the caller runs what it can without it.
pub fn redis_cell() -> Option<std::path::PathBuf> {
    let relative = std::path::Path::new("shared/anchors/redis-cell/libredis_cell.so");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tried: Vec<std::path::PathBuf> = match std::env::var_os("RL_REDIS_CELL") {
        Some(path) => vec![std::path::PathBuf::from(path)],
        None => repo
            .parent()
            .map(|p| p.join(relative))
            .into_iter()
            .chain([std::path::Path::new("/work").join(relative)])
            .collect(),
    };
    let found = tried.iter().find(|p| p.is_file()).cloned();
    if found.is_none() {
        skipped(&format!(
            "redis-cell not found (tried {tried:?}): set RL_REDIS_CELL to the path of a \
             release build of redis-cell's libredis_cell.so (github.com/brandur/redis-cell) \
             to run the tests that compare with it"
        ));
    }
    found
}
