//! RL.CONCURRENCY on a real server: leases in flight, never more than `limit` under
//! 40 parallel clients; expiry and HEARTBEAT on a stepped NOW; the sorted-set layout
//! (member = lease id, score = expiry in µs) with the key expiring with its last
//! lease; bad input refused with nothing written; and the CONCURRENCY limit of
//! RL.ALL, all or nothing in both directions.
mod common;
use common::*;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

const S: u64 = 1_000_000;

fn scores(c: &mut Connection, key: &str) -> Vec<(String, u64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE")
}

/// 40 clients, each on its own connection and thread, take leases with ids of their
/// own, hold them for a moment and release them (some acquires retried first). A
/// client counts a lease as held only after the server granted it and stops counting
/// before it releases it, so the count never exceeds what the server holds: it must
/// never exceed the limit, and it must reach it (the clients really contended).
#[test]
fn never_more_than_limit_leases_under_40_parallel_clients() {
    const CLIENTS: usize = 40;
    const ROUNDS: usize = 150;
    const LIMIT: i64 = 5;
    let s = Server::start();
    let in_flight = Arc::new(AtomicI64::new(0));
    let peak = Arc::new(AtomicI64::new(0));
    let granted = Arc::new(AtomicUsize::new(0));
    let denied = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let first_wave = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut c = s.conn();
            let (in_flight, peak, granted, denied, barrier, first_wave) = (
                in_flight.clone(),
                peak.clone(),
                granted.clone(),
                denied.clone(),
                barrier.clone(),
                first_wave.clone(),
            );
            std::thread::spawn(move || {
                // First wave: all 40 at once, nobody releasing: exactly `limit` win.
                barrier.wait();
                let first = format!("RL.CONCURRENCY rl:conc {LIMIT} 60s ACQUIRE first{t}");
                let won = rl(&mut c, &first).0 == 1;
                if won {
                    first_wave.fetch_add(1, Ordering::SeqCst);
                }
                barrier.wait();
                if won {
                    let release = format!("RL.CONCURRENCY rl:conc {LIMIT} 60s RELEASE first{t}");
                    assert_eq!(rl(&mut c, &release).0, 1);
                }
                barrier.wait();
                // Then churn: acquire, hold for a call or two, release.
                for round in 0..ROUNDS {
                    let id = format!("client{t}-req{round}");
                    let acquire = format!("RL.CONCURRENCY rl:conc {LIMIT} 60s ACQUIRE {id}");
                    let r = rl(&mut c, &acquire);
                    if r.0 == 0 {
                        assert!(r.2 > 0, "{acquire}: denied without a wait: {r:?}");
                        denied.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= LIMIT, "{now} leases in flight, limit {LIMIT}");
                    granted.fetch_add(1, Ordering::Relaxed);
                    // A retried acquire of the same id renews, whatever the others hold.
                    if round % 3 == 0 {
                        assert_eq!(rl(&mut c, &acquire).0, 1, "{acquire} retried");
                    }
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let release = format!("RL.CONCURRENCY rl:conc {LIMIT} 60s RELEASE {id}");
                    assert_eq!(rl(&mut c, &release).0, 1);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client thread");
    }
    assert_eq!(
        first_wave.load(Ordering::SeqCst),
        LIMIT as usize,
        "first wave"
    );
    let (granted, denied) = (
        granted.load(Ordering::Relaxed),
        denied.load(Ordering::Relaxed),
    );
    let peak = peak.load(Ordering::SeqCst);
    eprintln!("{granted} leases granted, {denied} denied, at most {peak} at once");
    assert_eq!(granted + denied, CLIENTS * ROUNDS);
    assert!(denied > 0 && granted > CLIENTS, "{granted} / {denied}");
    assert!(peak <= LIMIT, "{peak}");
    let mut c = s.conn();
    // Every lease was released: the key went with the last one.
    assert_eq!(scores(&mut c, "rl:conc"), vec![]);
    let exists: i64 = redis::cmd("EXISTS").arg("rl:conc").query(&mut c).unwrap();
    assert_eq!(exists, 0);
}

/// Leases expire on the call's clock; HEARTBEAT keeps one alive, and a heartbeat
/// after the lease is gone is denied (retry -1); the layout is the ids scored by
/// their expiry, the key expiring with the last lease (a duration on the server
/// clock). A crashed worker's lease frees its slot at its expiry, exactly.
#[test]
fn leases_expire_and_heartbeats_renew_on_a_stepped_now() {
    let s = Server::start();
    let mut c = s.conn();
    let k = "rl:{t}:conc";
    let call = |c: &mut Connection, op: &str, at: u64| {
        rl(c, &format!("RL.CONCURRENCY {k} 2 10s {op} NOW {}", T0 + at))
    };
    assert_eq!(call(&mut c, "ACQUIRE worker-a", 0), (1, 1, 0, 10_000));
    assert_eq!(call(&mut c, "ACQUIRE worker-b", 2 * S), (1, 0, 0, 10_000));
    assert_eq!(
        scores(&mut c, k),
        vec![
            ("worker-a".to_string(), T0 + 10 * S),
            ("worker-b".to_string(), T0 + 12 * S)
        ]
    );
    // The key's TTL: until the last lease, from the server's now.
    let pttl: i64 = redis::cmd("PTTL").arg(k).query(&mut c).unwrap();
    assert!((9_000..=10_000).contains(&pttl), "PTTL {pttl}");
    // Full: the earliest lease (a, at +10 s) frees the next slot.
    assert_eq!(
        call(&mut c, "ACQUIRE worker-c", 3 * S),
        (0, 0, 7_000, 9_000)
    );
    assert_eq!(call(&mut c, "PEEK", 3 * S), (0, 0, 7_000, 9_000));
    // b keeps its lease alive; a (crashed) does not.
    assert_eq!(call(&mut c, "HEARTBEAT worker-b", 9 * S), (1, 0, 0, 10_000));
    assert_eq!(scores(&mut c, k)[1], ("worker-b".to_string(), T0 + 19 * S));
    // 1 µs before a's expiry the limiter is still full; at it, a's slot is free, and
    // a (still in the set, not yet reclaimed) no longer holds a lease.
    assert_eq!(call(&mut c, "ACQUIRE worker-c", 10 * S - 1).0, 0);
    assert_eq!(
        call(&mut c, "HEARTBEAT worker-a", 10 * S),
        (0, 1, -1, 9_000)
    );
    assert_eq!(call(&mut c, "ACQUIRE worker-c", 10 * S), (1, 0, 0, 10_000));
    // a's lease is gone (trimmed), and its heartbeat denied for good.
    assert_eq!(
        call(&mut c, "HEARTBEAT worker-a", 10 * S),
        (0, 0, -1, 10_000)
    );
    let members: Vec<String> = scores(&mut c, k).into_iter().map(|m| m.0).collect();
    assert_eq!(members, ["worker-b", "worker-c"]);
    // A retried acquire renews instead of taking a slot.
    assert_eq!(call(&mut c, "ACQUIRE worker-c", 11 * S), (1, 0, 0, 10_000));
    assert_eq!(scores(&mut c, k).len(), 2);
    // Release frees the slot and answers as PEEK (what a new acquire would get).
    // Its reset is the leases' own: c's, until +21 s (a new lease not counted).
    assert_eq!(call(&mut c, "RELEASE worker-b", 12 * S), (1, 0, 0, 9_000));
    assert_eq!(call(&mut c, "RELEASE nobody", 12 * S), (1, 0, 0, 9_000));
    assert_eq!(call(&mut c, "RELEASE worker-b", 12 * S), (1, 0, 0, 9_000));
    // The key now expires with c, the last lease (until +21 s, 9 s from now).
    let pttl: i64 = redis::cmd("PTTL").arg(k).query(&mut c).unwrap();
    assert!((8_000..=9_000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(call(&mut c, "RESET", 12 * S), (1, 1, 0, 0));
    let exists: i64 = redis::cmd("EXISTS").arg(k).query(&mut c).unwrap();
    assert_eq!(exists, 0);
    // INFO rl counts every call, as for the other limiters.
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    for field in [
        "rl_concurrency_calls:14",
        "rl_concurrency_allowed:9",
        "rl_concurrency_denied:5",
    ] {
        assert!(info.lines().any(|l| l.trim() == field), "{field}:\n{info}");
    }
}

/// A long run of expired leases is reclaimed at most 1,000 per call, and decisions
/// count only live leases meanwhile.
#[test]
fn expired_leases_are_reclaimed_at_most_1000_per_call() {
    let s = Server::start();
    let mut c = s.conn();
    let k = "rl:many";
    let mut pipe = redis::pipe();
    for i in 0..2_500 {
        pipe.cmd("RL.CONCURRENCY")
            .arg(k)
            .arg(5_000)
            .arg("60s")
            .arg("ACQUIRE")
            .arg(format!("w{i}"))
            .arg("NOW")
            .arg(T0 + i);
    }
    let _: Vec<Reply> = pipe.query(&mut c).expect("acquires");
    let card = |c: &mut Connection| -> i64 { redis::cmd("ZCARD").arg(k).query(c).unwrap() };
    assert_eq!(card(&mut c), 2_500);
    let later = T0 + 61 * S;
    let acquire = format!("RL.CONCURRENCY {k} 5000 60s ACQUIRE new NOW {later}");
    // Every old lease has expired: the new one is the only one held.
    assert_eq!(rl(&mut c, &acquire), (1, 4_999, 0, 60_000));
    assert_eq!(card(&mut c), 1_501);
    assert_eq!(rl(&mut c, &acquire), (1, 4_999, 0, 60_000));
    assert_eq!(card(&mut c), 501);
    assert_eq!(rl(&mut c, &acquire), (1, 4_999, 0, 60_000));
    assert_eq!(card(&mut c), 1);
}

/// Every bad call gets a clear error and changes nothing (the dataset's DUMP and
/// expiry instants are the same before and after).
#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    rl(
        &mut c,
        &format!("RL.CONCURRENCY rl:c 2 10 ACQUIRE a NOW {T0}"),
    );
    let _: () = redis::cmd("SET")
        .arg("rl:str")
        .arg("x")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("EXPIRE")
        .arg("rl:str")
        .arg(100)
        .query(&mut c)
        .unwrap();
    let before = snapshot(&mut c);
    let now = T0 + 1;
    for (line, code, mention) in [
        ("RL.CONCURRENCY rl:c", "ERR", "wrong number of arguments"),
        ("RL.CONCURRENCY rl:c 2", "ERR", "wrong number of arguments"),
        ("RL.CONCURRENCY rl:c 2 10", "ERR", "ACQUIRE <id>"),
        ("RL.CONCURRENCY rl:c 0 10 ACQUIRE b", "ERR", "limit"),
        ("RL.CONCURRENCY rl:c -1 10 ACQUIRE b", "ERR", "limit"),
        ("RL.CONCURRENCY rl:c 1000001 10 ACQUIRE b", "ERR", "limit"),
        ("RL.CONCURRENCY rl:c 2 0 ACQUIRE b", "ERR", "window"),
        ("RL.CONCURRENCY rl:c 2 10m ACQUIRE b", "ERR", "window"),
        (
            "RL.CONCURRENCY rl:c 2 10 ACQUIRE",
            "ERR",
            "ACQUIRE needs a value",
        ),
        (
            "RL.CONCURRENCY rl:c 2 10 HEARTBEAT",
            "ERR",
            "HEARTBEAT needs a value",
        ),
        (
            "RL.CONCURRENCY rl:c 2 10 ACQUIRE b RELEASE b",
            "ERR",
            "exclude",
        ),
        ("RL.CONCURRENCY rl:c 2 10 ACQUIRE b PEEK", "ERR", "exclude"),
        (
            "RL.CONCURRENCY rl:c 2 10 ACQUIRE b COST 2",
            "ERR",
            "a lease is one slot",
        ),
        (
            "RL.CONCURRENCY rl:c 2 10 ACQUIRE b NOW 1764480000",
            "ERR",
            "seconds",
        ),
        (
            "RL.CONCURRENCY rl:c 2 10 ACQUIRE b NOW 1 NOW 2",
            "ERR",
            "NOW",
        ),
        (
            "RL.CONCURRENCY rl:str 2 10 ACQUIRE b",
            "WRONGTYPE",
            "wrong kind",
        ),
        (
            "RL.CONCURRENCY rl:str 2 10 RELEASE b",
            "WRONGTYPE",
            "wrong kind",
        ),
        (
            "RL.CONCURRENCY rl:str 2 10 RESET",
            "WRONGTYPE",
            "wrong kind",
        ),
        ("RL.ALL 1 CONCURRENCY rl:c 2 10", "ERR", "LEASE"),
        (
            "RL.ALL 1 CONCURRENCY rl:c 2 10 COST 2 LEASE b",
            "ERR",
            "COST",
        ),
        ("RL.ALL 1 FIXED rl:f 2 10 LEASE b", "ERR", "LEASE"),
        (
            "RL.ALL 2 FIXED rl:f 2 10 CONCURRENCY rl:str 2 10 LEASE b",
            "WRONGTYPE",
            "wrong kind",
        ),
    ] {
        let line = line.replace("NOW 1 NOW 2", &format!("NOW {now} NOW {now}"));
        let err = err_line(&mut c, &line);
        assert!(err.starts_with(code), "{line}: {err}");
        assert!(err.contains(mention), "{line}: {err}");
        assert_eq!(snapshot(&mut c), before, "{line} changed the data");
    }
    // A lease whose expiry would not fit in a score exactly.
    let err = err_line(
        &mut c,
        "RL.CONCURRENCY rl:c 2 315360000 ACQUIRE b NOW 9007199254740991",
    );
    assert!(err.contains("2255"), "{err}");
    assert_eq!(snapshot(&mut c), before);
    assert!(s.panics().is_empty());
}

/// "At most 2 in flight and 3 a minute" as one RL.ALL call: a denied rate limit takes
/// no lease, a full concurrency limit spends no rate budget; REFUND releases.
#[test]
fn rl_all_with_a_concurrency_limit_is_all_or_nothing_both_ways() {
    let s = Server::start();
    let mut c = s.conn();
    let all = |c: &mut Connection, lease: &str, at: u64, mode: &str| -> Value {
        query_line(
            c,
            &format!(
                "RL.ALL 2 CONCURRENCY {{u}}:conc 2 30s FIXED {{u}}:fix 3 60 LEASE {lease} NOW {} {mode}",
                T0 + at
            ),
        )
        .expect("RL.ALL")
    };
    let allowed = |v: &Value| -> i64 {
        match v {
            Value::Array(items) => redis::from_redis_value(&items[0]).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let leases = |c: &mut Connection| scores(c, "{u}:conc").len();
    let spent = |c: &mut Connection| -> Option<i64> {
        redis::cmd("GET")
            .arg(format!("{{u}}:fix:{}", T0 / S))
            .query(c)
            .unwrap()
    };
    assert_eq!(allowed(&all(&mut c, "r1", 0, "")), 1);
    assert_eq!(allowed(&all(&mut c, "r2", 1, "")), 1);
    assert_eq!((leases(&mut c), spent(&mut c)), (2, Some(2)));
    // Concurrency full: the rate limit (one unit left) is not spent.
    let denied = all(&mut c, "r3", 2, "");
    assert_eq!(allowed(&denied), 0);
    assert_eq!((leases(&mut c), spent(&mut c)), (2, Some(2)));
    let Value::Array(parts) = &denied else {
        panic!()
    };
    let each: Vec<Reply> = redis::from_redis_value(&parts[4]).unwrap();
    assert_eq!(each[0], (0, 0, 30_000, 30_000));
    assert_eq!(each[1], (1, 0, 0, 60_000));
    // REFUND releases r1's lease (and gives back its unit).
    assert_eq!(allowed(&all(&mut c, "r1", 3, "REFUND")), 1);
    assert_eq!((leases(&mut c), spent(&mut c)), (1, Some(1)));
    assert_eq!(allowed(&all(&mut c, "r3", 4, "")), 1);
    // Rate budget gone, a slot free: the denied call takes no lease.
    rl(
        &mut c,
        &format!("RL.CONCURRENCY {{u}}:conc 2 30s RELEASE r3 NOW {}", T0 + 5),
    );
    rl(&mut c, &format!("RL.FIXED {{u}}:fix 3 60 NOW {}", T0 + 5));
    assert_eq!((leases(&mut c), spent(&mut c)), (1, Some(3)));
    let denied = all(&mut c, "r5", 6, "");
    assert_eq!(allowed(&denied), 0);
    assert_eq!((leases(&mut c), spent(&mut c)), (1, Some(3)));
    let Value::Array(parts) = &denied else {
        panic!()
    };
    let each: Vec<Reply> = redis::from_redis_value(&parts[4]).unwrap();
    assert_eq!((each[0].0, each[0].1, each[1].0), (1, 0, 0));
    assert_eq!(scores(&mut c, "{u}:conc")[0].0, "r2");
    // PEEK and RESET need no lease; RESET clears both limits.
    assert_eq!(allowed(&all(&mut c, "r9", 7, "PEEK")), 0);
    let reset = query_line(
        &mut c,
        &format!(
            "RL.ALL 2 CONCURRENCY {{u}}:conc 2 30s FIXED {{u}}:fix 3 60 NOW {} RESET",
            T0 + 8
        ),
    )
    .expect("RESET");
    assert_eq!(allowed(&reset), 1);
    assert_eq!((leases(&mut c), spent(&mut c)), (0, None));
}
