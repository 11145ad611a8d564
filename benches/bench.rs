//! The benchmark harness: `make bench` (full) and `make bench-quick` (under 1 minute).
//!
//! Starts its own redis-server with the module (RL_SERVER and RL_MODULE select others,
//! as in the tests), loads the reference Lua scripts, drives the server from one
//! single-threaded load generator over several connections, and prints Markdown on
//! stdout (progress goes to stderr):
//!
//! - per workload (many keys mostly admitted / one hot key mostly denied, pipelined /
//!   unpipelined) and per command (INCR, each RL.* command, the Lua script it
//!   replaces): ops/s seen by the client, the server's CPU per call (`usec` over
//!   `calls` of INFO commandstats, reset before each run; for EVALSHA it includes the
//!   script's inner calls), the ratio to INCR and the Lua script's ratio to the command;
//! - memory per limiter identity: `used_memory` growth over many identities, module
//!   and script on the same keys with the same data;
//! - RL.SLIDELOG against its script on a log in a steady state: about
//!   STEADY_ENTRIES entries inside the window, each call at an advancing `now` trimming
//!   about one expired entry and admitting one (what the ≥ 3 × target is about);
//! - RL.SLIDELOG against its script on one call that trims N expired entries (the
//!   worst case).
//!
//! Every figure is the median over rounds; each round runs everything once, and the
//! ratios are taken within a round before the median. Module and script do the same
//! work: the same keys in the same order, limit 100 per 60 s (RL.GCRA: per hour), and
//! one fixed `now` per run passed to both (`NOW` for the module, the script's ARGV,
//! computed by the client as the seed's PHP does). Each run starts from an empty
//! database.
//!
//! Arguments: `--quick`, `--rounds N` (at least 3). `cargo bench` adds `--bench`,
//! which is ignored. `make -s bench > BENCHMARKS.md` records a run.

use std::error::Error;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

type Res<T> = Result<T, Box<dyn Error>>;

const LIMIT: u64 = 100;
const WINDOW_S: u64 = 60;
const WINDOW_US: u64 = WINDOW_S * 1_000_000;
/// RL.GCRA's state lasts one emission interval (window / limit) per admitted call: at
/// 100 per hour that is 36 s, so no identity expires in the middle of a run.
const GCRA_WINDOW_S: u64 = 3_600;
/// Connections of the load generator.
const CONNECTIONS: usize = 4;
/// Commands per batch on each connection in the pipelined workloads.
const PIPELINE: usize = 32;
/// Many-keys workloads spread their requests over requests / KEY_SHARE identities, so
/// an identity sees about that many requests per run: far below the limit.
const KEY_SHARE: usize = 10;
/// Entries in the logs of the trim measurement.
const TRIM_SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
/// Entries inside the window of each log in the steady-state measurement: the log
/// size the RL.SLIDELOG ≥ 3 × target is about.
const STEADY_ENTRIES: usize = 100;
/// Its limit, per WINDOW_S: above STEADY_ENTRIES + 1, so every call is admitted.
const STEADY_LIMIT: u64 = 200;
/// Its logs, each called in turn at the same `now` before `now` advances. At least one
/// in-flight load's worth (CONNECTIONS × PIPELINE): `drive` sends a batch only once
/// every batch CONNECTIONS before it has been answered, so two calls on the same log,
/// that many requests apart, run in order.
const STEADY_LOGS: usize = 200;
const _: () = assert!(STEADY_LOGS >= CONNECTIONS * PIPELINE);
/// Memory hardly varies from round to round: it is measured in the first rounds only.
const MEMORY_ROUNDS: usize = 3;

const LOG_LUA: &str = include_str!("../lua/sliding_window_log.lua");
const COUNTER_LUA: &str = include_str!("../lua/sliding_window_counter.lua");
const FIXED_LUA: &str = include_str!("../lua/fixed_window.lua");
const GCRA_LUA: &str = include_str!("gcra.lua");

// ---------------------------------------------------------------------------------
// Settings

struct Mode {
    name: &'static str,
    rounds: usize,
    pipelined_requests: usize,
    unpipelined_requests: usize,
    memory_identities: usize,
    /// Expired entries per trim measurement (spread over several logs).
    trim_entries: usize,
    /// Calls per steady-state run (spread over STEADY_LOGS logs).
    steady_calls: usize,
}

const FULL: Mode = Mode {
    name: "full",
    rounds: 5,
    pipelined_requests: 100_000,
    unpipelined_requests: 20_000,
    memory_identities: 100_000,
    trim_entries: 200_000,
    steady_calls: 100_000,
};

const QUICK: Mode = Mode {
    name: "quick",
    rounds: 3,
    pipelined_requests: 20_000,
    unpipelined_requests: 4_000,
    memory_identities: 20_000,
    trim_entries: 40_000,
    steady_calls: 20_000,
};

fn parse_args() -> Res<Mode> {
    let mut mode = FULL;
    let mut rounds = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => mode = QUICK,
            "--bench" => {}
            "--rounds" => {
                let n: usize = args.next().ok_or("--rounds needs a number")?.parse()?;
                if n < 3 {
                    return Err("--rounds must be at least 3".into());
                }
                rounds = Some(n);
            }
            "-h" | "--help" => {
                eprintln!("usage: cargo bench --bench bench -- [--quick] [--rounds N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)").into()),
        }
    }
    if let Some(n) = rounds {
        mode.rounds = n;
    }
    Ok(mode)
}

// ---------------------------------------------------------------------------------
// Commands and workloads

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cmd {
    Incr,
    Fixed,
    FixedLua,
    SlideCount,
    SlideCountLua,
    SlideLog,
    SlideLogLua,
    Gcra,
    GcraLua,
}

const CMDS: [Cmd; 9] = [
    Cmd::Incr,
    Cmd::Fixed,
    Cmd::FixedLua,
    Cmd::SlideCount,
    Cmd::SlideCountLua,
    Cmd::SlideLog,
    Cmd::SlideLogLua,
    Cmd::Gcra,
    Cmd::GcraLua,
];

/// The native limiters, each with the script it replaces.
const PAIRS: [(Cmd, Cmd); 4] = [
    (Cmd::Fixed, Cmd::FixedLua),
    (Cmd::SlideCount, Cmd::SlideCountLua),
    (Cmd::SlideLog, Cmd::SlideLogLua),
    (Cmd::Gcra, Cmd::GcraLua),
];

struct Shas {
    fixed: String,
    counter: String,
    log: String,
    gcra: String,
}

impl Cmd {
    fn label(self) -> &'static str {
        match self {
            Cmd::Incr => "INCR",
            Cmd::Fixed => "RL.FIXED",
            Cmd::FixedLua => "EVALSHA fixed_window.lua",
            Cmd::SlideCount => "RL.SLIDECOUNT",
            Cmd::SlideCountLua => "EVALSHA sliding_window_counter.lua",
            Cmd::SlideLog => "RL.SLIDELOG",
            Cmd::SlideLogLua => "EVALSHA sliding_window_log.lua",
            Cmd::Gcra => "RL.GCRA",
            Cmd::GcraLua => "EVALSHA gcra.lua ¹",
        }
    }

    /// Its name in INFO commandstats (`cmdstat_<name>`).
    fn stat(self) -> &'static str {
        match self {
            Cmd::Incr => "incr",
            Cmd::Fixed => "rl.fixed",
            Cmd::SlideCount => "rl.slidecount",
            Cmd::SlideLog => "rl.slidelog",
            Cmd::Gcra => "rl.gcra",
            Cmd::FixedLua | Cmd::SlideCountLua | Cmd::SlideLogLua | Cmd::GcraLua => "evalsha",
        }
    }

    fn window_s(self) -> u64 {
        match self {
            Cmd::Gcra | Cmd::GcraLua => GCRA_WINDOW_S,
            _ => WINDOW_S,
        }
    }

    fn is_limiter(self) -> bool {
        self != Cmd::Incr
    }

    /// One call on limiter `key` at time `now` (µs), appended to `out` in RESP.
    fn encode(self, out: &mut Requests, key: &str, now: u64, rng: &mut Rng, shas: &Shas) {
        let limit = LIMIT.to_string();
        let window = self.window_s().to_string();
        let now_s = now.to_string();
        match self {
            Cmd::Incr => out.push(&["INCR", key]),
            Cmd::Fixed | Cmd::SlideCount | Cmd::SlideLog | Cmd::Gcra => {
                let name = match self {
                    Cmd::Fixed => "RL.FIXED",
                    Cmd::SlideCount => "RL.SLIDECOUNT",
                    Cmd::SlideLog => "RL.SLIDELOG",
                    _ => "RL.GCRA",
                };
                out.push(&[name, key, &limit, &window, "NOW", &now_s]);
            }
            Cmd::FixedLua => {
                let secs = (now / 1_000_000).to_string();
                out.push(&["EVALSHA", &shas.fixed, "1", key, &secs, &window, &limit]);
            }
            Cmd::SlideCountLua => {
                // What the seed's PHP passes: the two counters and the elapsed ratio.
                let i = now / WINDOW_US;
                let cur = format!("{key}:{i}");
                let prev = format!("{key}:{}", i - 1);
                let elapsed = format!("{:.6}", (now % WINDOW_US) as f64 / WINDOW_US as f64);
                out.push(&[
                    "EVALSHA",
                    &shas.counter,
                    "2",
                    &cur,
                    &prev,
                    &limit,
                    &elapsed,
                    &window,
                ]);
            }
            Cmd::SlideLogLua => {
                let member = format!("{now}:{:08x}", rng.next() as u32);
                let window_us = WINDOW_US.to_string();
                out.push(&[
                    "EVALSHA", &shas.log, "1", key, &now_s, &window_us, &limit, &member,
                ]);
            }
            Cmd::GcraLua => {
                let interval = (GCRA_WINDOW_S * 1_000_000 / LIMIT).to_string();
                out.push(&["EVALSHA", &shas.gcra, "1", key, &now_s, &interval, &limit]);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Workload {
    hot: bool,
    pipelined: bool,
}

const WORKLOADS: [Workload; 4] = [
    Workload {
        hot: false,
        pipelined: true,
    },
    Workload {
        hot: true,
        pipelined: true,
    },
    Workload {
        hot: false,
        pipelined: false,
    },
    Workload {
        hot: true,
        pipelined: false,
    },
];

impl Workload {
    fn label(self) -> String {
        format!(
            "{}, {}",
            if self.hot {
                "hot key, mostly denied"
            } else {
                "many keys, mostly admitted"
            },
            if self.pipelined {
                format!("pipelined ×{PIPELINE}")
            } else {
                "unpipelined".to_string()
            }
        )
    }

    fn requests(self, mode: &Mode) -> usize {
        if self.pipelined {
            mode.pipelined_requests
        } else {
            mode.unpipelined_requests
        }
    }

    fn depth(self) -> usize {
        if self.pipelined {
            PIPELINE
        } else {
            1
        }
    }
}

fn identity_key(id: usize) -> String {
    format!("rl:{{id{id:06}}}")
}

const HOT_KEY: &str = "rl:{hot}";

/// xorshift64*: keys and members, reproducible from run to run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock before 1970")
        .as_micros() as u64
}

// ---------------------------------------------------------------------------------
// RESP client

/// Commands encoded back to back, with where each ends.
#[derive(Default)]
struct Requests {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Requests {
    fn push(&mut self, args: &[&str]) {
        let b = &mut self.bytes;
        b.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            b.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            b.extend_from_slice(a.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        self.ends.push(b.len());
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The bytes of commands `from..to`.
    fn slice(&self, from: usize, to: usize) -> &[u8] {
        let start = if from == 0 { 0 } else { self.ends[from - 1] };
        &self.bytes[start..self.ends[to - 1]]
    }
}

#[derive(Debug)]
enum Reply {
    Int(i64),
    Str(String),
    Nil,
    Array(Vec<Reply>),
    Error(String),
}

impl Reply {
    fn text(&self) -> String {
        match self {
            Reply::Str(s) => s.clone(),
            Reply::Int(i) => i.to_string(),
            other => format!("{other:?}"),
        }
    }
}

/// One reply starting at `at`, and where it ends; `None` while incomplete.
fn parse(b: &[u8], at: usize) -> Res<Option<(Reply, usize)>> {
    let Some(cr) = b[at..].windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let line = std::str::from_utf8(&b[at + 1..at + cr])?;
    let next = at + cr + 2;
    let reply = match b[at] {
        b'+' => Reply::Str(line.to_string()),
        b'-' => Reply::Error(line.to_string()),
        b':' => Reply::Int(line.parse()?),
        b'$' => {
            let n: i64 = line.parse()?;
            if n < 0 {
                return Ok(Some((Reply::Nil, next)));
            }
            let end = next + n as usize;
            if end + 2 > b.len() {
                return Ok(None);
            }
            let s = String::from_utf8_lossy(&b[next..end]).into_owned();
            return Ok(Some((Reply::Str(s), end + 2)));
        }
        b'*' => {
            let n: i64 = line.parse()?;
            if n < 0 {
                return Ok(Some((Reply::Nil, next)));
            }
            let mut items = Vec::with_capacity(n as usize);
            let mut pos = next;
            for _ in 0..n {
                match parse(b, pos)? {
                    Some((r, p)) => {
                        items.push(r);
                        pos = p;
                    }
                    None => return Ok(None),
                }
            }
            return Ok(Some((Reply::Array(items), pos)));
        }
        other => return Err(format!("unexpected RESP type byte {other:#x}").into()),
    };
    Ok(Some((reply, next)))
}

struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
}

impl Conn {
    fn open(port: u16) -> Res<Conn> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        Ok(Conn {
            stream,
            buf: vec![0; 1 << 16],
            pos: 0,
            len: 0,
        })
    }

    fn send(&mut self, bytes: &[u8]) -> Res<()> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    fn read(&mut self) -> Res<Reply> {
        loop {
            if self.pos < self.len {
                if let Some((reply, end)) = parse(&self.buf[..self.len], self.pos)? {
                    self.pos = end;
                    return Ok(reply);
                }
            }
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.len, 0);
                self.len -= self.pos;
                self.pos = 0;
            }
            if self.len == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            let n = self.stream.read(&mut self.buf[self.len..])?;
            if n == 0 {
                return Err("the server closed the connection".into());
            }
            self.len += n;
        }
    }

    /// One command; an error reply is an error.
    fn call(&mut self, args: &[&str]) -> Res<Reply> {
        let mut r = Requests::default();
        r.push(args);
        self.send(&r.bytes)?;
        match self.read()? {
            Reply::Error(e) => Err(format!("{}: {e}", args.join(" ")).into()),
            reply => Ok(reply),
        }
    }

    fn info_field(&mut self, section: &str, field: &str) -> Res<String> {
        let text = self.call(&["INFO", section])?.text();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| format!("INFO {section} has no {field}").into())
    }

    fn used_memory(&mut self) -> Res<i64> {
        Ok(self.info_field("memory", "used_memory")?.parse()?)
    }

    /// `calls` and `usec` of one command in INFO commandstats.
    fn commandstat(&mut self, name: &str) -> Res<(u64, u64)> {
        let line = self.info_field("commandstats", &format!("cmdstat_{name}"))?;
        let field = |f: &str| -> Res<u64> {
            let v = line
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
                .ok_or_else(|| format!("no {f} in cmdstat_{name}: {line}"))?;
            Ok(v.parse()?)
        };
        Ok((field("calls")?, field("usec")?))
    }

    fn flushall(&mut self) -> Res<()> {
        self.call(&["FLUSHALL", "SYNC"])?;
        Ok(())
    }
}

/// What a load run saw.
struct Tally {
    elapsed: Duration,
    allowed: u64,
    denied: u64,
}

/// Sends `reqs` over `conns` new connections, `depth` commands per batch, keeping a
/// batch in flight on every connection: read one connection's replies, send its next
/// batch, go on to the next connection. Error replies abort.
fn drive(port: u16, conns: usize, depth: usize, reqs: &Requests) -> Res<Tally> {
    let mut cs = (0..conns)
        .map(|_| Conn::open(port))
        .collect::<Res<Vec<_>>>()?;
    let total = reqs.len();
    let mut in_flight = vec![(0usize, 0usize); conns];
    let mut next = 0;
    let mut tally = Tally {
        elapsed: Duration::ZERO,
        allowed: 0,
        denied: 0,
    };
    let start = Instant::now();
    for (c, slot) in cs.iter_mut().zip(in_flight.iter_mut()) {
        let to = (next + depth).min(total);
        if to > next {
            c.send(reqs.slice(next, to))?;
            *slot = (next, to);
            next = to;
        }
    }
    let mut busy = true;
    while busy {
        busy = false;
        for (c, slot) in cs.iter_mut().zip(in_flight.iter_mut()) {
            let (from, to) = *slot;
            if from == to {
                continue;
            }
            busy = true;
            for i in from..to {
                match c.read()? {
                    Reply::Int(_) => tally.allowed += 1,
                    Reply::Array(a) if matches!(a.first(), Some(Reply::Int(1))) => {
                        tally.allowed += 1
                    }
                    Reply::Array(a) if matches!(a.first(), Some(Reply::Int(0))) => {
                        tally.denied += 1
                    }
                    other => {
                        let cmd =
                            String::from_utf8_lossy(reqs.slice(i, i + 1)).replace("\r\n", " ");
                        return Err(format!("{cmd}→ {other:?}").into());
                    }
                }
            }
            let to_next = (next + depth).min(total);
            if to_next > next {
                c.send(reqs.slice(next, to_next))?;
            }
            *slot = (next, to_next);
            next = to_next;
        }
    }
    tally.elapsed = start.elapsed();
    Ok(tally)
}

// ---------------------------------------------------------------------------------
// The server

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
    binary: String,
    module: PathBuf,
}

impl Server {
    fn start() -> Res<Server> {
        let binary = std::env::var("RL_SERVER").unwrap_or_else(|_| "redis-server".into());
        let module = std::env::var_os("RL_MODULE")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_rl.so")
            });
        if !module.exists() {
            return Err(format!(
                "{} is missing: run `cargo build --release` first",
                module.display()
            )
            .into());
        }
        let mut last = String::new();
        for attempt in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let dir =
                std::env::temp_dir().join(format!("rl-bench-{}-{attempt}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let child = Command::new(&binary)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .args(["--logfile", "server.log"])
                .arg("--loadmodule")
                .arg(&module)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {binary}: {e}"))?;
            let mut server = Server {
                child,
                port,
                dir,
                binary: binary.clone(),
                module: module.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(status)) = server.child.try_wait() {
                    last = format!("exited with {status}: {}", server.log());
                    break;
                }
                if let Ok(mut c) = Conn::open(port) {
                    if c.call(&["PING"]).is_ok() {
                        return Ok(server);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if last.is_empty() {
                last = format!("no answer within 10 s: {}", server.log());
            }
        }
        Err(format!("{binary} did not start: {last}").into())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------
// Measurements

struct Bench<'a> {
    port: u16,
    ctl: Conn,
    shas: Shas,
    rng: Rng,
    mode: &'a Mode,
}

/// One call trimming a log: server µs, entries it removed, the log's encoding before.
struct Trim {
    usec: f64,
    removed: f64,
    encoding: String,
}

/// A steady-state run on logs of STEADY_ENTRIES entries: server µs per call, calls,
/// calls admitted, entries removed per call, the logs' encoding after the run.
struct Steady {
    usec: f64,
    calls: u64,
    allowed: u64,
    removed: f64,
    encoding: String,
}

#[derive(Clone, Copy)]
struct Sample {
    ops: f64,
    usec: f64,
    /// Fraction of the calls admitted.
    admitted: f64,
    allowed: u64,
}

impl Bench<'_> {
    /// One command in one workload, from an empty database. Runs with the same `seed`
    /// call the same identities in the same order.
    fn run(&mut self, cmd: Cmd, wl: Workload, seed: u64) -> Res<Sample> {
        self.ctl.flushall()?;
        let n = wl.requests(self.mode);
        let keys = (n / KEY_SHARE).max(1);
        let now = now_us();
        let mut ids = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut reqs = Requests::default();
        for _ in 0..n {
            let key = if wl.hot {
                HOT_KEY.to_string()
            } else {
                identity_key(ids.below(keys))
            };
            cmd.encode(&mut reqs, &key, now, &mut self.rng, &self.shas);
        }
        self.ctl.call(&["CONFIG", "RESETSTAT"])?;
        let t = drive(self.port, CONNECTIONS, wl.depth(), &reqs)?;
        let (calls, usec) = self.ctl.commandstat(cmd.stat())?;
        if calls != n as u64 {
            return Err(format!("{}: {calls} calls counted, {n} sent", cmd.label()).into());
        }
        Ok(Sample {
            ops: n as f64 / t.elapsed.as_secs_f64(),
            usec: usec as f64 / calls as f64,
            admitted: t.allowed as f64 / (t.allowed + t.denied) as f64,
            allowed: t.allowed,
        })
    }

    /// `used_memory` growth per identity after `per_identity` calls on each of the
    /// mode's identities, from an empty database.
    fn memory(&mut self, cmd: Cmd, per_identity: usize) -> Res<f64> {
        let now = now_us();
        // A first call allocates what the command keeps for good (the script's client
        // buffers, say): that is not per identity.
        let mut warm = Requests::default();
        for _ in 0..CONNECTIONS * PIPELINE {
            cmd.encode(&mut warm, "rl:{warmup}", now, &mut self.rng, &self.shas);
        }
        drive(self.port, CONNECTIONS, PIPELINE, &warm)?;
        self.ctl.flushall()?;
        std::thread::sleep(Duration::from_millis(300));
        let before = self.ctl.used_memory()?;
        let identities = self.mode.memory_identities;
        let chunk = (100_000 / per_identity).max(1);
        let mut first = 0;
        while first < identities {
            let last = (first + chunk).min(identities);
            let mut reqs = Requests::default();
            for id in first..last {
                for _ in 0..per_identity {
                    cmd.encode(&mut reqs, &identity_key(id), now, &mut self.rng, &self.shas);
                }
            }
            let t = drive(self.port, CONNECTIONS, PIPELINE, &reqs)?;
            if t.denied > 0 {
                return Err(format!("{}: {} denied while filling", cmd.label(), t.denied).into());
            }
            first = last;
        }
        // Let the server close the load connections and finish rehashing.
        std::thread::sleep(Duration::from_millis(300));
        let after = self.ctl.used_memory()?;
        match self.ctl.call(&["DBSIZE"])? {
            Reply::Int(n) if n as usize == identities => {}
            other => {
                return Err(format!(
                    "{}: {} keys after the memory run, expected one per identity ({identities}): \
                     keys expired during it?",
                    cmd.label(),
                    other.text()
                )
                .into())
            }
        }
        Ok((after - before) as f64 / identities as f64)
    }

    /// One call on each of several logs of `entries` expired entries.
    fn trim(&mut self, cmd: Cmd, entries: usize) -> Res<Trim> {
        self.ctl.flushall()?;
        let logs = (self.mode.trim_entries / entries).clamp(5, 2_000);
        let now = now_us();
        let old = (now - WINDOW_US - 1_000_000).to_string();
        let mut fill = Requests::default();
        for log in 0..logs {
            let key = format!("rl:{{log{log:06}}}");
            let mut j = 0;
            while j < entries {
                let n = (entries - j).min(1_000);
                let members: Vec<String> = (j..j + n).map(|m| format!("{old}:{m:08x}")).collect();
                let mut args = vec!["ZADD", &key];
                for m in &members {
                    args.push(&old);
                    args.push(m);
                }
                fill.push(&args);
                j += n;
            }
        }
        // ZADD answers integers, which the tally counts as admitted.
        drive(self.port, CONNECTIONS, 8, &fill)?;
        let encoding = self
            .ctl
            .call(&["OBJECT", "ENCODING", "rl:{log000000}"])?
            .text();
        let mut reqs = Requests::default();
        for log in 0..logs {
            cmd.encode(
                &mut reqs,
                &format!("rl:{{log{log:06}}}"),
                now,
                &mut self.rng,
                &self.shas,
            );
        }
        self.ctl.call(&["CONFIG", "RESETSTAT"])?;
        let t = drive(self.port, CONNECTIONS, PIPELINE, &reqs)?;
        let (calls, usec) = self.ctl.commandstat(cmd.stat())?;
        if t.denied > 0 || calls != logs as u64 {
            return Err(format!("{}: trim calls not all admitted", cmd.label()).into());
        }
        // Entries left: the one just admitted plus any the call did not remove.
        let mut left = 0;
        for log in 0..logs {
            if let Reply::Int(n) = self.ctl.call(&["ZCARD", &format!("rl:{{log{log:06}}}")])? {
                left += n;
            }
        }
        let removed = (logs * (entries + 1)) as f64 - left as f64;
        Ok(Trim {
            usec: usec as f64 / calls as f64,
            removed: removed / logs as f64,
            encoding,
        })
    }

    /// RL.SLIDELOG or its script on STEADY_LOGS logs in a steady state. Each log starts
    /// with STEADY_ENTRIES entries `step` = window / STEADY_ENTRIES apart, the last
    /// half a step before the first `now`; every call on a log comes `step` after the
    /// previous one, so it finds STEADY_ENTRIES entries in the window, trims the oldest
    /// (the first call: none) and adds one, with limit STEADY_LIMIT per WINDOW_S.
    fn steady(&mut self, cmd: Cmd) -> Res<Steady> {
        self.ctl.flushall()?;
        let per_log = (self.mode.steady_calls / STEADY_LOGS).max(2);
        let step = WINDOW_US / STEADY_ENTRIES as u64;
        let first = now_us();
        let key = |log: usize| format!("rl:{{steady{log:06}}}");
        let mut fill = Requests::default();
        for log in 0..STEADY_LOGS {
            let k = key(log);
            let entries: Vec<(String, String)> = (0..STEADY_ENTRIES)
                .map(|i| {
                    let score = first - WINDOW_US + step / 2 + i as u64 * step;
                    (score.to_string(), format!("{score}:{i:08x}"))
                })
                .collect();
            let mut args = vec!["ZADD", k.as_str()];
            for (score, member) in &entries {
                args.push(score);
                args.push(member);
            }
            fill.push(&args);
        }
        drive(self.port, CONNECTIONS, 8, &fill)?;
        let limit = STEADY_LIMIT.to_string();
        let window_s = WINDOW_S.to_string();
        let window_us = WINDOW_US.to_string();
        let mut reqs = Requests::default();
        for j in 0..per_log {
            let now = (first + j as u64 * step).to_string();
            for log in 0..STEADY_LOGS {
                let k = key(log);
                match cmd {
                    Cmd::SlideLog => {
                        reqs.push(&["RL.SLIDELOG", &k, &limit, &window_s, "NOW", &now]);
                    }
                    Cmd::SlideLogLua => {
                        let member = format!("{now}:{:08x}", self.rng.next() as u32);
                        reqs.push(&[
                            "EVALSHA",
                            &self.shas.log,
                            "1",
                            &k,
                            &now,
                            &window_us,
                            &limit,
                            &member,
                        ]);
                    }
                    other => return Err(format!("{}: not a log limiter", other.label()).into()),
                }
            }
        }
        let n = reqs.len() as u64;
        self.ctl.call(&["CONFIG", "RESETSTAT"])?;
        let t = drive(self.port, CONNECTIONS, PIPELINE, &reqs)?;
        let (calls, usec) = self.ctl.commandstat(cmd.stat())?;
        if calls != n {
            return Err(format!("{}: {calls} calls counted, {n} sent", cmd.label()).into());
        }
        // While pre-filled entries remain, a log holds them plus one per call; once
        // they are gone, the entry a call adds replaces the one added a window earlier
        // (exactly a window old, so out), leaving STEADY_ENTRIES.
        let expected = if per_log <= STEADY_ENTRIES {
            STEADY_ENTRIES + 1
        } else {
            STEADY_ENTRIES
        };
        let mut left = 0;
        for log in 0..STEADY_LOGS {
            match self.ctl.call(&["ZCARD", &key(log)])? {
                Reply::Int(c) if c as usize == expected => left += c as u64,
                other => {
                    return Err(format!(
                        "{}: steady state: {} holds {} entries after the run, expected {}",
                        cmd.label(),
                        key(log),
                        other.text(),
                        expected
                    )
                    .into())
                }
            }
        }
        let encoding = self.ctl.call(&["OBJECT", "ENCODING", &key(0)])?.text();
        let removed = (STEADY_LOGS * STEADY_ENTRIES) as u64 + t.allowed - left;
        Ok(Steady {
            usec: usec as f64 / calls as f64,
            calls,
            allowed: t.allowed,
            removed: removed as f64 / calls as f64,
            encoding,
        })
    }
}

fn cmd_index(c: Cmd) -> usize {
    CMDS.iter().position(|&x| x == c).unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Memory cases: a label, the native command, its script, calls per identity.
const MEMORY_CASES: [(&str, Cmd, Option<Cmd>, usize); 6] = [
    ("INCR (plain counter, no TTL)", Cmd::Incr, None, 1),
    ("RL.FIXED", Cmd::Fixed, Some(Cmd::FixedLua), 1),
    (
        "RL.SLIDECOUNT",
        Cmd::SlideCount,
        Some(Cmd::SlideCountLua),
        1,
    ),
    (
        "RL.SLIDELOG, 1 entry",
        Cmd::SlideLog,
        Some(Cmd::SlideLogLua),
        1,
    ),
    (
        "RL.SLIDELOG, 10 entries",
        Cmd::SlideLog,
        Some(Cmd::SlideLogLua),
        10,
    ),
    ("RL.GCRA", Cmd::Gcra, Some(Cmd::GcraLua), 1),
];

/// All samples of a round, indexed like the loops that produce them.
struct Round {
    /// [workload][cmd]
    runs: Vec<Vec<Sample>>,
    /// [case] → (native, script); empty after the first MEMORY_ROUNDS rounds.
    memory: Vec<(f64, Option<f64>)>,
    /// [size] → (native, script)
    trim: Vec<(Trim, Trim)>,
    /// (native, script)
    steady: (Steady, Steady),
}

fn round(b: &mut Bench, r: usize) -> Res<Round> {
    let mode_rounds = b.mode.rounds;
    let started = Instant::now();
    let mut runs = vec![];
    for (w, wl) in WORKLOADS.into_iter().enumerate() {
        let mut samples = vec![None; CMDS.len()];
        // Rotate the order from round to round so no command always runs first.
        for k in 0..CMDS.len() {
            let i = (k + r) % CMDS.len();
            let s = b.run(CMDS[i], wl, (r * WORKLOADS.len() + w + 1) as u64)?;
            eprintln!(
                "round {}/{mode_rounds} · {} · {:<34} {:>9.0} ops/s {:>7.2} µs/call",
                r + 1,
                wl.label(),
                CMDS[i].label(),
                s.ops,
                s.usec
            );
            samples[i] = Some(s);
        }
        let samples: Vec<Sample> = samples.into_iter().map(Option::unwrap).collect();
        // Same identities, same limits: the module and the script must agree.
        for (n, s) in PAIRS {
            let (a, b) = (samples[cmd_index(n)].allowed, samples[cmd_index(s)].allowed);
            if a != b {
                return Err(format!(
                    "{}: {} admitted {a} calls, its script {b}, on the same requests",
                    wl.label(),
                    n.label()
                )
                .into());
            }
        }
        runs.push(samples);
    }
    let runs_took = started.elapsed();
    let mut memory = vec![];
    for (label, native, script, per) in MEMORY_CASES {
        if r >= MEMORY_ROUNDS {
            break;
        }
        let n = b.memory(native, per)?;
        let s = match script {
            Some(s) => Some(b.memory(s, per)?),
            None => None,
        };
        eprintln!(
            "round {}/{mode_rounds} · memory · {label}: {n:.1} B, script {}",
            r + 1,
            s.map_or("-".into(), |s| format!("{s:.1} B"))
        );
        memory.push((n, s));
    }
    let memory_took = started.elapsed() - runs_took;
    // Alternate which of the two runs first from round to round.
    let (n, s) = if r.is_multiple_of(2) {
        let n = b.steady(Cmd::SlideLog)?;
        (n, b.steady(Cmd::SlideLogLua)?)
    } else {
        let s = b.steady(Cmd::SlideLogLua)?;
        (b.steady(Cmd::SlideLog)?, s)
    };
    eprintln!(
        "round {}/{mode_rounds} · steady {STEADY_ENTRIES}-entry log · RL.SLIDELOG {:.2} µs \
         ({:.2} removed per call), script {:.2} µs",
        r + 1,
        n.usec,
        n.removed,
        s.usec
    );
    // Same logs, same calls: the module and the script must agree.
    if n.allowed != s.allowed {
        return Err(format!(
            "steady {STEADY_ENTRIES}-entry log: RL.SLIDELOG admitted {} calls, its script {}, \
             on the same requests",
            n.allowed, s.allowed
        )
        .into());
    }
    let steady = (n, s);
    let steady_took = started.elapsed() - runs_took - memory_took;
    let mut trim = vec![];
    for size in TRIM_SIZES {
        let n = b.trim(Cmd::SlideLog, size)?;
        let s = b.trim(Cmd::SlideLogLua, size)?;
        eprintln!(
            "round {}/{mode_rounds} · trim {size} · RL.SLIDELOG {:.2} µs ({:.0} removed), \
             script {:.2} µs",
            r + 1,
            n.usec,
            n.removed,
            s.usec
        );
        trim.push((n, s));
    }
    let total = started.elapsed();
    eprintln!(
        "round {}/{mode_rounds} took {:.0} s (runs {:.0} s, memory {:.0} s, steady {:.0} s, \
         trim {:.0} s)",
        r + 1,
        total.as_secs_f64(),
        runs_took.as_secs_f64(),
        memory_took.as_secs_f64(),
        steady_took.as_secs_f64(),
        (total - runs_took - memory_took - steady_took).as_secs_f64()
    );
    Ok(Round {
        runs,
        memory,
        trim,
        steady,
    })
}

// ---------------------------------------------------------------------------------
// Machine and versions

fn command_output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn machine(b: &mut Bench, server: &Server) -> Res<Vec<(&'static str, String)>> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let server_name = b
        .ctl
        .info_field("server", "server_name")
        .unwrap_or_else(|_| "redis".into());
    let version = b.ctl.info_field("server", "redis_version")?;
    let version = b
        .ctl
        .info_field("server", "valkey_version")
        .unwrap_or(version);
    let allocator = b.ctl.info_field("memory", "mem_allocator")?;
    let dir = env!("CARGO_MANIFEST_DIR");
    let commit = command_output("git", &["-C", dir, "rev-parse", "--short", "HEAD"])
        .unwrap_or_else(|| "unknown commit".into());
    let dirty =
        command_output("git", &["-C", dir, "status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    let rustc = command_output("rustc", &["-V"]).unwrap_or_else(|| "unknown".into());
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    Ok(vec![
        ("date", date),
        ("CPU", format!("{model}, {cpus} logical CPUs")),
        ("memory", format!("{:.1} GiB", mem_kb as f64 / 1048576.0)),
        ("OS", format!("{os}, Linux {kernel}")),
        (
            "server",
            format!("{server_name} {version} ({allocator}), `{}`", server.binary),
        ),
        (
            "module",
            format!(
                "redis-rl {} at git {commit}{}, release build, `{}`",
                env!("CARGO_PKG_VERSION"),
                if dirty {
                    " with uncommitted changes"
                } else {
                    ""
                },
                server.module.display()
            ),
        ),
        ("Rust", rustc),
        ("load average at start (1, 5, 15 min)", load),
    ])
}

// ---------------------------------------------------------------------------------
// Report

fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p == 100.0 || p == 0.0 {
        format!("{p:.0} %")
    } else if !(1.0..99.9).contains(&p) {
        format!("{p:.2} %")
    } else {
        format!("{p:.1} %")
    }
}

fn check(ok: bool) -> &'static str {
    if ok {
        "✅ met"
    } else {
        "❌ missed"
    }
}

fn report(
    mode: &Mode,
    machine: &[(&str, String)],
    rounds: &[Round],
    took: Duration,
) -> Result<String, std::fmt::Error> {
    let mut o = String::new();
    let m = mode;
    writeln!(o, "# redis-rl benchmarks\n")?;
    writeln!(
        o,
        "Output of `make {}` ({} mode, {} rounds, {:.0} s).\n",
        if m.name == "quick" {
            "bench-quick"
        } else {
            "bench"
        },
        m.name,
        m.rounds,
        took.as_secs_f64()
    )?;
    writeln!(o, "| | |\n|---|---|")?;
    for (k, v) in machine {
        writeln!(o, "| {k} | {v} |")?;
    }
    writeln!(
        o,
        "| load | this crate's `benches/bench.rs`: one client thread, {CONNECTIONS} connections, \
         a batch in flight on each; {} requests per pipelined run ({PIPELINE} per batch), \
         {} per unpipelined run |",
        thousands(m.pipelined_requests as f64),
        thousands(m.unpipelined_requests as f64)
    )?;
    writeln!(
        o,
        "| limiters | limit {LIMIT} per {WINDOW_S} s (RL.GCRA and its script: {LIMIT} \
         per {GCRA_WINDOW_S} s, so that no state expires during a run); one fixed `now` \
         per run for module (`NOW`) and script (ARGV); every run starts from an empty \
         database |\n"
    )?;

    writeln!(o, "## Server CPU per call and throughput\n")?;
    writeln!(
        o,
        "`µs/call` is the server's own time in the command (`usec` / `calls` of \
         `INFO commandstats`, reset before each run; for EVALSHA it includes the \
         script's inner calls). `÷ INCR` is that time over INCR's in the same workload \
         and round; `Lua ÷ this` is how many times cheaper the command is than the \
         script it replaces, in the same round. `ops/s` is what the client saw. Every \
         figure is the median over the rounds. Many keys: requests spread at random \
         over {} identities (pipelined) or {} (unpipelined), about {KEY_SHARE} each, \
         the same identities in the same order for every command of a round; hot \
         key: one identity, {LIMIT} admitted, the rest denied.\n",
        thousands((m.pipelined_requests / KEY_SHARE) as f64),
        thousands((m.unpipelined_requests / KEY_SHARE) as f64)
    )?;
    writeln!(
        o,
        "| workload | command | ops/s | µs/call | ÷ INCR | Lua ÷ this | admitted |"
    )?;
    writeln!(o, "|---|---|---:|---:|---:|---:|---:|")?;
    let idx = cmd_index;
    // ratio[w][cmd] to INCR, lua[w][cmd] script over native, per round then median.
    let incr_ratio = |w: usize, c: Cmd| {
        median(
            rounds
                .iter()
                .map(|r| r.runs[w][idx(c)].usec / r.runs[w][idx(Cmd::Incr)].usec)
                .collect(),
        )
    };
    let lua_ratio = |w: usize, c: Cmd| {
        PAIRS.iter().find(|p| p.0 == c).map(|&(n, s)| {
            median(
                rounds
                    .iter()
                    .map(|r| r.runs[w][idx(s)].usec / r.runs[w][idx(n)].usec)
                    .collect(),
            )
        })
    };
    for (w, wl) in WORKLOADS.iter().enumerate() {
        for c in CMDS {
            let med = |f: fn(&Sample) -> f64| {
                median(rounds.iter().map(|r| f(&r.runs[w][idx(c)])).collect())
            };
            let ratio = if c == Cmd::Incr {
                "1".to_string()
            } else {
                format!("{:.2}", incr_ratio(w, c))
            };
            let lua = lua_ratio(w, c).map_or(String::new(), |x| format!("**{x:.1}**"));
            let name = if c.is_limiter() && lua_ratio(w, c).is_some() {
                format!("**{}**", c.label())
            } else {
                c.label().to_string()
            };
            let admitted = if c.is_limiter() {
                percent(med(|s| s.admitted))
            } else {
                String::new()
            };
            writeln!(
                o,
                "| {} | {name} | {} | {:.2} | {ratio} | {lua} | {admitted} |",
                wl.label(),
                thousands(med(|s| s.ops)),
                med(|s| s.usec),
            )?;
        }
    }
    writeln!(
        o,
        "\n¹ The seeds have no GCRA script; `benches/gcra.lua` is the usual one, on \
         RL.GCRA's layout (a string holding the TAT in µs, expiring when reached).\n"
    )?;

    writeln!(o, "## Memory per limiter identity\n")?;
    let mem_rounds: Vec<&Round> = rounds.iter().filter(|r| !r.memory.is_empty()).collect();
    writeln!(
        o,
        "`used_memory` growth over {} identities (keys `rl:{{id000000}}` …), each \
         called once (or 10 times) with the values above, from an empty database; \
         median over the first {} rounds. It includes the keyspace's hash-table slots.\n",
        thousands(m.memory_identities as f64),
        mem_rounds.len()
    )?;
    writeln!(
        o,
        "| limiter | module B/identity | script B/identity | module − script |"
    )?;
    writeln!(o, "|---|---:|---:|---:|")?;
    let mem = |i: usize| {
        let n = median(mem_rounds.iter().map(|r| r.memory[i].0).collect());
        let s = rounds[0].memory[i]
            .1
            .map(|_| median(mem_rounds.iter().map(|r| r.memory[i].1.unwrap()).collect()));
        (n, s)
    };
    for (i, (label, ..)) in MEMORY_CASES.iter().enumerate() {
        let (n, s) = mem(i);
        let (s_text, d_text) = match s {
            Some(s) => (format!("{s:.1}"), format!("{:+.1}", n - s)),
            None => (String::new(), String::new()),
        };
        writeln!(o, "| {label} | {n:.1} | {s_text} | {d_text} |")?;
    }

    writeln!(
        o,
        "\n## RL.SLIDELOG on a steady {STEADY_ENTRIES}-entry log\n"
    )?;
    let step_ms = WINDOW_US / STEADY_ENTRIES as u64 / 1_000;
    writeln!(
        o,
        "What the ≥ 3 × target is about. {STEADY_LOGS} logs, each filled (`ZADD`, the \
         layout's members) with {STEADY_ENTRIES} entries {step_ms} ms (window / \
         {STEADY_ENTRIES}) apart, ending half a step before the first `now`; then calls \
         on the logs in turn, limit {STEADY_LIMIT} per {WINDOW_S} s, `now` advancing by \
         {step_ms} ms per call on a log (module `NOW`, script ARGV with the same `now`, \
         window in µs and a member `<now>:<8 hex>`). Each call finds {STEADY_ENTRIES} \
         entries in the window, trims the one that left it (the first call on a log: \
         none) and admits one; every log ends with the count this implies (checked), \
         and module and script must admit the same calls. Server µs per call (`INFO commandstats`, \
         reset before each run; EVALSHA includes the script's inner calls), median over \
         the rounds; `Lua ÷ this` is taken within a round.\n"
    )?;
    writeln!(
        o,
        "| entries in window | encoding | calls per run | removed per call \
         | RL.SLIDELOG µs/call | script µs/call | Lua ÷ this |"
    )?;
    writeln!(o, "|---:|---|---:|---:|---:|---:|---:|")?;
    let steady_ratio = median(
        rounds
            .iter()
            .map(|r| r.steady.1.usec / r.steady.0.usec)
            .collect(),
    );
    writeln!(
        o,
        "| {STEADY_ENTRIES} | {} | {} | {:.2} | {:.2} | {:.2} | **{steady_ratio:.1}** |",
        rounds[0].steady.0.encoding,
        thousands(rounds[0].steady.0.calls as f64),
        median(rounds.iter().map(|r| r.steady.0.removed).collect()),
        median(rounds.iter().map(|r| r.steady.0.usec).collect()),
        median(rounds.iter().map(|r| r.steady.1.usec).collect()),
    )?;

    writeln!(
        o,
        "\n## RL.SLIDELOG, worst case: one call that trims N expired entries\n"
    )?;
    writeln!(
        o,
        "The worst case for a log call (the steady state above is the target's \
         measure): logs filled with N entries older than the window (the layout's \
         members, `ZADD`), then one admitted call per log with limit {LIMIT} per \
         {WINDOW_S} s; server µs per call, median over the rounds. `removed` counts the \
         entries the call removed (the module trims a bounded batch per call).\n"
    )?;
    writeln!(
        o,
        "| N | encoding | RL.SLIDELOG µs/call | removed | ns per removed entry \
         | script µs/call | removed | Lua ÷ this |"
    )?;
    writeln!(o, "|---:|---|---:|---:|---:|---:|---:|---:|")?;
    let trim_ratio = |i: usize| {
        median(
            rounds
                .iter()
                .map(|r| r.trim[i].1.usec / r.trim[i].0.usec)
                .collect(),
        )
    };
    for (i, size) in TRIM_SIZES.iter().enumerate() {
        let nu = median(rounds.iter().map(|r| r.trim[i].0.usec).collect());
        let nr = median(rounds.iter().map(|r| r.trim[i].0.removed).collect());
        let su = median(rounds.iter().map(|r| r.trim[i].1.usec).collect());
        let sr = median(rounds.iter().map(|r| r.trim[i].1.removed).collect());
        writeln!(
            o,
            "| {} | {} | {nu:.2} | {nr:.0} | {:.0} | {su:.2} | {sr:.0} | **{:.1}** |",
            thousands(*size as f64),
            rounds[0].trim[i].0.encoding,
            nu * 1000.0 / nr.max(1.0),
            trim_ratio(i)
        )?;
    }

    writeln!(o, "\n## Targets\n")?;
    writeln!(o, "| target | this run (per workload, in table order) | |")?;
    writeln!(o, "|---|---|---|")?;
    let per_wl = |f: &dyn Fn(usize) -> f64| -> Vec<f64> { (0..WORKLOADS.len()).map(f).collect() };
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.2}"))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    for (c, max) in [(Cmd::Fixed, 1.5), (Cmd::SlideCount, 2.0), (Cmd::Gcra, 1.5)] {
        let v = per_wl(&|w| incr_ratio(w, c));
        writeln!(
            o,
            "| {} ≤ {max} × INCR | {} | {} |",
            c.label(),
            list(&v),
            check(v.iter().all(|&x| x <= max))
        )?;
    }
    for (n, _) in PAIRS {
        let v = per_wl(&|w| lua_ratio(w, n).unwrap());
        writeln!(
            o,
            "| {} ≥ 5 × cheaper than its script | {} | {} |",
            n.label(),
            list(&v),
            check(v.iter().all(|&x| x >= 5.0))
        )?;
    }
    writeln!(
        o,
        "| RL.SLIDELOG ≥ 3 × cheaper than its script on {STEADY_ENTRIES}-entry logs \
         (steady state) | {steady_ratio:.2} | {} |",
        check(steady_ratio >= 3.0)
    )?;
    for (i, (label, _, script, _)) in MEMORY_CASES.iter().enumerate() {
        let (n, s) = mem(i);
        if label.starts_with("RL.GCRA") {
            writeln!(
                o,
                "| RL.GCRA ≤ 120 B per identity | {n:.1} B | {} |",
                check(n <= 120.0)
            )?;
        } else if script.is_some() {
            let s = s.unwrap();
            writeln!(
                o,
                "| {label}: same memory as the script | {n:.1} B vs {s:.1} B | {} |",
                check((n - s).abs() < 1.0)
            )?;
        }
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------

fn main() {
    if let Err(e) = run() {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let mode = parse_args()?;
    let started = Instant::now();
    let server = Server::start()?;
    let mut ctl = Conn::open(server.port)?;
    let mut load = |src: &str| -> Res<String> { Ok(ctl.call(&["SCRIPT", "LOAD", src])?.text()) };
    let shas = Shas {
        fixed: load(FIXED_LUA)?,
        counter: load(COUNTER_LUA)?,
        log: load(LOG_LUA)?,
        gcra: load(GCRA_LUA)?,
    };
    let mut b = Bench {
        port: server.port,
        ctl,
        shas,
        rng: Rng(0x9e37_79b9_7f4a_7c15),
        mode: &mode,
    };
    let machine = machine(&mut b, &server)?;
    eprintln!(
        "bench ({} mode): {} rounds on port {}",
        mode.name, mode.rounds, server.port
    );
    let mut rounds = vec![];
    for r in 0..mode.rounds {
        rounds.push(round(&mut b, r)?);
    }
    let text = report(&mode, &machine, &rounds, started.elapsed())?;
    print!("{text}");
    eprintln!("bench: done in {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}
