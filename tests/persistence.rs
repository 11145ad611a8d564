//! The AOF and RDB files hold the effects of the limiter commands: restarting from
//! either gives back byte-identical values with the same expiry instants (an AOF even
//! when the module is not loaded on restart, since only core commands were logged).
//! Allowed calls mark the dataset dirty so that RDB saves happen; denials that wrote
//! nothing, and PEEK, do not.
mod common;
use common::workload::*;
use common::*;

use std::path::Path;
use std::time::{Duration, Instant};

/// Requests in the randomized workloads (long enough for the tiny windows to expire
/// keys while they run). With `appendfsync always` every write waits for an fsync,
/// so the AOF run is shorter.
const STEPS: usize = 10_000;
const AOF_STEPS: usize = 3_000;

// ---------------------------------------------------------------------------------
// Servers and files

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

// ---------------------------------------------------------------------------------
// Restarting from the AOF and from an RDB file

/// Asserts that a restarted server holds the dataset taken before it went down.
fn assert_restored(label: &str, mut server: Server, before: &Snapshot) {
    let mut c = server.conn();
    let now = server_time_ms(&mut c);
    let after = snapshot(&mut c);
    let compared = assert_same_data(label, before, &after, now);
    eprintln!("{label}: {compared} of {} keys compared", before.len());
    assert!(server.alive());
}

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
        let s2 = restart(copy, with_module, &AOF);
        assert_restored(label, s2, &before);
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
        let s2 = restart(
            saved.path(),
            with_module,
            &["--dbfilename", "dump.rdb", "--appendonly", "no"],
        );
        assert_restored(label, s2, &before);
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

// ---------------------------------------------------------------------------------
// After every step

/// Steps of the edge workload: each is followed by an AOF reload.
const EDGE_STEPS: usize = 500;

/// An AOF without fsync waits, and `DEBUG LOADAOF` to reload it.
const AOF_WITH_DEBUG: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "no",
    "--enable-debug-command",
    "yes",
];

/// A later trim repairs an earlier wrong one in the AOF as on a replica, so the AOF is
/// reloaded (DEBUG LOADAOF) and compared with the dataset it replaced after every call,
/// on a workload whose NOW lands on the edges (an entry exactly `window` old, a window
/// boundary, a TAT): every limiter.
#[test]
fn aof_reload_matches_after_every_step() {
    let s = Server::start_with(AOF_WITH_DEBUG);
    let mut c = s.conn();
    let started = Instant::now();
    let mut compared = 0;
    let tally = edge_workload(&mut c, 0xa0f_ed9e, EDGE_STEPS, |c, step, line| {
        let before = snapshot(c);
        let now = server_time_ms(c);
        let _: () = redis::cmd("DEBUG")
            .arg("LOADAOF")
            .query(c)
            .expect("DEBUG LOADAOF");
        let after = snapshot(c);
        let label = format!("AOF reload, step {step} ({line})");
        compared += assert_same_keys(&label, &before, &after, now).len();
    });
    eprintln!(
        "{EDGE_STEPS} steps in {:?}, {compared} key comparisons, {tally:?}",
        started.elapsed()
    );
    let mut fresh = s.conn();
    let now = server_time_ms(&mut fresh);
    let before = snapshot(&mut fresh);
    let _: () = redis::cmd("DEBUG")
        .arg("LOADAOF")
        .query(&mut fresh)
        .unwrap();
    assert_same_data("AOF reload at the end", &before, &snapshot(&mut fresh), now);
}

/// RL.CONCURRENCY in the AOF: reloaded after every step of the lease workload, the
/// dataset is the one it replaced.
#[test]
fn lease_aof_reload_matches_after_every_step() {
    let s = Server::start_with(AOF_WITH_DEBUG);
    let mut c = s.conn();
    let mut compared = 0;
    let tally = common::leases::lease_workload(&mut c, 0xa0f_1ea5, 300, |c, step, line| {
        let before = snapshot(c);
        let now = server_time_ms(c);
        let _: () = redis::cmd("DEBUG")
            .arg("LOADAOF")
            .query(c)
            .expect("DEBUG LOADAOF");
        let label = format!("AOF reload, step {step} ({line})");
        compared += assert_same_keys(&label, &before, &snapshot(c), now).len();
    });
    eprintln!("{compared} key comparisons, {tally:?}");
    assert!(compared > 300, "{compared}");
}
