//! The AOF and RDB files hold the effects of the limiter commands: restarting from
//! either gives back byte-identical values with the same expiry instants (an AOF even
//! when the module is not loaded on restart, since only core commands were logged).
//! Allowed calls mark the dataset dirty so that RDB saves happen; denials that wrote
//! nothing, and PEEK, do not.
mod common;
use common::*;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Requests in the randomized workloads (long enough for the tiny windows to expire
/// keys while they run). With `appendfsync always` every write waits for an fsync,
/// so the AOF run is shorter.
const STEPS: usize = 10_000;
const AOF_STEPS: usize = 3_000;
/// Keys whose expiry is this close to (or past) the restarted server's clock are left
/// out of the comparison: they may expire between the two reads.
const MARGIN_MS: i64 = 1_000;

// ---------------------------------------------------------------------------------
// Servers and files

fn info(c: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).expect("INFO")
}

fn info_field(c: &mut Connection, section: &str, field: &str) -> Option<String> {
    let text = info(c, section);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

fn info_int(c: &mut Connection, section: &str, field: &str) -> i64 {
    info_field(c, section, field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .parse()
        .unwrap_or_else(|e| panic!("{field}: {e}"))
}

fn server_time_ms(c: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

/// Kills the server as a crash would (SIGKILL, by its own process id), and waits
/// (bounded) until it is gone, so that its files can be copied whole.
fn crash(s: &mut Server) {
    let mut c = s.conn();
    let pid = info_field(&mut c, "server", "process_id").expect("process_id");
    drop(c);
    let status = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -9 {pid}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.alive() {
        assert!(Instant::now() < deadline, "server {pid} survived SIGKILL");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A recursive copy of a server's data directory (the harness deletes the original
/// with its server).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("dir entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Every file under `dir` with its contents.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let entry = entry.expect("dir entry");
        if entry.file_type().expect("file type").is_dir() {
            out.extend(files(&entry.path()));
        } else {
            let name = entry.path().display().to_string();
            out.push((name, std::fs::read(entry.path()).expect("read")));
        }
    }
    out
}

fn contains_ci(haystack: &[u8], needle: &str) -> bool {
    let lower = haystack.to_ascii_lowercase();
    lower
        .windows(needle.len())
        .any(|w| w == needle.to_ascii_lowercase().as_bytes())
}

// ---------------------------------------------------------------------------------
// The workload

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Algo {
    Log,
    Count,
    Fixed,
    Gcra,
}

impl Algo {
    const ALL: [Algo; 4] = [Algo::Log, Algo::Count, Algo::Fixed, Algo::Gcra];

    fn command(self) -> &'static str {
        match self {
            Algo::Log => "RL.SLIDELOG",
            Algo::Count => "RL.SLIDECOUNT",
            Algo::Fixed => "RL.FIXED",
            Algo::Gcra => "RL.GCRA",
        }
    }

    fn tag(self) -> &'static str {
        match self {
            Algo::Log => "log",
            Algo::Count => "cnt",
            Algo::Fixed => "fix",
            Algo::Gcra => "gcra",
        }
    }
}

/// One limiter: a key with a fixed limit, and one window as an app uses it, or a
/// few windows of all sizes used in turn (so that a long-lived key also sees its old
/// entries trimmed by a short window: effects replicas must apply too).
struct Limiter {
    algo: Algo,
    key: String,
    limit: u64,
    windows: Vec<String>,
    burst: Option<u64>,
    /// Costs in the hundreds instead of 1 to 3.
    big: bool,
}

/// Windows of three sizes: tiny ones (keys expire while the workload runs), ones in
/// milliseconds, and ones in seconds (keys that outlive the workload and are compared).
fn random_window(rng: &mut StdRng, size: usize) -> String {
    match size {
        0 => format!("{}ms", rng.gen_range(1..=50)),
        1 => format!("{}ms", rng.gen_range(100..=3_000)),
        _ => {
            if rng.gen_bool(0.5) {
                format!("{}", rng.gen_range(10..=120))
            } else {
                format!("{}s", rng.gen_range(10..=120))
            }
        }
    }
}

fn limiters(rng: &mut StdRng) -> Vec<Limiter> {
    let mut out = Vec::new();
    for algo in Algo::ALL {
        for i in 0..12 {
            let limit = rng.gen_range(1..=6);
            let windows = match i % 4 {
                3 => (0..3).map(|size| random_window(rng, size)).collect(),
                size => vec![random_window(rng, size)],
            };
            out.push(Limiter {
                algo,
                // Hash-tagged, as cluster users of SLIDECOUNT and FIXED must.
                key: format!("rl:{{user{i}}}:{}", algo.tag()),
                limit,
                windows,
                burst: (algo == Algo::Gcra && rng.gen_bool(0.5)).then(|| rng.gen_range(1..=6)),
                big: false,
            });
        }
    }
    // One big log: a short window then leaves more expired entries than one call
    // trims at once, and the module replicates the exact members it removed.
    out.push(Limiter {
        algo: Algo::Log,
        key: "rl:{big}:log".into(),
        limit: 2_500,
        windows: vec!["20ms".into(), "60s".into(), "60s".into()],
        burst: None,
        big: true,
    });
    out
}

/// What a workload exercised, per limiter.
#[derive(Debug, Default)]
struct Tally {
    allowed: BTreeMap<Algo, u64>,
    denied: BTreeMap<Algo, u64>,
    never: u64,
    peeks: u64,
}

/// A seeded mix of all four limiters on the server clock (no NOW): small limits, so
/// many denials; COST sometimes above 1 and sometimes above the limit; some PEEKs.
fn workload(c: &mut Connection, seed: u64, steps: usize) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let limiters = limiters(&mut rng);
    let mut tally = Tally::default();
    for _ in 0..steps {
        let l = &limiters[rng.gen_range(0..limiters.len())];
        let window = &l.windows[rng.gen_range(0..l.windows.len())];
        let mut line = format!("{} {} {} {window}", l.algo.command(), l.key, l.limit);
        if let Some(b) = l.burst {
            line.push_str(&format!(" BURST {b}"));
        }
        let cost = match rng.gen_range(0..100) {
            _ if l.big => rng.gen_range(100..=1_000),
            0..=74 => 1,
            75..=94 => rng.gen_range(2..=3),
            // Never admissible (for GCRA: above the burst too).
            _ => l.limit.max(l.burst.unwrap_or(0)) + 1,
        };
        if cost != 1 || rng.gen_bool(0.1) {
            line.push_str(&format!(" COST {cost}"));
        }
        let peek = rng.gen_bool(0.05);
        if peek {
            line.push_str(" PEEK");
        }
        let reply = rl(c, &line);
        if peek {
            tally.peeks += 1;
        } else if reply.0 == 1 {
            *tally.allowed.entry(l.algo).or_default() += 1;
        } else {
            *tally.denied.entry(l.algo).or_default() += 1;
            if reply.2 == -1 {
                tally.never += 1;
            }
        }
    }
    for algo in Algo::ALL {
        assert!(
            tally.allowed.get(&algo).copied().unwrap_or(0) > 50
                && tally.denied.get(&algo).copied().unwrap_or(0) > 50,
            "the workload did not exercise {algo:?} both ways: {tally:?}"
        );
    }
    assert!(tally.never > 0 && tally.peeks > 0, "{tally:?}");
    tally
}

// ---------------------------------------------------------------------------------
// Comparing datasets

type Snapshot = Vec<(Vec<u8>, Option<Vec<u8>>, i64)>;

/// The keys of a snapshot that no expiry can touch before `cutoff_ms`.
fn stable(snap: &Snapshot, cutoff_ms: i64) -> BTreeMap<String, (Option<Vec<u8>>, i64)> {
    snap.iter()
        .filter(|(_, _, at)| *at == -1 || *at > cutoff_ms)
        .map(|(k, d, at)| (String::from_utf8_lossy(k).into_owned(), (d.clone(), *at)))
        .collect()
}

/// Asserts that the two datasets agree on every key not about to expire, and that
/// the comparison covered keys of every limiter.
fn assert_same_data(label: &str, expected: &Snapshot, actual: &Snapshot, now_ms: i64) -> usize {
    for (k, dump, at) in expected {
        let name = String::from_utf8_lossy(k);
        assert_ne!(*at, -1, "{label}: {name} has no TTL");
        if *at != -2 {
            assert!(dump.is_some(), "{label}: {name} has an expiry but no value");
        }
    }
    let cutoff = now_ms + MARGIN_MS;
    let want = stable(expected, cutoff);
    let got = stable(actual, cutoff);
    let mut problems = Vec::new();
    for (k, v) in &want {
        match got.get(k) {
            None => problems.push(format!("{k}: missing (expires at {})", v.1)),
            Some(g) if g.1 != v.1 => {
                problems.push(format!("{k}: expires at {} instead of {}", g.1, v.1))
            }
            Some(g) if g.0 != v.0 => problems.push(format!(
                "{k}: DUMP differs:\n  want {:?}\n  got  {:?}",
                v.0.as_deref().map(String::from_utf8_lossy),
                g.0.as_deref().map(String::from_utf8_lossy)
            )),
            Some(_) => {}
        }
    }
    for (k, g) in &got {
        if !want.contains_key(k) {
            problems.push(format!("{k}: unexpected key (expires at {})", g.1));
        }
    }
    assert!(
        problems.is_empty(),
        "{label}: {} of {} keys differ:\n{}",
        problems.len(),
        want.len(),
        problems.join("\n")
    );
    for algo in Algo::ALL {
        let n = want
            .keys()
            .filter(|k| k.ends_with(algo.tag()) || k.contains(&format!("{}:", algo.tag())))
            .count();
        assert!(
            n > 0,
            "{label}: no {algo:?} key was compared: {:?}",
            want.keys()
        );
    }
    want.len()
}

// ---------------------------------------------------------------------------------
// Restarting from the AOF and from an RDB file

const AOF: [&str; 4] = ["--appendonly", "yes", "--appendfsync", "always"];

/// Starts a server on a copy of a data directory (the later `--dir` wins over the
/// harness's own), with or without the module.
fn restart(dir: &Path, with_module: bool, extra: &[&str]) -> Server {
    let dir = dir.to_str().expect("utf-8 path");
    let mut args = vec!["--dir", dir];
    args.extend_from_slice(extra);
    if with_module {
        Server::start_with(&args)
    } else {
        Server::start_without_module(&args)
    }
}

/// Runs the workload and returns the dataset it left, checked to hold expired keys.
fn run_workload(c: &mut Connection, seed: u64, steps: usize) -> Snapshot {
    let started = Instant::now();
    let tally = workload(c, seed, steps);
    let expired = info_int(c, "stats", "expired_keys");
    assert!(
        expired > 0,
        "no key expired during the {:?} workload",
        started.elapsed()
    );
    eprintln!(
        "{steps} requests in {:?}, {expired} keys expired, {tally:?}",
        started.elapsed()
    );
    snapshot(c)
}

#[test]
fn aof_reload_gives_back_the_same_data() {
    let mut s = Server::start_with(&AOF);
    let mut c = s.conn();
    let before = run_workload(&mut c, 0xa0f_0001, AOF_STEPS);
    drop(c);
    // With appendfsync always every reply was preceded by its fsync: a crash loses
    // nothing that was answered.
    crash(&mut s);
    let saved = tempfile::tempdir().expect("temp dir");
    let copies = [saved.path().join("a"), saved.path().join("b")];
    for copy in &copies {
        copy_dir(s.dir.path(), copy);
    }
    drop(s);

    // The AOF holds the effects as core commands, never a limiter command to re-run.
    let aof: Vec<_> = files(&copies[0])
        .into_iter()
        .filter(|(name, _)| name.contains("appendonly"))
        .collect();
    assert!(!aof.is_empty(), "no AOF written: {:?}", files(&copies[0]));
    let all: Vec<u8> = aof.iter().flat_map(|(_, data)| data.clone()).collect();
    for command in ["rl.slidelog", "rl.slidecount", "rl.fixed", "rl.gcra"] {
        assert!(!contains_ci(&all, command), "the AOF holds {command}");
    }
    for effect in ["ZREMRANGEBYSCORE", "ZADD", "INCRBY", "PEXPIREAT", "PXAT"] {
        assert!(contains_ci(&all, effect), "the AOF holds no {effect}");
    }

    for (copy, with_module) in copies.iter().zip([true, false]) {
        let label = if with_module {
            "AOF reload with the module"
        } else {
            "AOF reload without the module"
        };
        let mut s2 = restart(copy, with_module, &AOF);
        let mut c2 = s2.conn();
        let now = server_time_ms(&mut c2);
        let after = snapshot(&mut c2);
        let compared = assert_same_data(label, &before, &after, now);
        eprintln!("{label}: {compared} of {} keys compared", before.len());
        assert!(s2.alive());
    }
}

#[test]
fn rdb_save_gives_back_the_same_data() {
    let s = Server::start();
    let mut c = s.conn();
    let before = run_workload(&mut c, 0x4db_0001, STEPS);
    let ok: String = redis::cmd("SAVE").query(&mut c).expect("SAVE");
    assert_eq!(ok, "OK");
    assert_eq!(
        info_int(&mut c, "persistence", "rdb_changes_since_last_save"),
        0
    );
    drop(c);
    // SAVE wrote the file whole (renamed into place): copy it while the server runs.
    let saved = tempfile::tempdir().expect("temp dir");
    std::fs::copy(s.dir.path().join("dump.rdb"), saved.path().join("dump.rdb"))
        .expect("copy dump.rdb");
    drop(s);

    for with_module in [true, false] {
        let label = if with_module {
            "RDB load with the module"
        } else {
            "RDB load without the module"
        };
        let mut s2 = restart(
            saved.path(),
            with_module,
            &["--dbfilename", "dump.rdb", "--appendonly", "no"],
        );
        let mut c2 = s2.conn();
        let now = server_time_ms(&mut c2);
        let after = snapshot(&mut c2);
        let compared = assert_same_data(label, &before, &after, now);
        eprintln!("{label}: {compared} of {} keys compared", before.len());
        assert!(s2.alive());
    }
}

// ---------------------------------------------------------------------------------
// Dirty counting

fn dirty(c: &mut Connection) -> i64 {
    info_int(c, "persistence", "rdb_changes_since_last_save")
}

/// Runs `line`, asserts whether it marked the dataset dirty, and returns its reply.
fn call(c: &mut Connection, line: &str, writes: bool) -> Reply {
    let before = dirty(c);
    let reply = rl(c, line);
    let after = dirty(c);
    if writes {
        assert!(
            after > before,
            "{line} -> {reply:?}: not counted as a change"
        );
    } else {
        assert_eq!(after, before, "{line} -> {reply:?}: counted as a change");
    }
    reply
}

#[test]
fn writes_and_only_writes_mark_the_dataset_dirty() {
    let s = Server::start();
    let mut c = s.conn();
    let t = T0;
    // Two windows on: SLIDECOUNT's previous window no longer counts either.
    let later = T0 + 121_000_000;

    // Limiters whose denials write nothing.
    for (cmd, key) in [
        ("RL.FIXED", "rl:{d}:fix"),
        ("RL.SLIDECOUNT", "rl:{d}:cnt"),
        ("RL.GCRA", "rl:{d}:gcra"),
    ] {
        let at = |now: u64, rest: &str| format!("{cmd} {key} 2 60s NOW {now}{rest}");
        assert_eq!(call(&mut c, &at(t, " PEEK"), false).0, 1, "{cmd}");
        assert_eq!(call(&mut c, &at(t, ""), true).0, 1, "{cmd}");
        assert_eq!(call(&mut c, &at(t + 1, ""), true).0, 1, "{cmd}");
        assert_eq!(call(&mut c, &at(t + 2, " PEEK"), false).0, 0, "{cmd}");
        assert_eq!(call(&mut c, &at(t + 3, ""), false).0, 0, "{cmd}");
        assert_eq!(call(&mut c, &at(t + 4, " COST 2"), false).0, 0, "{cmd}");
        let never = call(&mut c, &at(t + 5, " COST 3"), false);
        assert_eq!((never.0, never.2), (0, -1), "{cmd}");
        // A window later the budget is back, and spending it writes again.
        assert_eq!(call(&mut c, &at(later, " PEEK"), false).0, 1, "{cmd}");
        assert_eq!(call(&mut c, &at(later, " COST 2"), true).0, 1, "{cmd}");
    }

    // RL.SLIDELOG sets the TTL "either way" (the seed script's PEXPIRE runs on both
    // branches), so a denial on an existing log is a write: it changes the key's
    // expiry, which an RDB save must keep. Only PEEK, and a denial on a log that does
    // not exist (no key to expire), write nothing.
    let log = |now: u64, rest: &str| format!("RL.SLIDELOG rl:{{d}}:log 2 60s NOW {now}{rest}");
    assert_eq!(call(&mut c, &log(t, " COST 3"), false).0, 0);
    assert_eq!(call(&mut c, &log(t, " PEEK"), false).0, 1);
    assert_eq!(call(&mut c, &log(t, ""), true).0, 1);
    assert_eq!(call(&mut c, &log(t + 1, ""), true).0, 1);
    assert_eq!(call(&mut c, &log(t + 2, " PEEK"), false).0, 0);
    assert_eq!(call(&mut c, &log(t + 3, ""), true).0, 0);
    assert_eq!(call(&mut c, &log(t + 4, " COST 3"), true).0, 0);
    // PEEK after the window does not trim what the real call would.
    assert_eq!(call(&mut c, &log(later, " PEEK"), false).0, 1);
    let entries: i64 = redis::cmd("ZCARD").arg("rl:{d}:log").query(&mut c).unwrap();
    assert_eq!(entries, 2, "PEEK trimmed the log");
    assert_eq!(call(&mut c, &log(later, ""), true).0, 1);
    let entries: i64 = redis::cmd("ZCARD").arg("rl:{d}:log").query(&mut c).unwrap();
    assert_eq!(entries, 1);
}
