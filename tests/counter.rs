//! RL.COUNTER against a real server: a window that starts at the first hit and ends
//! when its key expires. Decisions with NOW stepped across the key's expiry instant;
//! the stored layout (`GET <key>`, PEXPIRETIME = first hit + window, an integer
//! encoding); replicas and an AOF reload holding the same values and instants; RL.ALL
//! and BLOCK with it; and the layout's own Lua (`INCRBY`, `PEXPIRE` when new, as
//! rate-limit-redis runs it) on twin keys, counting and expiring alike.
mod common;
use common::workload::server_time_ms;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const W_MS: i64 = 10_000;

/// The layout as the Node and Python libraries write it: INCRBY, and PEXPIRE when
/// that created the key. Returns the count and PTTL.
const LAYOUT_LUA: &str = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) \
    if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end \
    return { n, redis.call('PTTL', KEYS[1]) }";

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pexpiretime(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap()
}

fn encoding(c: &mut Connection, key: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap()
}

fn server_us(c: &mut Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1_000_000 + us
}

/// Runs `line` and returns its reply with the server's clock (ms) read just before
/// and just after: an expiry the call set lies between the two plus its TTL.
fn timed(c: &mut Connection, line: &str) -> (Reply, i64, i64) {
    let before = server_time_ms(c);
    let reply = rl(c, line);
    (reply, before, server_time_ms(c))
}

fn assert_expires(c: &mut Connection, key: &str, (before, after): (i64, i64)) -> i64 {
    let at = pexpiretime(c, key);
    assert!(
        (before + W_MS..=after + W_MS).contains(&at),
        "{key} expires at {at}, not first hit + window ({before}..={after} + {W_MS})"
    );
    at
}

#[test]
fn decisions_follow_the_keys_expiry_instant() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let k = "rl:ctr";
    let at = |now: u64, rest: &str| format!("RL.COUNTER {k} 3 10 NOW {now}{rest}");

    // The first hit opens the window: INCRBY, then PEXPIREAT first hit + window.
    assert_eq!(rl(&mut c, &at(t, " PEEK")), (1, 2, 0, 0));
    assert_eq!(get(&mut c, k), None, "a PEEK wrote");
    let (reply, before, after) = timed(&mut c, &at(t, ""));
    assert_eq!(reply, (1, 2, 0, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("1"));
    assert_eq!(encoding(&mut c, k), "int");
    let end_ms = assert_expires(&mut c, k, (before, after));
    let end = end_ms as u64 * 1000;

    // Inside the window the reset is until the key expires, not a window from now.
    let now = t + 4_000_000;
    let until = |now: u64| ((end - now).div_ceil(1000)) as i64;
    assert_eq!(rl(&mut c, &at(now, "")), (1, 1, 0, until(now)));
    assert_eq!(rl(&mut c, &at(now, "")), (1, 0, 0, until(now)));
    assert_eq!(get(&mut c, k).as_deref(), Some("3"));
    assert_eq!(
        pexpiretime(&mut c, k),
        end_ms,
        "a later hit moved the window"
    );

    // A denial spends nothing and waits until the key expires, rounded up to a ms.
    let before = snapshot(&mut c);
    assert_eq!(rl(&mut c, &at(now, "")), (0, 0, until(now), until(now)));
    assert_eq!(rl(&mut c, &at(end - 1, "")), (0, 0, 1, 1));
    assert_eq!(rl(&mut c, &at(end - 1001, "")), (0, 0, 2, 2));
    assert_eq!(rl(&mut c, &at(end - 1, " COST 4")).2, -1);
    assert_eq!(snapshot(&mut c), before, "a denial wrote");

    // At the expiry instant the window has ended (whether or not the server has
    // removed the key yet): a new one starts, with COST as its count.
    let (reply, before, after) = timed(&mut c, &at(end, " COST 2"));
    assert_eq!(reply, (1, 1, 0, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("2"));
    assert_eq!(encoding(&mut c, k), "int");
    // The new window's expiry is the server's now + window: NOW decides against it.
    let end2 = assert_expires(&mut c, k, (before, after));

    // REFUND keeps the window (its TTL); RESET removes it.
    let r = rl(&mut c, &at(end2 as u64 * 1000 - 1, " REFUND"));
    assert_eq!((r.0, r.1), (1, 1), "{r:?}");
    assert_eq!(get(&mut c, k).as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut c, k), end2);
    assert_eq!(rl(&mut c, &at(end + 2, " RESET")), (1, 2, 0, 0));
    assert_eq!(get(&mut c, k), None);
}

#[test]
fn a_counter_without_a_ttl_gets_the_windows() {
    let s = Server::start();
    let mut c = s.conn();
    // Another writer's plain INCR left counters without a TTL.
    let _: () = redis::cmd("SET").arg("rl:a").arg(1).query(&mut c).unwrap();
    let _: () = redis::cmd("SET")
        .arg("rl:full")
        .arg(3)
        .query(&mut c)
        .unwrap();
    let (reply, before, after) = timed(&mut c, "RL.COUNTER rl:a 3 10");
    assert_eq!(reply, (1, 1, 0, W_MS));
    assert_eq!(get(&mut c, "rl:a").as_deref(), Some("2"));
    assert_expires(&mut c, "rl:a", (before, after));
    // Denied, it still gets one: else it would deny forever.
    let (reply, before, after) = timed(&mut c, "RL.COUNTER rl:full 3 10");
    assert_eq!(reply, (0, 0, W_MS, W_MS));
    assert_eq!(get(&mut c, "rl:full").as_deref(), Some("3"));
    assert_expires(&mut c, "rl:full", (before, after));
}

#[test]
fn a_value_that_is_not_a_counter_is_refused() {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("SET")
        .arg("rl:x")
        .arg("abc")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("LPUSH")
        .arg("rl:l")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert_eq!(
        err_line(&mut c, "RL.COUNTER rl:x 3 10"),
        "ERR limiter key 'rl:x' does not hold a non-negative integer"
    );
    assert!(err_line(&mut c, "RL.COUNTER rl:l 3 10").starts_with("WRONGTYPE"));
    assert_eq!(
        err_line(&mut c, "RL.COUNTER rl:n 0 10"),
        "ERR limit must be a positive integer no larger than 1000000000000000"
    );
    assert_eq!(
        err_line(&mut c, "RL.COUNTER rl:n 3 10 BURST 2"),
        "ERR syntax error: unknown option 'BURST'"
    );
}

/// The layout's own script and RL.COUNTER on twin keys: the same counts, expiry
/// instants within the same call's clock, and the same admissions while the counter is
/// within the limit; and each continues a window the other started.
#[test]
fn the_layouts_lua_counts_and_expires_alike() {
    let s = Server::start();
    let mut c = s.conn();
    let script = redis::Script::new(LAYOUT_LUA);
    let lua = |c: &mut Connection, key: &str, cost: u64| -> (i64, i64) {
        script.key(key).arg(cost).arg(W_MS).invoke(c).unwrap()
    };
    let limit = 7;
    let mut windows = Vec::new();
    for (i, cost) in [1, 2, 1, 3, 1, 1].into_iter().enumerate() {
        let before = server_time_ms(&mut c);
        let (n, pttl) = lua(&mut c, "rl:lua", cost);
        let m = rl(&mut c, &format!("RL.COUNTER rl:mod {limit} 10 COST {cost}"));
        let after = server_time_ms(&mut c);
        let lua_allowed = n <= limit;
        assert_eq!(m.0 == 1, lua_allowed, "call {i}: module {m:?}, script {n}");
        if lua_allowed {
            assert_eq!(get(&mut c, "rl:mod"), get(&mut c, "rl:lua"), "call {i}");
            assert_eq!(m.1, limit - n, "call {i}");
        }
        assert!(pttl <= W_MS && m.3 <= W_MS, "call {i}: {pttl} {m:?}");
        if i == 3 {
            // Both stored integers (before a denial: the module reads one through the
            // key API, which leaves it a raw string until its next write).
            assert_eq!(encoding(&mut c, "rl:mod"), "int");
            assert_eq!(encoding(&mut c, "rl:lua"), "int");
        }
        if i == 0 {
            windows.push(assert_expires(&mut c, "rl:lua", (before, after)));
            windows.push(assert_expires(&mut c, "rl:mod", (before, after)));
        }
    }
    // Neither moved its window after the first hit.
    assert_eq!(pexpiretime(&mut c, "rl:lua"), windows[0]);
    assert_eq!(pexpiretime(&mut c, "rl:mod"), windows[1]);

    // The module continues the script's window, and the script the module's.
    let (n, _) = lua(&mut c, "rl:shared", 2);
    let at = pexpiretime(&mut c, "rl:shared");
    assert_eq!(rl(&mut c, "RL.COUNTER rl:shared 3 10").1, 0);
    assert_eq!((lua(&mut c, "rl:shared", 1).0, n), (4, 2));
    assert_eq!(rl(&mut c, "RL.COUNTER rl:shared 3 10").0, 0);
    assert_eq!(pexpiretime(&mut c, "rl:shared"), at);
}

#[test]
fn rl_all_and_block_take_it() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let all = |now: u64| format!("RL.ALL 2 COUNTER {{u}}:c 2 10 FIXED {{u}}:f 5 10 NOW {now}");
    let ints = |c: &mut Connection, line: &str| -> (i64, i64, i64, i64, Vec<Vec<i64>>) {
        query_line(c, line)
            .and_then(|v| redis::from_redis_value(&v))
            .unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    let r = ints(&mut c, &all(t));
    assert_eq!((r.0, r.1), (1, 1));
    assert_eq!(r.4[0], vec![1, 1, 0, W_MS]);
    let end = pexpiretime(&mut c, "{u}:c") as u64 * 1000;
    assert_eq!(ints(&mut c, &all(t + 1)).0, 1);
    // The COUNTER limit denies: nothing is spent on either limit.
    let fixed_before = snapshot(&mut c);
    let r = ints(&mut c, &all(t + 2));
    assert_eq!(r.0, 0);
    assert_eq!(r.4[0][0], 0);
    assert_eq!(r.2, ((end - t - 2).div_ceil(1000)) as i64);
    assert_eq!(snapshot(&mut c), fixed_before, "a denied RL.ALL wrote");
    // A new COUNTER window at its key's expiry instant, inside RL.ALL too.
    let r = ints(&mut c, &all(end));
    assert_eq!(r.4[0], vec![1, 1, 0, W_MS]);
    assert_eq!(get(&mut c, "{u}:c").as_deref(), Some("1"));

    // BLOCK: the denial starts a block, which clears the counter.
    let b = |now: u64, rest: &str| format!("RL.COUNTER {{b}}:c 1 10 BLOCK 60 NOW {now}{rest}");
    assert_eq!(rl(&mut c, &b(t, "")).0, 1);
    assert_eq!(rl(&mut c, &b(t + 1, "")), (0, 0, 60_000, 60_000));
    assert_eq!(
        get(&mut c, "{b}:c"),
        None,
        "the block did not clear the counter"
    );
    assert!(get(&mut c, "{b}:c:block").is_some());
    assert_eq!(rl(&mut c, &b(t + 30_000_000, "")).0, 0);
    // The block over, the budget is back: a new window from that hit.
    assert_eq!(rl(&mut c, &b(t + 60_000_001, "")), (1, 0, 0, W_MS));
    assert_eq!(get(&mut c, "{b}:c").as_deref(), Some("1"));
}

/// Every kind of write RL.COUNTER makes (create, count, a new window over an ended
/// one, a TTL for a counter without one, refund, reset, a block), with the effects on
/// a replica without the module and in an AOF reload: the same values and instants.
#[test]
fn replicas_and_the_aof_get_the_effects() {
    let (primary, replica) = primary_with_aof_and_replica();
    let mut p = primary.conn();
    let t = server_us(&mut p);
    let _: () = redis::cmd("SET")
        .arg("rl:{r}:bare")
        .arg(1)
        .query(&mut p)
        .unwrap();
    let line =
        |key: &str, now: u64, rest: &str| format!("RL.COUNTER rl:{{r}}:{key} 2 10 NOW {now}{rest}");
    for l in [
        line("a", t, ""),
        line("a", t + 1, ""),
        line("a", t + 2, ""),
        line("b", t, " COST 2"),
        line("c", t, ""),
        line("c", t + 1, " REFUND"),
        line("d", t, ""),
        line("d", t + 1, " RESET"),
        line("bare", t, ""),
        line("e", t, " BLOCK 30"),
        line("e", t + 1, " BLOCK 30"),
        line("e", t + 2, " BLOCK 30"),
    ] {
        rl(&mut p, &l);
    }
    // A new window over an ended one: NOW at b's expiry instant.
    let end = pexpiretime(&mut p, "rl:{r}:b") as u64 * 1000;
    assert_eq!(rl(&mut p, &line("b", end, "")).0, 1);
    assert_eq!(get(&mut p, "rl:{r}:b").as_deref(), Some("1"));
    let expected = same_on_the_replica_and_after_loadaof(&mut p, &replica);
    let keys: Vec<String> = expected
        .iter()
        .map(|(k, _, _)| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert_eq!(
        keys,
        [
            "rl:{r}:a",
            "rl:{r}:b",
            "rl:{r}:bare",
            "rl:{r}:c",
            "rl:{r}:e:block"
        ],
        "{expected:?}"
    );
}

/// A seeded workload on the server clock (no NOW), with windows short enough that keys
/// expire while it runs, costs above the limit, PEEK, REFUND, RESET and counters a
/// foreign INCR left without a TTL; then a replica without the module holds the same
/// values and expiry instants as the primary.
#[test]
fn a_replica_without_the_module_converges() {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start_without_module(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &replica);
    let mut p = primary.conn();
    let mut rng = StdRng::seed_from_u64(0xc0_0e7e);
    let windows = ["5ms", "40ms", "300ms", "30", "90s"];
    let (mut allowed, mut denied) = (0, 0);
    for _ in 0..6_000 {
        let n = rng.gen_range(0..20);
        let key = format!("rl:ctr:{n}");
        if rng.gen_bool(0.01) {
            let _: i64 = redis::cmd("INCR").arg(&key).query(&mut p).unwrap();
            let _: i64 = redis::cmd("PERSIST").arg(&key).query(&mut p).unwrap();
        }
        let limit = n % 5 + 1;
        let mut line = format!("RL.COUNTER {key} {limit} {}", windows[n % windows.len()]);
        match rng.gen_range(0..100) {
            0..=69 => {}
            70..=89 => line.push_str(&format!(" COST {}", rng.gen_range(2..=3))),
            _ => line.push_str(&format!(" COST {}", limit + 1)),
        }
        match rng.gen_range(0..100) {
            0..=4 => line.push_str(" PEEK"),
            5..=9 => line.push_str(" REFUND"),
            10..=11 => line.push_str(" RESET"),
            _ => {}
        }
        match query_line(&mut p, &line) {
            Ok(v) => {
                let r: Reply = redis::from_redis_value(&v).unwrap();
                if r.0 == 1 {
                    allowed += 1;
                } else {
                    denied += 1;
                }
            }
            // A foreign INCR past what a window counter holds.
            Err(e) => panic!("{line}: {e}"),
        }
    }
    assert!(allowed > 500 && denied > 500, "{allowed} {denied}");
    let _: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut p).unwrap();
    let mut r = replica.conn();
    // Keys about to expire may go on one side first: compare those that outlive a
    // margin, and require that most keys are compared.
    let cutoff = server_time_ms(&mut p) + 2_000;
    let stable = |snap: Vec<(Vec<u8>, Option<Vec<u8>>, i64)>| -> Vec<_> {
        snap.into_iter().filter(|(_, _, at)| *at > cutoff).collect()
    };
    let (a, b) = (stable(snapshot(&mut p)), stable(snapshot(&mut r)));
    assert!(a.len() >= 5, "{a:?}");
    assert_eq!(a, b, "the replica differs");
}

/// COUNTALL: denied calls count too, as the libraries' stores INCR on every call; the
/// window stays where the first hit put it. PEEK and REFUND keep their meaning.
#[test]
fn countall_counts_denied_calls_in_the_same_window() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let k = "rl:all";
    let at = |now: u64, rest: &str| format!("RL.COUNTER {k} 3 10 COUNTALL NOW {now}{rest}");
    let (reply, before, after) = timed(&mut c, &at(t, ""));
    assert_eq!(reply, (1, 2, 0, W_MS));
    let end_ms = assert_expires(&mut c, k, (before, after));
    let end = end_ms as u64 * 1000;
    let now = t + 4_000_000;
    let until = ((end - now).div_ceil(1000)) as i64;
    assert_eq!(rl(&mut c, &at(now, "")), (1, 1, 0, until));
    assert_eq!(rl(&mut c, &at(now, "")), (1, 0, 0, until));
    // Denied, counted past the limit, remaining held at 0; the window does not move.
    assert_eq!(rl(&mut c, &at(now, "")), (0, 0, until, until));
    assert_eq!(get(&mut c, k).as_deref(), Some("4"));
    assert_eq!(rl(&mut c, &at(now, " COST 2")), (0, 0, until, until));
    assert_eq!(get(&mut c, k).as_deref(), Some("6"));
    // A cost above the limit never passes, and is counted.
    assert_eq!(rl(&mut c, &at(now, " COST 4")), (0, 0, -1, until));
    assert_eq!(get(&mut c, k).as_deref(), Some("10"));
    assert_eq!(pexpiretime(&mut c, k), end_ms, "a denial moved the window");
    // PEEK writes nothing; REFUND gives back, keeping the TTL.
    let before = snapshot(&mut c);
    assert_eq!(rl(&mut c, &at(now, " PEEK")), (0, 0, until, until));
    assert_eq!(snapshot(&mut c), before, "a PEEK wrote");
    let r = rl(&mut c, &at(now, " REFUND COST 2"));
    assert_eq!((r.0, r.1), (0, 0));
    assert_eq!(get(&mut c, k).as_deref(), Some("8"));
    assert_eq!(pexpiretime(&mut c, k), end_ms);
    // At the key's expiry instant a new window starts, counting from this call.
    let (reply, before, after) = timed(&mut c, &at(end, ""));
    assert_eq!(reply, (1, 2, 0, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("1"));
    assert_expires(&mut c, k, (before, after));

    // A denied call that creates the key gives it the window's TTL.
    let (reply, before, after) = timed(&mut c, "RL.COUNTER rl:big 3 10 COST 4 COUNTALL");
    assert_eq!(reply, (0, 0, -1, W_MS));
    assert_eq!(get(&mut c, "rl:big").as_deref(), Some("4"));
    assert_eq!(encoding(&mut c, "rl:big"), "int");
    assert_expires(&mut c, "rl:big", (before, after));
    // Without COUNTALL the same call spends nothing.
    assert_eq!(rl(&mut c, "RL.COUNTER rl:none 3 10 COST 4"), (0, 3, -1, 0));
    assert_eq!(get(&mut c, "rl:none"), None);
}

/// RENEW: every call that writes the counter sets its TTL to the window again; a denied
/// call writes (and so renews) only with COUNTALL.
#[test]
fn renew_restarts_the_window_on_every_counted_call() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let k = "rl:renew";
    let at = |now: u64, rest: &str| format!("RL.COUNTER {k} 2 10 RENEW NOW {now}{rest}");
    let early = |c: &mut Connection| -> i64 {
        // An end well before now + window, so that a renewal shows.
        let end = server_time_ms(c) + 3_000;
        let _: () = redis::cmd("PEXPIREAT").arg(k).arg(end).query(c).unwrap();
        end
    };
    let (reply, before, after) = timed(&mut c, &at(t, ""));
    assert_eq!(reply, (1, 1, 0, W_MS));
    assert_expires(&mut c, k, (before, after));
    early(&mut c);
    let (reply, before, after) = timed(&mut c, &at(t + 1_000, ""));
    assert_eq!(reply, (1, 0, 0, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("2"));
    assert_expires(&mut c, k, (before, after));
    // Denied without COUNTALL: nothing written, nothing renewed.
    let end = early(&mut c);
    let r = rl(&mut c, &at(t + 2_000, ""));
    assert_eq!((r.0, r.1), (0, 0));
    assert!(r.2 <= 3_000, "{r:?}");
    assert_eq!(pexpiretime(&mut c, k), end);
    assert_eq!(get(&mut c, k).as_deref(), Some("2"));
    // PEEK and REFUND renew nothing either.
    rl(&mut c, &at(t + 2_000, " COUNTALL PEEK"));
    rl(&mut c, &at(t + 2_000, " REFUND"));
    assert_eq!(get(&mut c, k).as_deref(), Some("1"));
    assert_eq!(pexpiretime(&mut c, k), end);
    let (reply, before, after) = timed(&mut c, &at(t + 2_000, ""));
    assert_eq!(reply, (1, 0, 0, W_MS));
    assert_expires(&mut c, k, (before, after));
    // Denied with COUNTALL: counted and renewed, the wait a full window.
    early(&mut c);
    let (reply, before, after) = timed(&mut c, &at(t + 3_000, " COUNTALL"));
    assert_eq!(reply, (0, 0, W_MS, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("3"));
    assert_expires(&mut c, k, (before, after));
}

/// COUNTALL's and RENEW's writes on a denied call reach a replica without the module
/// and an AOF reload as the same values and expiry instants.
#[test]
fn countall_and_renew_replicate() {
    let (primary, replica) = primary_with_aof_and_replica();
    let mut p = primary.conn();
    let t = server_us(&mut p);
    let _: () = redis::cmd("SET")
        .arg("rl:{r}:bare")
        .arg(2)
        .query(&mut p)
        .unwrap();
    let line =
        |key: &str, now: u64, rest: &str| format!("RL.COUNTER rl:{{r}}:{key} 2 10 NOW {now}{rest}");
    for (l, allowed) in [
        (line("a", t, " COUNTALL"), 1),
        (line("a", t + 1, " COUNTALL"), 1),
        (line("a", t + 2, " COUNTALL"), 0),
        (line("a", t + 3, " COUNTALL RENEW COST 2"), 0),
        (line("b", t, " COUNTALL COST 3"), 0),
        (line("bare", t, " COUNTALL"), 0),
        (line("c", t, " RENEW"), 1),
        (line("c", t + 1, " RENEW"), 1),
    ] {
        assert_eq!(rl(&mut p, &l).0, allowed, "{l}");
    }
    same_on_the_replica_and_after_loadaof(&mut p, &replica);
    let values: Vec<Option<String>> = ["a", "b", "bare", "c"]
        .iter()
        .map(|k| get(&mut p, &format!("rl:{{r}}:{k}")))
        .collect();
    let values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
    assert_eq!(values, [Some("5"), Some("3"), Some("3"), Some("2")]);
}

/// The PEXPIRETIME a call that set a TTL of `ttl` ms left, checked against the server's
/// clock around the call.
fn assert_ttl(c: &mut Connection, key: &str, (before, after): (i64, i64), ttl: i64) {
    let at = pexpiretime(c, key);
    assert!(
        (before + ttl..=after + ttl).contains(&at),
        "{key} expires at {at}, not now + {ttl} ({before}..={after})"
    );
}

/// @fastify/rate-limit's bound on the backoff: 2^53 - 1 ms.
const MAX_ESCALATED: i64 = (1 << 53) - 1;

/// ESCALATE: every call counts (as COUNTALL), and the k-th denial sets the key's TTL to
/// window × 2^(k−1) from now, which the reply reports; PEEK reports it and writes
/// nothing; once the key expires a new window starts.
#[test]
fn escalate_doubles_the_ttl_on_each_denial() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let k = "rl:esc";
    let at = |now: u64, rest: &str| format!("RL.COUNTER {k} 2 10 ESCALATE NOW {now}{rest}");
    let (reply, before, after) = timed(&mut c, &at(t, ""));
    assert_eq!(reply, (1, 1, 0, W_MS));
    let end_ms = assert_expires(&mut c, k, (before, after));
    let now = t + 4_000;
    let until = ((end_ms as u64 * 1000 - now).div_ceil(1000)) as i64;
    assert_eq!(rl(&mut c, &at(now, "")), (1, 0, 0, until));
    assert_eq!(
        pexpiretime(&mut c, k),
        end_ms,
        "an admitted call moved the TTL"
    );
    for (k_th, count) in [(1, "3"), (2, "4"), (3, "5"), (4, "6")] {
        let ttl = W_MS << (k_th - 1);
        let (reply, before, after) = timed(&mut c, &at(now, ""));
        assert_eq!(reply, (0, 0, ttl, ttl), "denial {k_th}");
        assert_eq!(get(&mut c, k).as_deref(), Some(count));
        assert_ttl(&mut c, k, (before, after), ttl);
    }
    let before = snapshot(&mut c);
    // A PEEK tells what this call would be told (the next doubling), and the reset
    // the stored TTL.
    let r = rl(&mut c, &at(now, " PEEK"));
    assert_eq!((r.0, r.1, r.2), (0, 0, 16 * W_MS));
    assert!((8 * W_MS - 1_000..=8 * W_MS).contains(&r.3), "{r:?}");
    assert_eq!(snapshot(&mut c), before, "a PEEK wrote");
    // At the key's expiry instant: a new window, counting from this call.
    let end = pexpiretime(&mut c, k) as u64 * 1000;
    let (reply, before, after) = timed(&mut c, &at(end, ""));
    assert_eq!(reply, (1, 1, 0, W_MS));
    assert_eq!(get(&mut c, k).as_deref(), Some("1"));
    assert_expires(&mut c, k, (before, after));
    // One admitted and 40 denials later, the 41st denial's TTL stops at 2^53 - 1 ms
    // (10 s × 2^40 is past it).
    // On the server's clock: the new window's TTL is from the server's now.
    let plain = format!("RL.COUNTER {k} 2 10 ESCALATE");
    for _ in 0..41 {
        rl(&mut c, &plain);
    }
    let (reply, before, after) = timed(&mut c, &plain);
    assert_eq!(reply, (0, 0, MAX_ESCALATED, MAX_ESCALATED));
    assert_ttl(&mut c, k, (before, after), MAX_ESCALATED);
}

/// RL.COUNTER's window may last 292,000 years (its TTL); @fastify/rate-limit's test
/// asks for 285,421 years with ESCALATE, whose first denial is bounded at 2^53 - 1 ms.
#[test]
fn a_counter_window_may_last_285421_years() {
    let s = Server::start();
    let mut c = s.conn();
    let years: i64 = 9_007_201_749_600_000;
    let line = format!("RL.COUNTER rl:years 2 {years}ms ESCALATE");
    let (reply, before, after) = timed(&mut c, &line);
    assert_eq!(reply, (1, 1, 0, years));
    assert_ttl(&mut c, "rl:years", (before, after), years);
    let r = rl(&mut c, &line);
    assert_eq!((r.0, r.1), (1, 0));
    assert!((years - 1_000..=years).contains(&r.3), "{r:?}");
    let (reply, before, after) = timed(&mut c, &line);
    assert_eq!(reply, (0, 0, MAX_ESCALATED, MAX_ESCALATED));
    assert_ttl(&mut c, "rl:years", (before, after), MAX_ESCALATED);
    // The longest window: i64::MAX µs.
    let longest: i64 = i64::MAX / 1000;
    let (reply, before, after) = timed(&mut c, &format!("RL.COUNTER rl:longest 1 {longest}ms"));
    assert_eq!(reply, (1, 0, 0, longest));
    assert_ttl(&mut c, "rl:longest", (before, after), longest);
    let r = rl(&mut c, &format!("RL.COUNTER rl:longest 1 {longest}ms"));
    assert_eq!((r.0, r.1), (0, 0));
    assert!((longest - 1_000..=longest).contains(&r.2), "{r:?}");
    // In RL.ALL too, beside a limit that keeps its ten years.
    let all = format!("RL.ALL 2 COUNTER rl:{{a}}c 5 {years}ms FIXED rl:{{a}}f 5 315360000s");
    let v = query_line(&mut c, &all).unwrap();
    let Value::Array(r) = v else { panic!("{v:?}") };
    assert_eq!(
        r[..4],
        [
            Value::Int(1),
            Value::Int(4),
            Value::Int(0),
            Value::Int(years)
        ]
    );
}

/// ESCALATE anywhere but on RL.COUNTER's own command, with RENEW, and windows past each
/// command's bound: refused with the bound that command has, nothing written.
#[test]
fn escalate_elsewhere_and_windows_past_the_bound_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    for line in [
        "RL.COUNTER rl:c 2 10 ESCALATE",
        "RL.COUNTER rl:c 2 10 ESCALATE",
        "RL.COUNTER rl:c 2 10 ESCALATE",
        "RL.FIXED rl:f 2 10",
    ] {
        rl(&mut c, line);
    }
    let before = snapshot(&mut c);
    let long = "at most 9223372036854775ms";
    let ten = "at most 315360000000ms";
    for (line, error) in [
        (
            "RL.FIXED rl:f 2 10 ESCALATE",
            "ESCALATE is only accepted by RL.COUNTER",
        ),
        (
            "RL.GCRA rl:g 2 10 escalate",
            "ESCALATE is only accepted by RL.COUNTER",
        ),
        (
            "RL.ALL 1 COUNTER rl:c 2 10 ESCALATE",
            "ESCALATE is not accepted in RL.ALL",
        ),
        (
            "RL.ALL 1 COUNTER rl:c 2 10 PEEK ESCALATE",
            "ESCALATE is not accepted in RL.ALL",
        ),
        (
            "RL.COUNTER rl:c 2 10 ESCALATE RENEW",
            "RENEW and ESCALATE exclude each other",
        ),
        (
            "RL.COUNTER rl:c 2 10 ESCALATE ESCALATE",
            "ESCALATE given more than once",
        ),
        ("RL.COUNTER rl:c 2 9223372036854776ms ESCALATE", long),
        ("RL.COUNTER rl:c 2 9223372036854776", long),
        ("RL.COUNTER rl:c 2 10x", long),
        ("RL.FIXED rl:f 2 315360001", ten),
        ("RL.SLIDELOG rl:l 2 9007201749600000ms", ten),
        ("RL.GCRA rl:g 2 9007201749600000ms", ten),
        ("RL.ALL 2 COUNTER rl:c 2 10 FIXED rl:f 2 315360001", ten),
        ("RL.ALL 1 COUNTER rl:c 2 9223372036854776ms", long),
        (
            "RL.COUNTER rl:c 2 10 BLOCK 315360001",
            "BLOCK must be a positive duration",
        ),
    ] {
        let e = err_line(&mut c, line);
        assert!(e.contains(error), "{line}: {e}");
    }
    assert_eq!(snapshot(&mut c), before, "a refused call wrote");
}

/// ESCALATE's TTLs and a 285,421-year window reach a replica without the module and an
/// AOF reload as the same values and expiry instants (PEXPIREAT effects).
#[test]
fn escalate_and_long_windows_replicate() {
    let (primary, replica) = primary_with_aof_and_replica();
    let mut p = primary.conn();
    let t = server_us(&mut p);
    let _: () = redis::cmd("SET")
        .arg("rl:{r}:bare")
        .arg(2)
        .query(&mut p)
        .unwrap();
    let line = |key: &str, now: u64, rest: &str| {
        format!("RL.COUNTER rl:{{r}}:{key} 2 10 ESCALATE NOW {now}{rest}")
    };
    for (l, allowed) in [
        (line("a", t, ""), 1),
        (line("a", t + 1, ""), 1),
        (line("a", t + 2, ""), 0),
        (line("a", t + 3, ""), 0),
        (line("a", t + 4, " COST 2"), 0),
        (line("b", t, " COST 3"), 0),
        (line("bare", t, ""), 0),
        (
            format!("RL.COUNTER rl:{{r}}:y 1 9007201749600000ms ESCALATE NOW {t}"),
            1,
        ),
        (
            format!("RL.COUNTER rl:{{r}}:y 1 9007201749600000ms ESCALATE NOW {t}"),
            0,
        ),
    ] {
        assert_eq!(rl(&mut p, &l).0, allowed, "{l}");
    }
    let snap = same_on_the_replica_and_after_loadaof(&mut p, &replica);
    let now = server_time_ms(&mut p);
    let ttl: Vec<(String, i64)> = snap
        .iter()
        .map(|(k, _, at)| (String::from_utf8_lossy(k).into_owned(), at - now))
        .collect();
    // a: third denial (count 2 + 1 + 1 + 2 = 6, 2^3 windows); y: bounded at 2^53 - 1.
    assert!((70_000..=80_000).contains(&ttl[0].1), "{ttl:?}");
    assert!(
        (MAX_ESCALATED - 2_000..=MAX_ESCALATED).contains(&ttl[3].1),
        "{ttl:?}"
    );
    let values: Vec<Option<String>> = ["a", "b", "bare", "y"]
        .iter()
        .map(|k| get(&mut p, &format!("rl:{{r}}:{k}")))
        .collect();
    let values: Vec<Option<&str>> = values.iter().map(Option::as_deref).collect();
    assert_eq!(values, [Some("6"), Some("3"), Some("3"), Some("2")]);
}
