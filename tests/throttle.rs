//! RL.THROTTLE against the real redis-cell (`../shared/anchors/redis-cell`), loaded
//! into the same server.
//!
//! redis-cell reads the server's wall clock (in ns) and has no NOW, so the two
//! cannot be compared on the real clock without racing it: a rounding boundary
//! (a whole second of a wait, an emission interval of `remaining`) can fall between
//! two back-to-back calls. Instead the server runs with a small preloaded clock
//! (tests/clock/fakeclock.c, compiled here) that holds the wall clock still at an
//! instant the test writes to a file, in whole microseconds (redis-rl reads the
//! clock in µs). Both modules, and the server's own key expiry, then see the very
//! same instant, and every reply, stored TAT and expiry instant must be equal: no
//! tolerance. The instants are chosen on the edges (a TAT exactly, 1 µs either side,
//! a fraction of an emission interval, idle gaps).
//!
//! Also: a key CL.THROTTLE wrote is continued by RL.THROTTLE (same server) and by
//! redis-rl's CL.THROTTLE (module argument `cl-throttle`, on a server restarted from
//! redis-cell's RDB without redis-cell) exactly as redis-cell continues it; and each
//! deliberate difference has its own test.
mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{rngs::StdRng, Rng, SeedableRng};

/// The preloaded clock, compiled once per test process.
fn fake_clock_library() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clock/fakeclock.c");
        let out = std::env::temp_dir().join(format!("rl-fakeclock-{}.so", std::process::id()));
        let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("cc (a C compiler) is needed for the fake clock");
        assert!(status.success(), "could not compile {}", src.display());
        out
    })
    .clone()
}

/// The wall clock every server of a test reads: a file holding unix ns.
struct Clock {
    _dir: tempfile::TempDir,
    path: PathBuf,
    us: u64,
}

/// 2026-12-01T10:00:00Z.
const START_US: u64 = 1_796_119_200_000_000;

impl Clock {
    fn new() -> Clock {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("now");
        let mut clock = Clock {
            _dir: dir,
            path,
            us: START_US,
        };
        clock.set(START_US);
        clock
    }

    fn set(&mut self, us: u64) {
        self.us = us;
        std::fs::write(&self.path, format!("{}\n", u128::from(us) * 1000)).expect("clock file");
    }

    fn advance(&mut self, us: u64) {
        self.set(self.us + us);
    }

    /// The environment that puts a server on this clock (its monotonic clock too,
    /// unless it must run timers on its own: replication).
    fn env(&self, monotonic: bool) -> Vec<(&'static str, String)> {
        let lib = fake_clock_library();
        let mut env = vec![
            ("LD_PRELOAD", lib.to_str().expect("utf-8 path").to_string()),
            (
                "RL_FAKE_CLOCK",
                self.path.to_str().expect("utf-8 path").to_string(),
            ),
        ];
        if monotonic {
            env.push(("RL_FAKE_MONOTONIC", "1".to_string()));
        }
        env
    }

    /// A server on this clock with `extra` (`--loadmodule <redis-cell>` …).
    fn server(&self, extra: &[&str]) -> Server {
        self.server_with(extra, true)
    }

    fn server_with(&self, extra: &[&str], monotonic: bool) -> Server {
        let env = self.env(monotonic);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let s = Server::start_with_env(extra, &env);
        let t: (String, String) = redis::cmd("TIME").query(&mut s.conn()).expect("TIME");
        let time = t.0.parse::<u64>().unwrap() * 1_000_000 + t.1.parse::<u64>().unwrap();
        if monotonic {
            assert_eq!(time, self.us, "the server does not read the fake clock");
        } else {
            assert!(
                time.abs_diff(self.us) < 60_000_000,
                "not the fake clock: {time}"
            );
        }
        s
    }
}

/// A server on `clock` with redis-cell loaded (and redis-rl), or `None` (the test
/// reported as skipped) without redis-cell.
fn with_cell(clock: &Clock) -> Option<Server> {
    with_cell_and(clock, &[])
}

fn with_cell_and(clock: &Clock, extra: &[&str]) -> Option<Server> {
    let cell = redis_cell()?;
    let mut args = vec!["--loadmodule", cell.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    Some(clock.server(&args))
}

/// Whether the modules in `s` read the fake clock too. A server that loads modules
/// with RTLD_DEEPBIND (Valkey 9) binds their clock calls to libc itself, past the
/// preloaded clock: the modules then read the real time and cannot be compared
/// call for call (redis-cell has no NOW). Those tests then say so and stop.
fn modules_on_fake_clock(s: &Server, clock: &Clock) -> bool {
    let mut c = s.conn();
    throttle(&mut c, "RL.THROTTLE rl:clock-probe 0 1 1");
    let tat = get(&mut c, "rl:clock-probe").and_then(|t| t.parse::<u64>().ok());
    let _: i64 = redis::cmd("DEL")
        .arg("rl:clock-probe")
        .query(&mut c)
        .unwrap();
    let on_it = tat == Some(clock.us * 1000 + 1_000_000_000);
    if !on_it {
        skipped(&format!(
            "on {} the modules do not read the preloaded clock (this server binds their libc \
             clock calls past LD_PRELOAD, as RTLD_DEEPBIND does); the redis-cell differential \
             runs on servers that let them (Redis)",
            server_binary()
        ));
    }
    on_it
}

/// The five integers of a CL.THROTTLE reply.
type Cell = (i64, i64, i64, i64, i64);

fn throttle(c: &mut Connection, line: &str) -> Cell {
    query_line(c, line)
        .and_then(|v| redis::from_redis_value(&v))
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn expire_time(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME")
        .arg(key)
        .query(c)
        .expect("PEXPIRETIME")
}

/// A rate as users write them: bursts from 0 to 1,000, rates from one a day to
/// 100,000 a second, and periods whose interval is not a whole number of ns.
fn random_rate(rng: &mut StdRng) -> (u64, u64, u64) {
    let burst = match rng.gen_range(0..10) {
        0 => 0,
        1..=5 => rng.gen_range(1..=10),
        6..=8 => rng.gen_range(11..=100),
        _ => 1_000,
    };
    let (count, period) = match rng.gen_range(0..6) {
        0 => (rng.gen_range(1..=10), 1),
        1 => (3, 1),
        2 => (rng.gen_range(1..=200), rng.gen_range(1..=60)),
        3 => (rng.gen_range(1..=1_000), 3_600),
        4 => (1, 86_400),
        _ => (rng.gen_range(1_000..=100_000), rng.gen_range(1..=3)),
    };
    (burst, count, period)
}

/// The µs to wait before the next call: none, a few µs, a fraction or a multiple of
/// the emission interval, up to the stored TAT (on it or 1 µs either side), idle.
fn random_gap(rng: &mut StdRng, interval_us: u64, tat_us: Option<u64>, now: u64) -> u64 {
    match rng.gen_range(0..12) {
        0..=1 => 0,
        2 => rng.gen_range(1..=3),
        3..=4 => rng.gen_range(1..=interval_us.max(2)),
        5..=6 => interval_us * rng.gen_range(1..=3),
        7..=9 => match tat_us {
            Some(t) if t + 1 > now => (t - now + rng.gen_range(0..=2)).saturating_sub(1),
            _ => rng.gen_range(0..=interval_us),
        },
        10 => interval_us / 2 + rng.gen_range(0..=1),
        // Idle: the TAT long passed (at most two days, so that the run stays far
        // from the year 2262, where redis-cell's i64 nanoseconds end).
        _ => (rng.gen_range(1..=10) * interval_us * 1_000).min(2 * 86_400_000_000),
    }
}

#[derive(Debug, Default)]
struct Numbers {
    compared: u64,
    limited: u64,
    peeks: u64,
    above_burst: u64,
    on_tat: u64,
    switch_overs: u64,
    /// Instants moved out of the last millisecond before a TAT (see below).
    moved: u64,
}

/// Twin keys, the same random calls at the same instants: CL.THROTTLE on one,
/// RL.THROTTLE on the other (in switch-over scenarios, CL.THROTTLE on both first,
/// then RL.THROTTLE continues the key redis-cell wrote). Every reply, TAT and expiry
/// instant is equal.
#[test]
fn rl_throttle_answers_every_call_as_redis_cell_does() {
    const SCENARIOS: u64 = 150;
    const STEPS: usize = 40;
    let mut clock = Clock::new();
    // Active expiry off: Redis 8 deletes a key during its expiry millisecond (expire.c
    // `if (now < expire) return 0`, where 7.x waited for `now > expire`), and the clock
    // here stands still inside that millisecond, so a twin could vanish between the two
    // calls of a step. Off, a key expires as a read finds it (`now > when` in db.c, the
    // same on every version), which is what both modules see at the same instant.
    let Some(s) = with_cell_and(&clock, &["--enable-debug-command", "local"]) else {
        return;
    };
    let _: () = redis::cmd("DEBUG")
        .arg("SET-ACTIVE-EXPIRE")
        .arg(0)
        .query(&mut s.conn())
        .expect("DEBUG SET-ACTIVE-EXPIRE 0");
    if !modules_on_fake_clock(&s, &clock) {
        return;
    }
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(0xce11);
    let mut n = Numbers::default();
    for scenario in 0..SCENARIOS {
        let (burst, count, period) = random_rate(&mut rng);
        let interval_us = period * 1_000_000 / count;
        let (a, b) = (format!("cell:{scenario}"), format!("rl:{scenario}"));
        let switch_at = rng.gen_bool(0.3).then(|| rng.gen_range(1..STEPS / 2));
        for step in 0..STEPS {
            let tat_ns = get(&mut c, &a).map(|t| t.parse::<u64>().unwrap());
            let tat_us = tat_ns.map(|t| t / 1000);
            let mut gap = random_gap(&mut rng, interval_us, tat_us, clock.us);
            if tat_us == Some(clock.us + gap) {
                n.on_tat += 1;
            }
            // redis-cell's quantity-0 call writes (the TAT back, with an expiry the TTL
            // truncated to the ms from now; on a missing key, a key expiring at once)
            // where RL.THROTTLE writes nothing, so the twins' expiries can differ by a
            // millisecond: at an instant where one key exists and the other has expired,
            // the two decide on different states. No instant is chosen there: it
            // moves to the next millisecond in which both are gone.
            let (ea, eb) = (expire_time(&mut c, &a), expire_time(&mut c, &b));
            let present = |exp: i64, at_us: u64| exp >= 0 && (at_us / 1000) as i64 <= exp;
            let at = clock.us + gap;
            if present(ea, at) != present(eb, at) {
                gap = (ea.max(eb) as u64 + 1) * 1000 - clock.us;
                n.moved += 1;
            }
            clock.advance(gap);
            let quantity = match rng.gen_range(0..20) {
                0..=2 => 0,
                3..=11 => 1,
                12..=16 => rng.gen_range(1..=burst + 1),
                17..=18 => burst + rng.gen_range(2..=5),
                _ => rng.gen_range(1..=3) * (burst + 1),
            };
            let args = format!("{burst} {count} {period} {quantity}");
            let cell = throttle(&mut c, &format!("CL.THROTTLE {a} {args}"));
            let rl_cmd = match switch_at {
                Some(at) if step < at => "CL.THROTTLE",
                _ => "RL.THROTTLE",
            };
            if switch_at == Some(step) {
                n.switch_overs += 1;
            }
            let ours = throttle(&mut c, &format!("{rl_cmd} {b} {args}"));
            if std::env::var("RL_DEBUG_SCENARIO").ok() == Some(scenario.to_string()) {
                eprintln!(
                    "step {step} at {} gap {gap}: {args} cell {cell:?} ours {ours:?} tat {:?} {:?} exp {} {}",
                    clock.us,
                    get(&mut c, &a),
                    get(&mut c, &b),
                    expire_time(&mut c, &a),
                    expire_time(&mut c, &b)
                );
            }
            let ctx = format!("scenario {scenario} step {step} at {}: {args}", clock.us);
            assert_eq!(ours, cell, "{ctx}: RL.THROTTLE vs CL.THROTTLE");
            n.compared += 1;
            n.limited += cell.0 as u64;
            n.peeks += u64::from(quantity == 0);
            n.above_burst += u64::from(quantity > burst + 1);
            if quantity > 0 && cell.0 == 0 {
                // Both wrote: the same TAT (ns) and the same expiry instant.
                assert_eq!(get(&mut c, &b), get(&mut c, &a), "{ctx}: TAT");
                assert_eq!(
                    expire_time(&mut c, &b),
                    expire_time(&mut c, &a),
                    "{ctx}: PX"
                );
            }
        }
    }
    eprintln!("redis-cell differential: {n:?}, 0 differences");
    assert!(
        n.limited > 500 && n.peeks > 200 && n.above_burst > 200 && n.on_tat > 100,
        "{n:?}"
    );
    assert!(n.switch_overs > 20, "{n:?}");
    assert!(s.panics().is_empty());
}

/// The move itself: a server with redis-cell is saved; the RDB is loaded by a server
/// with redis-rl loaded as `libredis_rl.so cl-throttle` and no redis-cell. The app's
/// CL.THROTTLE calls, unchanged, get from redis-rl what redis-cell (still running,
/// on the same clock) answers for the same keys.
#[test]
fn a_server_moved_from_redis_cell_continues_every_key() {
    let mut clock = Clock::new();
    let Some(old) = with_cell(&clock) else {
        return;
    };
    if !modules_on_fake_clock(&old, &clock) {
        return;
    }
    let mut o = old.conn();
    let mut rng = StdRng::seed_from_u64(0x5_1c4);
    let keys: Vec<(String, String)> = (0..12)
        .map(|i| {
            let (b, c, p) = random_rate(&mut rng);
            (format!("user:{i}"), format!("{b} {c} {p}"))
        })
        .collect();
    let call = |conn: &mut Connection, key: &str, args: &str, q: u64| {
        throttle(conn, &format!("CL.THROTTLE {key} {args} {q}"))
    };
    for _ in 0..200 {
        let (k, args) = &keys[rng.gen_range(0..keys.len())];
        clock.advance(rng.gen_range(0..50_000));
        call(&mut o, k, args, rng.gen_range(0..3));
    }
    let _: () = redis::cmd("SAVE").query(&mut o).expect("SAVE");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(old.dir.path().join("dump.rdb"), dir.path().join("dump.rdb")).expect("copy");
    let new = clock.server(&["cl-throttle", "--dir", dir.path().to_str().unwrap()]);
    let mut r = new.conn();
    let modules = format!("{:?}", query_line(&mut r, "MODULE LIST").unwrap());
    assert!(!modules.contains("redis-cell"), "{modules}");
    for (k, _) in &keys {
        assert_eq!(
            (get(&mut r, k), expire_time(&mut r, k)),
            (get(&mut o, k), expire_time(&mut o, k)),
            "{k} not carried over at {}",
            clock.us
        );
    }
    let mut compared = 0;
    let mut moved = 0;
    for _ in 0..1_000 {
        let (k, args) = &keys[rng.gen_range(0..keys.len())];
        clock.advance(rng.gen_range(0..200_000));
        // As in the twin test: not where redis-cell's quantity-0 writes left the key
        // on one server and not on the other.
        let (eo, er) = (expire_time(&mut o, k), expire_time(&mut r, k));
        let present = |exp: i64, us: u64| exp >= 0 && (us / 1000) as i64 <= exp;
        if present(eo, clock.us) != present(er, clock.us) {
            clock.set((eo.max(er) as u64 + 1) * 1000);
            moved += 1;
        }
        let q = rng.gen_range(0..4);
        let want = call(&mut o, k, args, q);
        let got = call(&mut r, k, args, q);
        assert_eq!(got, want, "{k} {args} {q} at {}", clock.us);
        if q > 0 && got.0 == 0 {
            assert_eq!(get(&mut r, k), get(&mut o, k), "{k}");
            assert_eq!(expire_time(&mut r, k), expire_time(&mut o, k), "{k}");
        }
        compared += 1;
    }
    let info: String = redis::cmd("INFO").arg("rl").query(&mut r).unwrap();
    assert!(info.contains("rl_cl_throttle_calls:1000"), "{info}");
    eprintln!("{compared} calls on the moved server, 0 differences ({moved} instants moved)");
}

/// Where redis-cell answers `Cell error: Store error …` (or reads garbage), RL.THROTTLE
/// answers a clear ERR and writes nothing.
#[test]
fn errors_instead_of_store_errors_and_nothing_written() {
    let clock = Clock::new();
    let Some(s) = with_cell(&clock) else {
        return;
    };
    let mut c = s.conn();
    throttle(&mut c, "RL.THROTTLE k 5 1 3");
    for (args, cell_says, ours) in [
        (
            "5 1 3 -2",
            "Cell error: Store error: Error while setting key expire",
            "quantity must be an integer from 0",
        ),
        (
            "5 1 0",
            "Cell error: Store error: Zero rates are not supported",
            "period must be an integer from 1",
        ),
        (
            "5 0 3",
            "Cell error: Store error: Zero rates are not supported",
            "count must be an integer from 1",
        ),
        (
            "5 1 3 x",
            "Couldn't parse as integer",
            "quantity must be an integer",
        ),
        // (redis-cell answers this one, with an interval of 500 ns that its
        // whole-µs arithmetic divides by zero: on a fresh key, remaining
        // 9223372036854775807; on its key of a 1-per-3-s rate, limited.)
        ("5 2000000 1", "", "at most one per microsecond"),
    ] {
        // redis-cell's answer (on keys of its own: a negative quantity leaves its key
        // rewritten without an expiry).
        for key in ["cell:k", "cell:fresh"] {
            let _ = query_line(&mut c, "CL.THROTTLE cell:k 5 1 3");
            if cell_says.is_empty() {
                let reply = throttle(&mut c, &format!("CL.THROTTLE {key} {args}"));
                assert!(reply.2 == i64::MAX || reply.0 == 1, "{args}: {reply:?}");
                continue;
            }
            let cell = err_line(&mut c, &format!("CL.THROTTLE {key} {args}"));
            assert!(cell.contains(cell_says), "CL.THROTTLE {args}: {cell}");
        }
        for key in ["k", "fresh"] {
            let before = snapshot(&mut c);
            let rl = err_line(&mut c, &format!("RL.THROTTLE {key} {args}"));
            assert!(
                rl.starts_with("ERR RL.THROTTLE: ") && rl.contains(ours),
                "{args}: {rl}"
            );
            assert_eq!(snapshot(&mut c), before, "RL.THROTTLE {key} {args} wrote");
        }
    }
    let before = snapshot(&mut c);
    for (args, mention) in [
        ("-1 1 3", "max_burst"),
        ("5 1 3 1 2", "unknown option '2'"),
        ("5 1", "wrong number of arguments"),
        ("5 1 3 NOW 1796119200", "seconds"),
        ("1000000000000000 1 315360000", "overflow"),
        ("5 1 3 1000000000000000", "overflow"),
    ] {
        let rl = err_line(&mut c, &format!("RL.THROTTLE k {args}"));
        assert!(
            rl.starts_with("ERR") && rl.contains(mention),
            "{args}: {rl}"
        );
        assert_eq!(snapshot(&mut c), before, "RL.THROTTLE k {args} wrote");
    }
    // Its reply is redis-cell's: it does not join RL.ALL.
    let all = err_line(&mut c, "RL.ALL 1 THROTTLE k 5 60");
    assert!(all.contains("unknown algorithm 'THROTTLE'"), "{all}");
    assert_eq!(snapshot(&mut c), before);
    let _: () = redis::cmd("ZADD")
        .arg("z")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    assert!(err_line(&mut c, "RL.THROTTLE z 5 1 3").starts_with("WRONGTYPE"));
    let _: () = redis::cmd("SET")
        .arg("t")
        .arg("12ab")
        .query(&mut c)
        .unwrap();
    assert!(err_line(&mut c, "RL.THROTTLE t 5 1 3").contains("non-negative integer"));
    assert!(s.panics().is_empty());
}

/// Quantity 0 reports without writing anything: redis-cell writes the TAT back with a
/// fresh expiry (and on a missing key, a key that expires at once).
#[test]
fn quantity_zero_writes_nothing() {
    let mut clock = Clock::new();
    let Some(s) = with_cell(&clock) else {
        return;
    };
    if !modules_on_fake_clock(&s, &clock) {
        return;
    }
    let mut c = s.conn();
    assert_eq!(throttle(&mut c, "CL.THROTTLE a 5 1 3 0"), (0, 6, 6, -1, 0));
    assert_eq!(throttle(&mut c, "RL.THROTTLE b 5 1 3 0"), (0, 6, 6, -1, 0));
    assert!(get(&mut c, "a").is_some(), "redis-cell writes on a peek");
    assert_eq!(get(&mut c, "b"), None);
    throttle(&mut c, "CL.THROTTLE a 5 1 3");
    throttle(&mut c, "RL.THROTTLE b 5 1 3");
    let (ea, eb) = (expire_time(&mut c, "a"), expire_time(&mut c, "b"));
    assert_eq!(ea, eb);
    clock.advance(1_500);
    assert_eq!(
        throttle(&mut c, "CL.THROTTLE a 5 1 3 0"),
        throttle(&mut c, "RL.THROTTLE b 5 1 3 0")
    );
    // redis-cell moved its expiry 1 ms earlier (the TTL truncated again); ours stays.
    assert_eq!(expire_time(&mut c, "a"), ea - 1);
    assert_eq!(expire_time(&mut c, "b"), eb);
}

/// Effects, not the command: a replica without any module gets RL.THROTTLE's SET …
/// PXAT and holds the same TAT and expiry instant; redis-cell's CL.THROTTLE goes to
/// the replica verbatim (which has no such command there).
#[test]
fn effects_are_replicated_not_the_command() {
    let clock = Clock::new();
    let Some(cell) = redis_cell() else {
        return;
    };
    let primary = clock.server_with(
        &[
            "--loadmodule",
            cell.to_str().unwrap(),
            "--repl-diskless-sync-delay",
            "0",
        ],
        false,
    );
    let port = primary.port.to_string();
    let env = clock.env(false);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let replica = Server::start_without_module_env(&["--replicaof", "127.0.0.1", &port], &env);
    wait_link(&primary, &replica);
    let mut p = primary.conn();
    let mut r = replica.conn();
    for _ in 0..3 {
        throttle(&mut p, "RL.THROTTLE rl 5 1 30");
        throttle(&mut p, "CL.THROTTLE cell 5 1 30");
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut p).unwrap();
    assert_eq!(acked, 1);
    assert_eq!(get(&mut r, "rl"), get(&mut p, "rl"));
    assert_eq!(expire_time(&mut r, "rl"), expire_time(&mut p, "rl"));
    assert_eq!(
        get(&mut r, "cell"),
        None,
        "CL.THROTTLE applied on a replica without it"
    );
    let stats = common::workload::info(&mut r, "commandstats");
    assert!(stats.contains("cmdstat_set:calls=3"), "{stats}");
    assert!(!stats.contains("cmdstat_rl."), "{stats}");
    let errors = common::workload::info(&mut r, "errorstats");
    assert!(
        errors.contains("ERR"),
        "the replica took CL.THROTTLE: {errors}"
    );
}

/// The trailing NOW decides as the server clock would at that instant.
#[test]
fn trailing_now_is_the_server_clock_at_that_instant() {
    let mut clock = Clock::new();
    let Some(s) = with_cell(&clock) else {
        return;
    };
    if !modules_on_fake_clock(&s, &clock) {
        return;
    }
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(7);
    for step in 0..300 {
        clock.advance(rng.gen_range(0..400_000));
        let q = rng.gen_range(0..3);
        let on_clock = throttle(&mut c, &format!("CL.THROTTLE a 3 2 1 {q}"));
        let with_now = throttle(&mut c, &format!("RL.THROTTLE b 3 2 1 {q} NOW {}", clock.us));
        assert_eq!(with_now, on_clock, "step {step}");
    }
}

/// `cl-throttle` registers CL.THROTTLE too; with redis-cell loaded first the name is
/// taken: the module still loads, skips it, says so in the log and in `INFO rl`, and
/// RL.THROTTLE works beside redis-cell's CL.THROTTLE.
#[test]
fn cl_throttle_name_is_added_or_skipped_when_taken() {
    let s = Server::start_with(&["cl-throttle"]);
    let mut c = s.conn();
    assert_eq!(throttle(&mut c, "CL.THROTTLE k 4 1 3").1, 5);
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    assert!(info.contains("rl_cl_throttle_calls:1"), "{info}");
    assert!(!info.contains("rl_skipped"), "{info}");

    // redis-cell first, then redis-rl with cl-throttle.
    let Some(cell) = redis_cell() else {
        return;
    };
    let module = module_path();
    let s = Server::start_without_module(&[
        "--loadmodule",
        cell.to_str().unwrap(),
        "--loadmodule",
        module.to_str().unwrap(),
        "cl-throttle",
    ]);
    let mut c = s.conn();
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    assert!(info.contains("rl_skipped:cl.throttle"), "{info}");
    assert!(!info.contains("rl_cl_throttle_"), "{info}");
    assert!(
        s.log().contains("already has a command named cl.throttle"),
        "{}",
        s.log()
    );
    let err = err_line(&mut c, "CL.THROTTLE k 5 1 0");
    assert!(err.contains("Cell error"), "redis-cell's command: {err}");
    assert_eq!(throttle(&mut c, "RL.THROTTLE k2 4 1 3").1, 5);
}

/// Only a call that writes signals its key: WATCH survives a quantity-0 call and a
/// denial, and an admitted call aborts it.
#[test]
fn only_admitted_calls_touch_a_watched_key() {
    let s = Server::start();
    let mut c = s.conn();
    let mut other = s.conn();
    let mut survives = |line: &str| -> bool {
        let _: () = redis::cmd("WATCH").arg("w").query(&mut c).unwrap();
        throttle(&mut other, line);
        let r: Option<Vec<String>> = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
        r.is_some()
    };
    let now = START_US;
    assert!(survives(&format!("RL.THROTTLE w 0 1 60 0 NOW {now}")));
    assert!(!survives(&format!("RL.THROTTLE w 0 1 60 NOW {now}")));
    assert!(survives(&format!("RL.THROTTLE w 0 1 60 0 NOW {now}")));
    assert!(
        survives(&format!("RL.THROTTLE w 0 1 60 NOW {now}")),
        "a denial"
    );
}

/// A NOW long after the stored TAT (the server clock has not got there, so the key is
/// still stored): RL.THROTTLE answers what CL.THROTTLE answers once the clock is there
/// and redis-cell's key has expired; `remaining` stays within what redis-cell can say.
#[test]
fn a_now_past_the_stored_tat_answers_as_redis_cell_once_its_key_expired() {
    let mut clock = Clock::new();
    let Some(s) = with_cell(&clock) else {
        return;
    };
    if !modules_on_fake_clock(&s, &clock) {
        return;
    }
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(0x1d1e);
    let mut compared = 0;
    for scenario in 0..200 {
        let (burst, count, period) = random_rate(&mut rng);
        let interval_us = period * 1_000_000 / count;
        let (a, b) = (format!("cell:{scenario}"), format!("rl:{scenario}"));
        for _ in 0..rng.gen_range(1..=burst.min(20) + 2) {
            let q = rng.gen_range(1..=2);
            let args = format!("{burst} {count} {period} {q}");
            let cell = throttle(&mut c, &format!("CL.THROTTLE {a} {args}"));
            assert_eq!(throttle(&mut c, &format!("RL.THROTTLE {b} {args}")), cell);
        }
        let Some(tat_ns) = get(&mut c, &b).map(|t| t.parse::<u64>().unwrap()) else {
            continue;
        };
        // An instant in a millisecond after the TAT's, up to days later.
        let at = (tat_ns / 1_000_000 + 1) * 1000
            + match rng.gen_range(0..3) {
                0 => rng.gen_range(0..1000),
                1 => interval_us * rng.gen_range(1..=5),
                _ => rng.gen_range(1..=2 * 86_400_000_000),
            };
        let quantity = match rng.gen_range(0..4) {
            0 => 0,
            1 => 1,
            2 => rng.gen_range(1..=burst + 1),
            _ => burst + rng.gen_range(2..=5),
        };
        let args = format!("{burst} {count} {period} {quantity}");
        let ours = throttle(&mut c, &format!("RL.THROTTLE {b} {args} NOW {at}"));
        clock.set(at);
        assert_eq!(
            get(&mut c, &a),
            None,
            "redis-cell's key should have expired"
        );
        let cell = throttle(&mut c, &format!("CL.THROTTLE {a} {args}"));
        assert_eq!(ours, cell, "scenario {scenario} at {at}: {args}");
        // And what a fresh key answers at that instant: nothing of the old TAT is left
        // to raise `remaining` (redis-cell's whole-µs arithmetic may itself say up to
        // about twice max_burst + 1 for intervals of a few µs).
        let fresh = throttle(
            &mut c,
            &format!("RL.THROTTLE fresh:{scenario} {args} NOW {at}"),
        );
        assert_eq!(ours, fresh, "scenario {scenario} at {at}: {args}");
        compared += 1;
        let _: i64 = redis::cmd("DEL")
            .arg(&a)
            .arg(&b)
            .arg(format!("fresh:{scenario}"))
            .query(&mut c)
            .unwrap();
    }
    assert!(compared > 150, "{compared}");
    eprintln!("{compared} calls with a NOW past the stored TAT, 0 differences");
}
