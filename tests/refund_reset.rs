//! REFUND and RESET: what they give back, what they clear, and how they replicate and
//! notify.
//!
//! - A REFUND right after an admitted call with the same COST puts FIXED, SLIDECOUNT
//!   and GCRA back exactly where they were: a key that had spend + refund and a key
//!   that had neither answer every later request alike (GCRA: the very same TAT).
//! - SLIDELOG's REFUND removes exactly the COST newest entries in the window.
//! - Neither goes below an empty limiter; on nothing they write nothing.
//! - RESET deletes every key of the limiter and then answers as an empty limiter.
//! - Both replicate as core commands (a replica without the module ends identical)
//!   and fire `decrby`, `zrem` and `del` keyspace events.
mod common;
use common::workload::{assert_same_data, info, server_time_ms};
use common::*;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

/// The scores of a log, oldest first.
fn scores(c: &mut Connection, key: &str) -> Vec<u64> {
    let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .unwrap();
    members
        .into_iter()
        .map(|(m, s)| {
            assert!(m.starts_with(&format!("{}:", s as u64)), "{m} {s}");
            s as u64
        })
        .collect()
}

/// A GCRA key's TAT as the limiter reads it: one that NOW has reached (still stored
/// until the server clock expires it) counts as none.
fn tat(c: &mut Connection, key: &str, now: u64) -> Option<u64> {
    get(c, key)
        .map(|t| t.parse::<u64>().unwrap())
        .filter(|&t| t > now)
}

// ---------------------------------------------------------------------------------
// Spend + refund = nothing happened

/// (command, `<limit> <window> [BURST b]`, largest cost to draw).
const CONFIGS: [(&str, &str, u64); 7] = [
    ("RL.FIXED", "5 10", 3),
    ("RL.FIXED", "4 1500ms", 2),
    ("RL.SLIDECOUNT", "8 2", 3),
    ("RL.SLIDECOUNT", "3 1500ms", 2),
    // A fractional emission interval (333 333.3 µs) and a burst.
    ("RL.GCRA", "3 1 BURST 4", 4),
    ("RL.GCRA", "10 1", 3),
    ("RL.GCRA", "7 3s BURST 2", 2),
];

/// The next NOW: at least 5 ms on (so that a TAT the server clock expires has also
/// been passed by NOW), sometimes across windows.
fn step(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..10) {
        0..=6 => rng.gen_range(5_000..300_000),
        7..=8 => rng.gen_range(300_000..2_000_000),
        _ => rng.gen_range(2_000_000..12_000_000),
    }
}

#[test]
fn refund_right_after_an_admitted_call_restores_the_limiter() {
    let server = Server::start();
    let c = &mut server.conn();
    let mut rng = StdRng::seed_from_u64(0x4ef0d);
    for (k, (cmd, args, max_cost)) in CONFIGS.iter().enumerate() {
        let (mut restored, mut compared, mut denied_later) = (0, 0, 0);
        for trial in 0..40 {
            let x = format!("rr:{{{k}}}:{trial}:x");
            let y = format!("rr:{{{k}}}:{trial}:y");
            let mut now =
                T0 + (k as u64 * 1_000 + trial) * 1_000_000_000 + rng.gen_range(0..10_000_000);
            // The same history on both keys.
            for _ in 0..rng.gen_range(0..8) {
                now += step(&mut rng);
                let cost = rng.gen_range(1..=*max_cost);
                let line = |key: &str| format!("{cmd} {key} {args} COST {cost} NOW {now}");
                assert_eq!(rl(c, &line(&x)), rl(c, &line(&y)), "{}", line(&x));
            }
            now += step(&mut rng);
            let cost = rng.gen_range(1..=*max_cost);
            let spend = rl(c, &format!("{cmd} {x} {args} COST {cost} NOW {now}"));
            if spend.0 == 0 {
                continue;
            }
            let refund = rl(c, &format!("{cmd} {x} {args} COST {cost} NOW {now} REFUND"));
            let peek = rl(c, &format!("{cmd} {y} {args} COST {cost} NOW {now} PEEK"));
            let ctx = format!("{cmd} {args} trial {trial}: spent and refunded {cost} at {now}");
            assert_eq!(refund, peek, "{ctx}: the refund's reply");
            if *cmd == "RL.GCRA" {
                // The exact inverse: the same TAT, or none on both.
                assert_eq!(tat(c, &x, now), tat(c, &y, now), "{ctx}: TAT");
            }
            restored += 1;
            for s in 0..30 {
                now += step(&mut rng);
                let cost = rng.gen_range(1..=*max_cost + 1);
                let peek = if rng.gen_bool(0.2) { " PEEK" } else { "" };
                let line = |key: &str| format!("{cmd} {key} {args} COST {cost} NOW {now}{peek}");
                let (rx, ry) = (rl(c, &line(&x)), rl(c, &line(&y)));
                assert_eq!(rx, ry, "{ctx}: continuation step {s}: {}", line(&x));
                compared += 1;
                if rx.0 == 0 {
                    denied_later += 1;
                }
                if *cmd == "RL.GCRA" {
                    assert_eq!(tat(c, &x, now), tat(c, &y, now), "{ctx}: step {s}: TAT");
                }
            }
        }
        println!(
            "{cmd} {args}: {restored} refunds, {compared} replies compared, {denied_later} denials"
        );
        assert!(restored >= 12 && denied_later > 10, "{cmd} {args}");
    }
}

// ---------------------------------------------------------------------------------
// SLIDELOG

#[test]
fn slidelog_refund_removes_exactly_the_newest_entries_in_the_window() {
    let server = Server::start();
    let c = &mut server.conn();
    let key = "rr:log";
    let w = 10_000_000;
    let line = |cost: u64, at: u64, mode: &str| {
        format!("RL.SLIDELOG {key} 10 10 COST {cost} NOW {at} {mode}")
    };
    for (cost, at) in [(2, T0), (1, T0 + 5), (3, T0 + 9), (1, T0 + 2_000_000)] {
        assert_eq!(rl(c, &line(cost, at, "")).0, 1);
    }
    let now = T0 + 3_000_000;
    assert_eq!(
        scores(c, key),
        [T0, T0, T0 + 5, T0 + 9, T0 + 9, T0 + 9, T0 + 2_000_000]
    );
    let r = rl(c, &line(2, now, "REFUND"));
    assert_eq!(r, rl(c, &line(2, now, "PEEK")));
    assert_eq!(r.1, 10 - 5 - 2);
    assert_eq!(scores(c, key), [T0, T0, T0 + 5, T0 + 9, T0 + 9]);
    rl(c, &line(3, now, "REFUND"));
    assert_eq!(scores(c, key), [T0, T0]);

    // Entries that left the window (not trimmed yet: refunds do not trim) are never
    // refunded: at T0 + w + 5 the entries at T0 and T0 + 5 are out, T0 + 9 is in.
    for (cost, at) in [(1, T0 + 5), (2, T0 + 9)] {
        assert_eq!(rl(c, &line(cost, at, "")).0, 1);
    }
    let later = T0 + w + 5;
    let r = rl(c, &line(5, later, "REFUND"));
    // An empty window, as a PEEK of 5 sees it: it would admit, and nothing is spent
    // (the entries still stored are out of the window).
    assert_eq!(r, (1, 5, 0, 0));
    assert_eq!(scores(c, key), [T0, T0, T0 + 5]);
    // Nothing left in the window: a refund writes nothing.
    let before = snapshot(c);
    assert_eq!(
        rl(c, &line(1, later, "REFUND")),
        rl(c, &line(1, later, "PEEK"))
    );
    assert_eq!(snapshot(c), before);
    // A refund larger than the window's entries empties it, no further.
    assert_eq!(rl(c, &line(3, later + 1, "")).0, 1);
    // (That spend trimmed the entries that had left the window.)
    assert_eq!(scores(c, key), [later + 1; 3]);
    let r = rl(c, &line(7, later + 2, "REFUND"));
    assert_eq!(r, (1, 3, 0, 0), "a PEEK of 7 on an empty log of 10");
    assert!(scores(c, key).is_empty());
    // Once only a refunded log's entries were in it, the key goes with the last one.
    let fresh = "rr:log2";
    rl(c, &format!("RL.SLIDELOG {fresh} 3 10 COST 2 NOW {T0}"));
    let r = rl(
        c,
        &format!("RL.SLIDELOG {fresh} 3 10 COST 5 NOW {T0} REFUND"),
    );
    assert_eq!(r, (0, 3, -1, 0), "a PEEK of 5 on an empty limiter of 3");
    assert!(!exists(c, fresh));
}

// ---------------------------------------------------------------------------------
// Never below empty

#[test]
fn refund_and_reset_on_nothing_write_nothing_and_never_go_below_empty() {
    let server = Server::start();
    let c = &mut server.conn();
    let limiters = [
        "RL.SLIDELOG rr:a 5 10",
        "RL.SLIDECOUNT rr:b 5 10",
        "RL.FIXED rr:c 5 10",
        "RL.GCRA rr:d 5 10",
        "RL.GCRA rr:e 5 10 BURST 2",
    ];
    for base in limiters {
        for mode in ["REFUND", "RESET"] {
            for cost in [1, 3, 9] {
                let before = snapshot(c);
                let r = rl(c, &format!("{base} COST {cost} NOW {T0} {mode}"));
                let p = rl(c, &format!("{base} COST {cost} NOW {T0} PEEK"));
                assert_eq!(r, p, "{base} {mode} on a missing key");
                assert_eq!(snapshot(c), before, "{base} {mode} wrote");
            }
        }
    }
    assert!(snapshot(c).is_empty());

    // FIXED: a refund larger than the counter stops at 0, and the next refunds write
    // nothing at all.
    let fixed_key = format!("rr:c:{}", T0 / 1_000_000);
    rl(c, &format!("RL.FIXED rr:c 5 10 COST 2 NOW {T0}"));
    let r = rl(c, &format!("RL.FIXED rr:c 5 10 COST 5 NOW {T0} REFUND"));
    assert_eq!(r, (1, 0, 0, 0), "a PEEK of 5 on an empty window");
    assert_eq!(get(c, &fixed_key).as_deref(), Some("0"));
    let before = snapshot(c);
    for cost in [1, 4] {
        rl(
            c,
            &format!("RL.FIXED rr:c 5 10 COST {cost} NOW {} REFUND", T0 + 1),
        );
        assert_eq!(snapshot(c), before, "a refund on 0 wrote");
    }
    // The empty counter still admits exactly the limit.
    assert_eq!(
        rl(c, &format!("RL.FIXED rr:c 5 10 COST 5 NOW {}", T0 + 2)).0,
        1
    );
    assert_eq!(rl(c, &format!("RL.FIXED rr:c 5 10 NOW {}", T0 + 3)).0, 0);
    // SLIDECOUNT refunds only the current window's counter, never the previous one.
    rl(c, &format!("RL.SLIDECOUNT rr:b 5 10 COST 3 NOW {T0}"));
    let next = T0 + 10_000_000;
    let r = rl(
        c,
        &format!("RL.SLIDECOUNT rr:b 5 10 COST 3 NOW {next} REFUND"),
    );
    assert_eq!(
        r,
        rl(
            c,
            &format!("RL.SLIDECOUNT rr:b 5 10 COST 3 NOW {next} PEEK")
        )
    );
    assert_eq!(
        get(c, &format!("rr:b:{}", T0 / 10_000_000)).as_deref(),
        Some("3")
    );
    assert!(!exists(c, &format!("rr:b:{}", next / 10_000_000)));
    // GCRA: a refund larger than the TAT's lead deletes the TAT, never moves it
    // before now.
    rl(c, &format!("RL.GCRA rr:d 5 10 COST 2 NOW {T0}"));
    let r = rl(
        c,
        &format!("RL.GCRA rr:d 5 10 COST 4 NOW {} REFUND", T0 + 1_000_000),
    );
    assert_eq!(r, (1, 1, 0, 0), "a PEEK of 4 on an empty GCRA");
    assert!(!exists(c, "rr:d"));
    // A TAT already passed by NOW (still stored: the server clock has not reached it)
    // is not touched by a refund.
    rl(c, &format!("RL.GCRA rr:e 5 10 BURST 2 COST 2 NOW {T0}"));
    let tat = get(c, "rr:e");
    let before = snapshot(c);
    let later = T0 + 5_000_000;
    let r = rl(c, &format!("RL.GCRA rr:e 5 10 BURST 2 NOW {later} REFUND"));
    assert_eq!(
        r,
        rl(c, &format!("RL.GCRA rr:e 5 10 BURST 2 NOW {later} PEEK"))
    );
    assert_eq!((snapshot(c), get(c, "rr:e")), (before, tat));
}

// ---------------------------------------------------------------------------------
// RESET

#[test]
fn reset_clears_every_key_of_the_limiter_and_answers_as_empty() {
    let server = Server::start();
    let c = &mut server.conn();
    let now = T0 + 12_345_678;
    let (prev_n, cur_n) = (T0 / 10_000_000, now / 10_000_000);
    for line in [
        format!("RL.SLIDELOG rs:log 5 10 COST 3 NOW {T0}"),
        format!("RL.SLIDELOG rs:log 5 10 COST 2 NOW {now}"),
        format!("RL.SLIDECOUNT rs:cnt 5 10 COST 4 NOW {T0}"),
        format!("RL.SLIDECOUNT rs:cnt 5 10 COST 1 NOW {now}"),
        format!("RL.FIXED rs:fix 5 10 COST 5 NOW {now}"),
        format!("RL.GCRA rs:gcra 3 1 BURST 4 COST 4 NOW {now}"),
    ] {
        assert_eq!(rl(c, &line).0, 1, "{line}");
    }
    let other = "unrelated";
    let _: () = redis::cmd("SET").arg(other).arg(1).query(c).unwrap();
    for (args, keys) in [
        ("rs:log 5 10", vec!["rs:log".to_string()]),
        (
            "rs:cnt 5 10",
            vec![format!("rs:cnt:{cur_n}"), format!("rs:cnt:{prev_n}")],
        ),
        (
            "rs:fix 5 10",
            vec![format!("rs:fix:{}", now / 10_000_000 * 10)],
        ),
        ("rs:gcra 3 1 BURST 4", vec!["rs:gcra".to_string()]),
    ] {
        let cmd = match args.split(':').nth(1).unwrap().split(' ').next().unwrap() {
            "log" => "RL.SLIDELOG",
            "cnt" => "RL.SLIDECOUNT",
            "fix" => "RL.FIXED",
            _ => "RL.GCRA",
        };
        for k in &keys {
            assert!(exists(c, k), "{k} before RESET");
        }
        let reset = rl(c, &format!("{cmd} {args} COST 2 NOW {now} RESET"));
        let empty = rl(
            c,
            &format!(
                "{cmd} rs:fresh:{cmd} {}  COST 2 NOW {now} PEEK",
                args.split_once(' ').unwrap().1
            ),
        );
        assert_eq!(
            reset, empty,
            "{cmd}: RESET's reply is a PEEK on an empty limiter"
        );
        for k in &keys {
            assert!(!exists(c, k), "{k} after RESET");
        }
        // A full budget again.
        let limit: u64 = args.split(' ').nth(1).unwrap().parse().unwrap();
        let burst = if cmd == "RL.GCRA" { 4 } else { limit };
        assert_eq!(
            rl(c, &format!("{cmd} {args} COST {burst} NOW {now}")).0,
            1,
            "{cmd}"
        );
    }
    assert_eq!(get(c, other).as_deref(), Some("1"));
    // RL.ALL RESET clears every limit's keys at once.
    let line = format!("RL.ALL 2 SLIDELOG rs:log 5 10 GCRA rs:gcra 3 1 BURST 4 NOW {now} RESET");
    let reply = query_line(c, &line).unwrap();
    assert!(matches!(reply, Value::Array(_)));
    assert!(!exists(c, "rs:log") && !exists(c, "rs:gcra"));
}

// ---------------------------------------------------------------------------------
// Replication

#[test]
fn refund_and_reset_replicate_as_effects_to_a_replica_without_the_module() {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start_without_module(&["--replicaof", "127.0.0.1", port.as_str()]);
    wait_link(&primary, &replica);
    let p = &mut primary.conn();
    let mut rng = StdRng::seed_from_u64(0xe77ec7);
    let limiters = [
        "RL.SLIDELOG {r}:log:1 5 10",
        "RL.SLIDELOG {r}:log:2 20 60",
        "RL.SLIDECOUNT {r}:cnt:1 5 10",
        "RL.SLIDECOUNT {r}:cnt:2 9 1500ms",
        "RL.FIXED {r}:fix:1 5 10",
        "RL.FIXED {r}:fix:2 7 2500ms",
        "RL.GCRA {r}:gcra:1 3 10 BURST 4",
        "RL.GCRA {r}:gcra:2 5 60",
    ];
    let mut now = T0;
    for _ in 0..4_000 {
        now += rng.gen_range(0..300_000);
        let base = limiters[rng.gen_range(0..limiters.len())];
        let mode = match rng.gen_range(0..10) {
            0..=5 => "",
            6..=8 => "REFUND",
            _ => "RESET",
        };
        rl(
            p,
            &format!("{base} COST {} NOW {now} {mode}", rng.gen_range(1..=3)),
        );
    }
    // Every limiter ends with live state, so the comparison covers all four.
    for base in limiters {
        rl(p, &format!("{base} NOW {now}"));
    }
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(p).unwrap();
    assert_eq!(acked, 1);
    let now_ms = server_time_ms(p);
    let r = &mut replica.conn();
    let compared = assert_same_data(
        "replica without the module",
        &snapshot(p),
        &snapshot(r),
        now_ms,
    );
    assert!(compared >= 8, "{compared}");
    let stats = info(r, "commandstats");
    for effect in ["decrby", "zrem", "del"] {
        assert!(
            stats.contains(&format!("cmdstat_{effect}:")),
            "no {effect} replicated:\n{stats}"
        );
    }
    assert!(!stats.contains("cmdstat_rl."), "{stats}");
}

// ---------------------------------------------------------------------------------
// Keyspace notifications

/// The events (event, key) fired by `line`, ended by a marker key's event.
fn events(
    sub: &mut redis::PubSub,
    c: &mut Connection,
    line: &str,
    marker: &str,
) -> Vec<(String, String)> {
    query_line(c, line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let _: () = redis::cmd("SET").arg(marker).arg(1).query(c).unwrap();
    let mut out = Vec::new();
    loop {
        let msg = sub
            .get_message()
            .unwrap_or_else(|e| panic!("{line}: {e}, got {out:?}"));
        let channel = msg.get_channel_name().to_string();
        let key: String = msg.get_payload().unwrap();
        let event = channel.strip_prefix("__keyevent@0__:").unwrap().to_string();
        if key == marker {
            return out;
        }
        out.push((event, key));
    }
}

#[test]
fn refund_and_reset_fire_decrby_zrem_and_del() {
    let server = Server::start_with(&["--notify-keyspace-events", "KEA"]);
    let c = &mut server.conn();
    let mut sub_conn = server.conn();
    let mut sub = sub_conn.as_pubsub();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let fixed = format!("rn:fix:{}", T0 / 1_000_000);
    let (cur, prev) = (
        format!("rn:cnt:{}", T0 / 10_000_000),
        format!("rn:cnt:{}", T0 / 10_000_000 - 1),
    );
    for line in [
        format!("RL.FIXED rn:fix 5 10 COST 3 NOW {T0}"),
        format!("RL.SLIDECOUNT rn:cnt 5 10 COST 2 NOW {}", T0 - 1),
        format!("RL.SLIDECOUNT rn:cnt 5 10 COST 1 NOW {T0}"),
        format!("RL.SLIDELOG rn:log 5 10 COST 3 NOW {T0}"),
        format!("RL.GCRA rn:gcra 5 10 COST 3 NOW {T0}"),
    ] {
        assert_eq!(rl(c, &line).0, 1, "{line}");
    }
    // Setting up fired events too: wait for them to pass.
    events(&mut sub, c, "PING", "marker:0");
    let ev = |e: &str, k: &str| (e.to_string(), k.to_string());
    let mut check = |line: String, want: Vec<(String, String)>, n: usize| {
        let got = events(&mut sub, c, &line, &format!("marker:{n}"));
        assert_eq!(got, want, "{line}");
    };
    check(
        format!("RL.FIXED rn:fix 5 10 COST 2 NOW {T0} REFUND"),
        vec![ev("decrby", &fixed)],
        1,
    );
    check(
        format!("RL.SLIDECOUNT rn:cnt 5 10 NOW {T0} REFUND"),
        vec![ev("decrby", &cur)],
        2,
    );
    check(
        format!("RL.SLIDELOG rn:log 5 10 COST 2 NOW {T0} REFUND"),
        vec![ev("zrem", "rn:log")],
        3,
    );
    check(
        format!("RL.GCRA rn:gcra 5 10 COST 1 NOW {T0} REFUND"),
        vec![ev("set", "rn:gcra"), ev("expire", "rn:gcra")],
        4,
    );
    // Nothing to refund: no event.
    check(
        format!("RL.SLIDECOUNT rn:cnt 5 10 NOW {T0} REFUND"),
        vec![],
        5,
    );
    check(
        format!("RL.FIXED rn:fix 5 10 NOW {T0} RESET"),
        vec![ev("del", &fixed)],
        6,
    );
    check(
        format!("RL.SLIDECOUNT rn:cnt 5 10 NOW {T0} RESET"),
        vec![ev("del", &cur), ev("del", &prev)],
        7,
    );
    check(
        format!("RL.SLIDELOG rn:log 5 10 NOW {T0} RESET"),
        vec![ev("del", "rn:log")],
        8,
    );
    check(
        format!("RL.GCRA rn:gcra 5 10 NOW {T0} RESET"),
        vec![ev("del", "rn:gcra")],
        9,
    );
    // On keys that are gone: no event.
    check(format!("RL.GCRA rn:gcra 5 10 NOW {T0} RESET"), vec![], 10);
}

// ---------------------------------------------------------------------------------
// A PEEK's reset is the state's own

/// After PEEK, REFUND and RESET, `reset_after_ms` is when the stored state is back to
/// its full budget, the peeked units not counted: 0 on an empty limiter, and what the
/// last spend reported (less the time since) whatever the peeked cost.
#[test]
fn peek_refund_and_reset_report_the_states_own_reset() {
    let s = Server::start();
    let c = &mut s.conn();
    for (cmd, args) in [
        ("RL.FIXED", "5 10"),
        ("RL.SLIDECOUNT", "5 10"),
        ("RL.SLIDELOG", "5 10"),
        ("RL.GCRA", "5 10"),
        ("RL.GCRA", "5 10 BURST 2"),
    ] {
        let key = format!("own:{cmd}:{}", args.len());
        let line = |cost: u64, now: u64, mode: &str| {
            format!("{cmd} {key} {args} COST {cost} NOW {now} {mode}")
        };
        for cost in [1, 2, 6] {
            let r = rl(c, &line(cost, T0, "PEEK"));
            assert_eq!(r.3, 0, "{cmd} {args}: PEEK {cost} of an empty limiter");
        }
        let spent = rl(c, &line(2, T0, ""));
        assert_eq!(spent.0, 1, "{cmd} {args}");
        let later = T0 + 1_500_000;
        let own = spent.3 - 1_500;
        for cost in [1, 2, 6] {
            let r = rl(c, &line(cost, later, "PEEK"));
            assert_eq!(r.3, own, "{cmd} {args}: PEEK {cost} after a spend of 2");
        }
        // A refund of one of the two units: the other is still spent.
        let r = rl(c, &line(1, later, "REFUND"));
        assert!(r.3 > 0, "{cmd} {args}: REFUND 1 of 2: {r:?}");
        assert_eq!(rl(c, &line(1, later, "RESET")).3, 0, "{cmd} {args}: RESET");
        assert_eq!(rl(c, &line(3, later, "PEEK")).3, 0, "{cmd} {args}: reset");
    }

    // RL.ALL: each entry and the aggregate are the states' own.
    let all = |c: &mut Connection, mode: &str, now: u64| {
        let v: redis::Value = redis::cmd("RL.ALL")
            .arg(2)
            .arg("FIXED")
            .arg("own:all:f")
            .arg(5)
            .arg(10)
            .arg("GCRA")
            .arg("own:all:g")
            .arg(5)
            .arg(10)
            .arg("COST")
            .arg(2)
            .arg("NOW")
            .arg(now)
            .arg(mode)
            .query(c)
            .unwrap();
        let redis::Value::Array(parts) = v else {
            panic!("{v:?}")
        };
        let int = |v: &redis::Value| match v {
            redis::Value::Int(n) => *n,
            other => panic!("{other:?}"),
        };
        let redis::Value::Array(each) = &parts[4] else {
            panic!("{parts:?}")
        };
        let resets: Vec<i64> = each
            .iter()
            .map(|e| match e {
                redis::Value::Array(e) => int(&e[3]),
                other => panic!("{other:?}"),
            })
            .collect();
        (int(&parts[3]), resets)
    };
    assert_eq!(all(c, "PEEK", T0), (0, vec![0, 0]));
    rl(c, &format!("RL.FIXED own:all:f 5 10 NOW {T0}"));
    // The window ends 10 s after T0; the TAT is empty: the GCRA's own reset is 0.
    assert_eq!(all(c, "PEEK", T0 + 1_500_000), (8_500, vec![8_500, 0]));
    assert_eq!(all(c, "RESET", T0 + 1_500_000), (0, vec![0, 0]));

    // RL.CONCURRENCY: until the last lease held expires; none held: 0.
    let lease = |c: &mut Connection, op: &str, now: u64| {
        rl(c, &format!("RL.CONCURRENCY own:l 3 10 {op} NOW {now}"))
    };
    assert_eq!(lease(c, "PEEK", T0), (1, 2, 0, 0));
    assert_eq!(lease(c, "ACQUIRE a", T0).3, 10_000);
    assert_eq!(lease(c, "PEEK", T0 + 1_500_000), (1, 1, 0, 8_500));
    assert_eq!(lease(c, "RELEASE a", T0 + 1_500_000), (1, 2, 0, 0));
}
