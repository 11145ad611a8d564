//! Replicas receive the effects of the limiter commands (ZREMRANGEBYSCORE, ZADD,
//! INCRBY, SET … PXAT and PEXPIREAT with absolute instants), never the commands: after
//! a randomized workload on the server clock, a replica holds byte-identical values with
//! the same expiry instants, whether or not it has the module loaded. Denied calls that
//! wrote nothing, and PEEK, send nothing to the replication stream.
mod common;
use common::*;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Requests in the randomized workload (a few hundred milliseconds of real time, so
/// that the tiny windows expire keys while it runs).
const STEPS: usize = 20_000;
/// Keys whose expiry is this close to (or past) the primary's clock when the
/// snapshots are taken are left out of the comparison: they may be deleted on one
/// side and not yet on the other.
const MARGIN_MS: i64 = 1_000;

// ---------------------------------------------------------------------------------
// Servers

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

/// A primary with the module and one replica (with or without it), linked.
fn pair(replica_has_module: bool, extra: &[&str]) -> (Server, Server) {
    // Full sync at once (the default waits seconds for more replicas to join).
    let mut primary_args = vec!["--repl-diskless-sync-delay", "0"];
    primary_args.extend_from_slice(extra);
    let primary = Server::start_with(&primary_args);
    let port = primary.port.to_string();
    let mut args = vec!["--replicaof", "127.0.0.1", port.as_str()];
    args.extend_from_slice(extra);
    let replica = if replica_has_module {
        Server::start_with(&args)
    } else {
        Server::start_without_module(&args)
    };
    wait_link(&primary, &replica);
    (primary, replica)
}

/// Bounded polling until the replica reports its link to the primary up.
fn wait_link(primary: &Server, replica: &Server) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut r = replica.conn();
    while info_field(&mut r, "replication", "master_link_status").as_deref() != Some("up") {
        assert!(
            Instant::now() < deadline,
            "replication link not up within 30 s\nprimary log:\n{}\nreplica log:\n{}",
            primary.log(),
            replica.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn server_time_ms(c: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

fn wait_replicas(c: &mut Connection, n: i64) {
    let acked: i64 = redis::cmd("WAIT").arg(n).arg(5000).query(c).expect("WAIT");
    assert_eq!(
        acked, n,
        "WAIT {n} 5000: only {acked} replicas acknowledged"
    );
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
fn workload(c: &mut Connection, seed: u64) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let limiters = limiters(&mut rng);
    let mut tally = Tally::default();
    for _ in 0..STEPS {
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
        assert_ne!(*at, -1, "{label}: {name} has no TTL on the primary");
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

/// Runs the workload on a primary, then compares the replica with it.
fn converges(replica_has_module: bool, seed: u64) {
    let label = if replica_has_module {
        "replica with the module"
    } else {
        "replica without the module"
    };
    let t = Instant::now();
    let (mut primary, mut replica) = pair(replica_has_module, &[]);
    eprintln!("{label}: linked in {:?}", t.elapsed());
    let mut p = primary.conn();
    let mut r = replica.conn();
    // (Connecting costs an error or two: the client library tries commands that older
    // servers do not have. Count from here.)
    let errors_before = info_int(&mut r, "stats", "total_error_replies");

    let started = Instant::now();
    let tally = workload(&mut p, seed);
    let took = started.elapsed();
    // The tiny windows made keys expire while the workload ran: lazily (a limiter
    // opening its own expired key) and actively. Their deletions are replicated too.
    let expired = info_int(&mut p, "stats", "expired_keys");
    assert!(expired > 0, "no key expired during a {took:?} workload");
    eprintln!("{label}: {STEPS} requests in {took:?}, {expired} keys expired, {tally:?}");

    wait_replicas(&mut p, 1);
    let now = server_time_ms(&mut p);
    let on_primary = snapshot(&mut p);
    let on_replica = snapshot(&mut r);
    assert!(primary.alive() && replica.alive());
    let compared = assert_same_data(label, &on_primary, &on_replica, now);
    eprintln!(
        "{label}: {compared} of {} keys compared, {:?} since start",
        on_primary.len(),
        started.elapsed()
    );

    let applied = info(&mut r, "commandstats");
    let calls = |name: &str| {
        applied
            .lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
            .and_then(|v| v.split(',').next())
            .map_or(0, |v| v.parse::<u64>().unwrap_or(0))
    };
    eprintln!(
        "{label}: the replica applied {} ZADD, {} ZREMRANGEBYSCORE, {} ZREM, {} INCRBY, \
         {} SET, {} PEXPIREAT, {} DEL",
        calls("zadd"),
        calls("zremrangebyscore"),
        calls("zrem"),
        calls("incrby"),
        calls("set"),
        calls("pexpireat"),
        calls("del")
    );
    for effect in ["zadd", "zremrangebyscore", "incrby", "set", "pexpireat"] {
        assert!(calls(effect) > 0, "{label}: no {effect} replicated");
    }
    // Expired keys reach the replica as DEL (Redis 7.0) or UNLINK (Valkey, whose
    // lazyfree-lazy-expire defaults to yes).
    assert!(
        calls("del") + calls("unlink") > 0,
        "{label}: no expiry (DEL or UNLINK) replicated"
    );
    // The replica never ran a limiter command: it applied core commands only.
    assert!(
        !applied.to_ascii_lowercase().contains("cmdstat_rl."),
        "{label} executed limiter commands:\n{applied}"
    );
    // Every replicated command applied cleanly (a replica without the module would
    // refuse an RL.* command with an error).
    assert_eq!(
        info_int(&mut r, "stats", "total_error_replies"),
        errors_before,
        "{label}: errors while applying the stream: {}\n{}",
        info(&mut r, "errorstats"),
        info(&mut r, "commandstats")
    );
    if replica_has_module {
        // Nor did it count any decision of its own (`INFO rl`: rl_<command>_<counter>).
        let rl_info = info(&mut r, "rl");
        let fields: Vec<&str> = rl_info.lines().filter(|l| l.starts_with("rl_")).collect();
        assert!(!fields.is_empty(), "no INFO rl section:\n{rl_info}");
        for line in fields {
            assert!(
                line.ends_with(":0"),
                "{label} decided requests itself: {line}"
            );
        }
        // While the primary counted them.
        let rl_primary = info(&mut p, "rl");
        assert!(
            rl_primary
                .lines()
                .any(|l| l.starts_with("rl_fixed_") && !l.ends_with(":0")),
            "{rl_primary}"
        );
    }
}

#[test]
fn replica_with_module_converges() {
    converges(true, 0x5eed_0001);
}

#[test]
fn replica_without_module_converges() {
    converges(false, 0x5eed_0002);
}

// ---------------------------------------------------------------------------------
// What goes into the replication stream

fn repl_offset(c: &mut Connection) -> i64 {
    info_int(c, "replication", "master_repl_offset")
}

/// Runs `line` and returns its reply and how far the replication stream moved.
fn offset_moved(c: &mut Connection, line: &str) -> (Reply, i64) {
    let before = repl_offset(c);
    let reply = rl(c, line);
    (reply, repl_offset(c) - before)
}

#[test]
fn denials_and_peeks_replicate_nothing() {
    // No replication PINGs (they also move the offset) while the test runs.
    let (primary, replica) = pair(true, &["--repl-ping-replica-period", "3600"]);
    let mut p = primary.conn();
    let t = T0;
    let cases: [(&str, &str); 4] = [
        ("RL.FIXED", "rl:{a}:fix 2 60s"),
        ("RL.SLIDECOUNT", "rl:{a}:cnt 2 60s"),
        ("RL.GCRA", "rl:{a}:gcra 2 60s"),
        ("RL.SLIDELOG", "rl:{a}:log 2 60s"),
    ];
    for (cmd, args) in cases {
        let (reply, moved) = offset_moved(&mut p, &format!("{cmd} {args} NOW {t} PEEK"));
        assert_eq!((reply.0, moved), (1, 0), "{cmd}: PEEK on a fresh key");
        for i in 0..2 {
            let (reply, moved) = offset_moved(&mut p, &format!("{cmd} {args} NOW {}", t + i));
            assert_eq!(reply.0, 1, "{cmd} call {i}: {reply:?}");
            assert!(moved > 0, "{cmd}: an allowed call replicated nothing");
        }
        let (reply, moved) = offset_moved(&mut p, &format!("{cmd} {args} NOW {} PEEK", t + 2));
        assert_eq!((reply.0, moved), (0, 0), "{cmd}: PEEK on a full limiter");
        let (reply, moved) = offset_moved(&mut p, &format!("{cmd} {args} NOW {}", t + 3));
        assert_eq!(reply.0, 0, "{cmd}: {reply:?}");
        if cmd == "RL.SLIDELOG" {
            // The script's PEXPIRE runs on denials too: the TTL refresh is a write.
            assert!(
                moved > 0,
                "{cmd}: a denial's TTL refresh was not replicated"
            );
        } else {
            assert_eq!(moved, 0, "{cmd}: a denial that wrote nothing replicated");
        }
        // A cost above the limit is refused before anything else (nothing to write,
        // except SLIDELOG's TTL refresh again).
        let (reply, moved) = offset_moved(&mut p, &format!("{cmd} {args} COST 3 NOW {}", t + 4));
        assert_eq!((reply.0, reply.2), (0, -1), "{cmd}: {reply:?}");
        assert_eq!(
            moved > 0,
            cmd == "RL.SLIDELOG",
            "{cmd} COST 3: moved {moved}"
        );
    }
    // And what was replicated reproduces the primary's data exactly.
    wait_replicas(&mut p, 1);
    let now = server_time_ms(&mut p);
    let mut r = replica.conn();
    let (a, b) = (snapshot(&mut p), snapshot(&mut r));
    assert_eq!(a.len(), 4, "{a:?}");
    assert_same_data("denials", &a, &b, now);
}
