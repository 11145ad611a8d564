//! Replicas receive the effects of the limiter commands (ZREMRANGEBYSCORE, ZADD,
//! INCRBY, SET … PXAT and PEXPIREAT with absolute instants), never the commands: after
//! a randomized workload on the server clock, a replica holds byte-identical values with
//! the same expiry instants, whether or not it has the module loaded. Denied calls that
//! wrote nothing, and PEEK, send nothing to the replication stream.
mod common;
use common::workload::*;
use common::*;

use std::time::Instant;

/// Requests in the randomized workload (a few hundred milliseconds of real time, so
/// that the tiny windows expire keys while it runs).
const STEPS: usize = 20_000;

// ---------------------------------------------------------------------------------
// Servers

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

/// A primary with the module and two linked replicas: one with it, one without.
fn trio() -> (Server, Server, Server) {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica_of = ["--replicaof", "127.0.0.1", port.as_str()];
    let with = Server::start_with(&replica_of);
    let without = Server::start_without_module(&replica_of);
    wait_link(&primary, &with);
    wait_link(&primary, &without);
    (primary, with, without)
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
    let tally = workload(&mut p, seed, STEPS);
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
        let fields: Vec<&str> = rl_info
            .lines()
            .filter(|l| l.starts_with("rl_") && !l.starts_with("rl_build:"))
            .collect();
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
    let cases: [(&str, &str); 6] = [
        ("RL.FIXED", "rl:{a}:fix 2 60s"),
        ("RL.COUNTER", "rl:{a}:ctr 2 60s"),
        ("RL.SLIDEWINDOW", "rl:{a}:win 2 60s"),
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
    assert_eq!(a.len(), 6, "{a:?}");
    assert_same_data("denials", &a, &b, now);
}

// ---------------------------------------------------------------------------------
// After every step

/// Steps of the edge workload: each is followed by a WAIT and three snapshots.
const EDGE_STEPS: usize = 600;

/// A later trim repairs an earlier wrong one (a replicated bound off by one µs leaves
/// an entry that the next trim removes anyway), so the replicas are compared with the
/// primary after every call, on a workload whose NOW lands on the edges (an entry
/// exactly `window` old, a window boundary, a TAT): every limiter, with and without
/// the module on the replica.
#[test]
fn replicas_match_the_primary_after_every_step() {
    let (primary, with, without) = trio();
    let (mut r1, mut r2) = (with.conn(), without.conn());
    let mut p = primary.conn();
    let started = Instant::now();
    let mut compared = 0;
    let tally = edge_workload(&mut p, 0xed9e_0001, EDGE_STEPS, |p, step, line| {
        wait_replicas(p, 2);
        let now = server_time_ms(p);
        let on_primary = snapshot(p);
        for (label, r) in [
            ("replica with the module", &mut r1),
            ("replica without the module", &mut r2),
        ] {
            let on_replica = snapshot(r);
            let label = format!("{label}, step {step} ({line})");
            compared += assert_same_keys(&label, &on_primary, &on_replica, now).len();
        }
    });
    eprintln!(
        "{EDGE_STEPS} steps in {:?}, {compared} key comparisons, {tally:?}",
        started.elapsed()
    );
    // And the end state covers every limiter.
    wait_replicas(&mut p, 2);
    let now = server_time_ms(&mut p);
    let on_primary = snapshot(&mut p);
    assert_same_data("with", &on_primary, &snapshot(&mut r1), now);
    assert_same_data("without", &on_primary, &snapshot(&mut r2), now);
}

/// RL.CONCURRENCY's effects (ZADD with absolute scores, ZREM, ZREMRANGEBYSCORE,
/// PEXPIREAT, DEL) leave both replicas identical to the primary after every step,
/// whatever their clocks say: leases acquired, renewed, released and expired on a
/// stepped NOW, and 2,500 expired leases reclaimed in two calls.
#[test]
fn lease_replicas_match_the_primary_after_every_step() {
    let (primary, with, without) = trio();
    let (mut r1, mut r2) = (with.conn(), without.conn());
    let mut p = primary.conn();
    let mut compared = 0;
    let tally = common::leases::lease_workload(&mut p, 0x1ea5e, 300, |p, step, line| {
        wait_replicas(p, 2);
        let now = server_time_ms(p);
        let on_primary = snapshot(p);
        for (label, r) in [
            ("replica with the module", &mut r1),
            ("replica without the module", &mut r2),
        ] {
            let label = format!("{label}, step {step} ({line})");
            compared += assert_same_keys(&label, &on_primary, &snapshot(r), now).len();
        }
    });
    eprintln!("{compared} key comparisons, {tally:?}");
    let applied = info(&mut r2, "commandstats");
    for effect in ["zadd", "zrem", "zremrangebyscore", "pexpireat", "del"] {
        assert!(
            applied.contains(&format!("cmdstat_{effect}:")),
            "no {effect} replicated:\n{applied}"
        );
    }
    assert!(!applied.contains("cmdstat_rl."), "{applied}");
}
