//! BLOCK, the penalty box, on a real server with NOW stepped (never a sleep):
//!
//! - A spending call that is denied starts a block: `<key>:block` holds its end in
//!   unix µs and expires then; the limiter's own keys are cleared; every call until
//!   the end is denied at once and writes nothing (no key, no WATCH abort, no
//!   replication traffic); at the end the budget is full.
//! - RESET clears it, REFUND does not lift it, PEEK reports it; a call without BLOCK
//!   ignores it.
//! - EXTEND, BACKOFF and STRIKES; IMPOSE; RL.ALL blocks only the limit that denied.
//! - Replicas and an AOF reload end byte-identical, with the same expiry instants.
//! - Bad arguments are refused and write nothing; the block key obeys the ACL.
mod common;
use common::workload::{assert_same_data, info_int, server_time_ms};
use common::*;

const S: u64 = 1_000_000;

/// The limiters that take BLOCK: (command, `<key> <limit> <window>` for a budget of 2
/// per 60 s).
const LIMITERS: [(&str, &str); 6] = [
    ("RL.FIXED", "rl:{u}:fix 2 60"),
    ("RL.COUNTER", "rl:{u}:ctr 2 60"),
    ("RL.SLIDECOUNT", "rl:{u}:cnt 2 60"),
    ("RL.SLIDELOG", "rl:{u}:log 2 60"),
    ("RL.GCRA", "rl:{u}:gcra 2 60"),
    ("RL.GCRA", "rl:{u}:burst 4 60 BURST 2"),
];

fn ints(c: &mut Connection, line: &str) -> Vec<i64> {
    let mut cmd = redis::Cmd::new();
    for w in line.split_whitespace() {
        cmd.arg(w);
    }
    cmd.query(c).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pexpiretime(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap()
}

fn keys(c: &mut Connection, prefix: &str) -> Vec<String> {
    let mut k: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}*"))
        .query(c)
        .unwrap();
    k.sort();
    k
}

/// Spends the budget of 2 at T0, then the denial at T0 + 1 s that starts a block of
/// 300 s. Returns the block key.
fn start_block(c: &mut Connection, cmd: &str, args: &str, options: &str) -> String {
    for i in 0..2 {
        let r = ints(
            c,
            &format!("{cmd} {args} BLOCK 300 {options} NOW {}", T0 + i),
        );
        assert_eq!(r[0], 1, "{cmd} {args}: call {i}: {r:?}");
    }
    let r = ints(
        c,
        &format!("{cmd} {args} BLOCK 300 {options} NOW {}", T0 + S),
    );
    assert_eq!(
        &r[..4],
        [0, 0, 300_000, 300_000],
        "{cmd} {args}: the denial"
    );
    let base = args.split(' ').next().unwrap_or_default();
    format!("{base}:block")
}

#[test]
fn a_denial_starts_a_block_that_denies_every_call_and_writes_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    let mut watcher = s.conn();
    for (cmd, args) in LIMITERS {
        let base = args.split(' ').next().unwrap_or_default().to_string();
        let before_ms = server_time_ms(c);
        let block = start_block(c, cmd, args, "");
        let after_ms = server_time_ms(c);
        // The block key alone: the limiter's keys were cleared.
        assert_eq!(keys(c, &base), std::slice::from_ref(&block), "{cmd} {args}");
        assert_eq!(get(c, &block), Some((T0 + 301 * S).to_string()));
        let at = pexpiretime(c, &block);
        assert!(
            (before_ms + 300_000..=after_ms + 300_000).contains(&at),
            "{cmd}: the block expires 300 s from the server's now: {at}"
        );

        // Every call while blocked: denied until the end, nothing written, and a
        // WATCH on the block key is not aborted.
        let snap = snapshot(c);
        let _: () = redis::cmd("WATCH").arg(&block).query(&mut watcher).unwrap();
        for (step, mode) in [
            (2, ""),
            (100, "PEEK"),
            (150, "REFUND"),
            (300, ""),
            (300, "COST 2"),
        ] {
            let line = format!("{cmd} {args} BLOCK 300 NOW {} {mode}", T0 + step * S);
            let wait = (301 - step) as i64 * 1000;
            assert_eq!(rl(c, &line), (0, 0, wait, wait), "{line}");
        }
        // 1 µs before the end, still blocked (rounded up to 1 ms).
        let line = format!("{cmd} {args} BLOCK 300 NOW {}", T0 + 301 * S - 1);
        assert_eq!(rl(c, &line), (0, 0, 1, 1), "{line}");
        assert_eq!(snapshot(c), snap, "{cmd}: a blocked call wrote");
        let exec: Option<Vec<String>> = redis::pipe()
            .atomic()
            .cmd("PING")
            .query(&mut watcher)
            .unwrap();
        assert!(exec.is_some(), "{cmd}: a blocked call aborted a WATCH");

        // At the end the block is over and the budget full.
        let r = rl(c, &format!("{cmd} {args} BLOCK 300 NOW {}", T0 + 301 * S));
        assert_eq!((r.0, r.1), (1, 1), "{cmd} {args}: after the block");
        let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
    }
}

#[test]
fn reset_clears_the_block_refund_keeps_it_and_calls_without_block_ignore_it() {
    let s = Server::start();
    let c = &mut s.conn();
    for (cmd, args) in LIMITERS {
        let block = start_block(c, cmd, args, "");
        let later = T0 + 10 * S;
        // REFUND does not lift it, PEEK reports it.
        let refund = rl(c, &format!("{cmd} {args} BLOCK 300 NOW {later} REFUND"));
        assert_eq!(refund, (0, 0, 291_000, 291_000), "{cmd}");
        let peek = rl(
            c,
            &format!("{cmd} {args} BLOCK 300 COST 2 PEEK NOW {later}"),
        );
        assert_eq!(peek, refund, "{cmd}");
        // Without BLOCK the limiter decides on its own keys (cleared: a full budget),
        // and RESET leaves the block key.
        let plain = rl(c, &format!("{cmd} {args} NOW {later} PEEK"));
        assert_eq!((plain.0, plain.1), (1, 1), "{cmd}");
        rl(c, &format!("{cmd} {args} NOW {later} RESET"));
        assert!(get(c, &block).is_some(), "{cmd}: RESET without BLOCK");
        // RESET with BLOCK clears it: an empty limiter.
        let reset = rl(c, &format!("{cmd} {args} BLOCK 300 NOW {later} RESET"));
        assert_eq!(reset, (1, 1, 0, 0), "{cmd}");
        assert_eq!(get(c, &block), None, "{cmd}");
        let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
    }
}

#[test]
fn extend_backoff_and_strikes() {
    let s = Server::start();
    let c = &mut s.conn();
    let line = |opts: &str, t: u64| format!("RL.FIXED rl:{{e}} 1 60 BLOCK 30 {opts} NOW {t}");

    // STRIKES: a fifth integer, the denials of the current block; the end stays.
    let o = "STRIKES";
    assert_eq!(ints(c, &line(o, T0)), [1, 0, 0, 60_000, 0]);
    assert_eq!(ints(c, &line(o, T0 + S)), [0, 0, 30_000, 30_000, 1]);
    assert_eq!(ints(c, &line(o, T0 + 2 * S)), [0, 0, 29_000, 29_000, 2]);
    assert_eq!(
        ints(c, &line(&format!("{o} PEEK"), T0 + 3 * S)),
        [0, 0, 28_000, 28_000, 2]
    );
    assert_eq!(get(c, "rl:{e}:block"), Some(format!("{}:2", T0 + 31 * S)));
    // Callers that do not ask get four integers.
    assert_eq!(ints(c, &line("", T0 + 3 * S)).len(), 4);
    assert_eq!(get(c, "rl:{e}:block"), Some(format!("{}:2", T0 + 31 * S)));
    // Not blocked: 0.
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
    assert_eq!(ints(c, &line(o, T0)), [1, 0, 0, 60_000, 0]);

    // EXTEND: each call while blocked restarts it.
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
    let o = "EXTEND";
    assert_eq!(ints(c, &line(o, T0))[0], 1);
    assert_eq!(ints(c, &line(o, T0 + S)), [0, 0, 30_000, 30_000]);
    assert_eq!(ints(c, &line(o, T0 + 20 * S)), [0, 0, 30_000, 30_000]);
    assert_eq!(ints(c, &line(o, T0 + 49 * S)), [0, 0, 30_000, 30_000]);
    assert_eq!(get(c, "rl:{e}:block"), Some(format!("{}:3", T0 + 79 * S)));
    let at_ms = (T0 + 79 * S) as i64 / 1000;
    let pttl = pexpiretime(c, "rl:{e}:block") - server_time_ms(c);
    assert!((29_000..=30_000).contains(&pttl), "{pttl} for {at_ms}");
    // A PEEK does not extend it.
    assert_eq!(
        ints(c, &line("EXTEND PEEK", T0 + 50 * S)),
        [0, 0, 29_000, 29_000]
    );
    assert_eq!(ints(c, &line(o, T0 + 79 * S))[0], 1);

    // BACKOFF: 30 s, then 60, 120, … up to 200 s, per strike.
    let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
    let o = "BACKOFF 200 STRIKES";
    assert_eq!(ints(c, &line(o, T0))[0], 1);
    let mut t = T0 + S;
    let mut waits = vec![];
    for _ in 0..5 {
        let r = ints(c, &line(o, t));
        waits.push((r[2], r[4]));
        t += S;
    }
    assert_eq!(
        waits,
        [
            (30_000, 1),
            (60_000, 2),
            (120_000, 3),
            (200_000, 4),
            (200_000, 5)
        ]
    );
}

/// EXTEND and BACKOFF restart a block from the call, but never end it earlier than it
/// would: a block imposed for an hour stays an hour, and the strikes still count. They
/// count strikes without `STRIKES`: the block key holds the count from the denial that
/// starts it (`<end>:1`).
#[test]
fn extend_and_backoff_never_shorten_a_longer_block() {
    let s = Server::start();
    let c = &mut s.conn();
    for (n, growth) in ["EXTEND", "BACKOFF 200"].into_iter().enumerate() {
        let key = format!("rl:{{x{n}}}");
        let block = format!("{key}:block");
        let line =
            |t: u64, mode: &str| format!("RL.FIXED {key} 1 60 BLOCK 30 {growth} NOW {t} {mode}");
        assert_eq!(ints(c, &line(T0, ""))[0], 1, "{growth}");
        assert_eq!(
            ints(c, &line(T0 + S, "")),
            [0, 0, 30_000, 30_000],
            "{growth}"
        );
        assert_eq!(get(c, &block), Some(format!("{}:1", T0 + 31 * S)));
        let r = rl(
            c,
            &format!("RL.FIXED {key} 1 60 BLOCK 3600 NOW {} IMPOSE", T0 + 2 * S),
        );
        assert_eq!(r, (0, 0, 3_600_000, 3_600_000), "{growth}");
        let end = T0 + 3602 * S;
        // Strikes 1 and 2 of the imposed block: 30 s (EXTEND), 30 s and 60 s (BACKOFF)
        // from the call, all inside the hour.
        for (k, t) in [(1, T0 + 3 * S), (2, T0 + 4 * S)] {
            let left = ((end - t) / 1000) as i64;
            assert_eq!(
                ints(c, &line(t, "")),
                [0, 0, left, left],
                "{growth}: strike {k}"
            );
            assert_eq!(get(c, &block), Some(format!("{end}:{k}")), "{growth}");
        }
    }
}

#[test]
fn impose_starts_a_block_now_whatever_the_limiter_says() {
    let s = Server::start();
    let c = &mut s.conn();
    rl(c, &format!("RL.GCRA rl:{{i}} 5 60 NOW {T0}"));
    let r = rl(
        c,
        &format!("RL.GCRA rl:{{i}} 5 60 BLOCK 90 NOW {T0} IMPOSE"),
    );
    assert_eq!(r, (0, 0, 90_000, 90_000));
    // The TAT was cleared with the block's start; no strike yet.
    assert_eq!(keys(c, "rl:{i}"), ["rl:{i}:block"]);
    assert_eq!(get(c, "rl:{i}:block"), Some(format!("{}:0", T0 + 90 * S)));
    let r = ints(
        c,
        &format!("RL.GCRA rl:{{i}} 5 60 BLOCK 90 STRIKES NOW {} PEEK", T0 + S),
    );
    assert_eq!(r, [0, 0, 89_000, 89_000, 0]);
    // A shorter IMPOSE replaces it, as rate-limiter-flexible's block() does.
    let r = rl(
        c,
        &format!("RL.GCRA rl:{{i}} 5 60 BLOCK 5 NOW {} IMPOSE", T0 + S),
    );
    assert_eq!(r, (0, 0, 5_000, 5_000));
    let r = rl(
        c,
        &format!("RL.GCRA rl:{{i}} 5 60 BLOCK 5 NOW {}", T0 + 6 * S),
    );
    assert_eq!(r, (1, 4, 0, 12_000));
}

/// RL.ALL's reply: the aggregate and each limit's integers.
fn all(c: &mut Connection, line: &str) -> (Vec<i64>, Vec<Vec<i64>>) {
    let v = query_line(c, line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let Value::Array(parts) = v else {
        panic!("{line}: {v:?}")
    };
    let int = |v: &Value| match v {
        Value::Int(n) => *n,
        other => panic!("{other:?}"),
    };
    let total = parts[..4].iter().map(int).collect();
    let Value::Array(each) = &parts[4] else {
        panic!("{parts:?}")
    };
    let each = each
        .iter()
        .map(|e| match e {
            Value::Array(e) => e.iter().map(int).collect(),
            other => panic!("{other:?}"),
        })
        .collect();
    (total, each)
}

#[test]
fn rl_all_blocks_only_the_limit_that_denied() {
    let s = Server::start();
    let c = &mut s.conn();
    let line = |t: u64, mode: &str| {
        format!(
            "RL.ALL 2 FIXED rl:{{a}}:min 1 60 BLOCK 120 STRIKES GCRA rl:{{a}}:sec 5 10 NOW {t} {mode}"
        )
    };
    let (total, _) = all(c, &line(T0, ""));
    assert_eq!(total[0], 1);
    let gcra = get(c, "rl:{a}:sec");
    // The per-minute limit denies: its block starts, the GCRA spends nothing.
    let (total, each) = all(c, &line(T0 + S, ""));
    assert_eq!(total, [0, 0, 120_000, 120_000]);
    assert_eq!(each[0], [0, 0, 120_000, 120_000, 1]);
    assert_eq!(each[1][0], 1, "the GCRA alone would admit: {each:?}");
    assert_eq!(get(c, "rl:{a}:sec"), gcra, "the GCRA spent");
    assert_eq!(keys(c, "rl:{a}:min"), ["rl:{a}:min:block"]);
    // While blocked: denied, the strike counted, nothing else written.
    let snap_gcra = get(c, "rl:{a}:sec");
    let (total, each) = all(c, &line(T0 + 2 * S, ""));
    assert_eq!(total, [0, 0, 119_000, 119_000]);
    assert_eq!(each[0], [0, 0, 119_000, 119_000, 2]);
    assert_eq!(get(c, "rl:{a}:sec"), snap_gcra);
    // PEEK reports it; RESET clears both limits and the block.
    let (total, _) = all(c, &line(T0 + 3 * S, "PEEK"));
    assert_eq!(total[..3], [0, 0, 118_000]);
    let (total, each) = all(c, &line(T0 + 3 * S, "RESET"));
    assert_eq!(
        (total, each[0].clone()),
        (vec![1, 0, 0, 0], vec![1, 0, 0, 0, 0])
    );
    assert!(keys(c, "rl:{a}").is_empty());
    // IMPOSE blocks the limits with BLOCK and leaves the others alone.
    let (total, each) = all(c, &line(T0 + 4 * S, "IMPOSE"));
    assert_eq!(total[..3], [0, 0, 120_000]);
    assert_eq!(each[1][0], 1);
    assert_eq!(keys(c, "rl:{a}"), ["rl:{a}:min:block"]);
}

/// Two limits with BLOCK: the one that denies starts its block; the other, which would
/// have admitted, is neither blocked nor touched (it spends nothing).
#[test]
fn rl_all_a_limit_with_block_that_would_admit_is_not_touched() {
    let s = Server::start();
    let c = &mut s.conn();
    let line = |t: u64| {
        format!(
            "RL.ALL 2 FIXED rl:{{d}}:min 1 60 BLOCK 120 GCRA rl:{{d}}:sec 5 10 BLOCK 30 NOW {t}"
        )
    };
    assert_eq!(all(c, &line(T0)).0[0], 1);
    let gcra = get(c, "rl:{d}:sec");
    assert!(gcra.is_some());
    let (total, each) = all(c, &line(T0 + S));
    assert_eq!(total, [0, 0, 120_000, 120_000]);
    assert_eq!(each[0], [0, 0, 120_000, 120_000]);
    assert_eq!(each[1][0], 1, "the GCRA alone would admit: {each:?}");
    assert_eq!(get(c, "rl:{d}:sec"), gcra, "the GCRA spent");
    assert_eq!(keys(c, "rl:{d}:sec"), ["rl:{d}:sec"]);
    assert_eq!(keys(c, "rl:{d}:min"), ["rl:{d}:min:block"]);
    // While the per-minute limit is blocked, the GCRA is not read, and still not spent.
    let (total, _) = all(c, &line(T0 + 2 * S));
    assert_eq!(total, [0, 0, 119_000, 119_000]);
    assert_eq!(get(c, "rl:{d}:sec"), gcra, "the GCRA spent while blocked");
}

#[test]
fn bad_block_arguments_are_refused_and_write_nothing() {
    let s = Server::start();
    let c = &mut s.conn();
    let ok = "RL.FIXED rl:{b} 1 60";
    let cases: &[(String, &str)] = &[
        (
            format!("{ok} NOW {} BLOCK", T0 + S),
            "ERR syntax error: BLOCK needs a value",
        ),
        (
            format!("{ok} BLOCK 0"),
            "ERR BLOCK must be a positive duration",
        ),
        (
            format!("{ok} BLOCK -1"),
            "ERR BLOCK must be a positive duration",
        ),
        (
            format!("{ok} BLOCK 1.5"),
            "ERR BLOCK must be a positive duration",
        ),
        (
            format!("{ok} BLOCK 315360001"),
            "ERR BLOCK must be a positive duration",
        ),
        (
            format!("{ok} BLOCK 5 BLOCK 5"),
            "ERR syntax error: BLOCK given more than once",
        ),
        (
            format!("{ok} BLOCK 5 EXTEND EXTEND"),
            "ERR syntax error: EXTEND given more than once",
        ),
        (
            format!("{ok} BLOCK 5 STRIKES STRIKES"),
            "ERR syntax error: STRIKES given more than once",
        ),
        (
            format!("{ok} BLOCK 5 BACKOFF 9 BACKOFF 9"),
            "ERR syntax error: BACKOFF given more than once",
        ),
        (
            format!("{ok} BLOCK 5 EXTEND BACKOFF 9"),
            "ERR syntax error: EXTEND and BACKOFF exclude each other",
        ),
        (
            format!("{ok} BLOCK 5 BACKOFF 4"),
            "ERR BACKOFF must be a duration no shorter than BLOCK's",
        ),
        (
            format!("{ok} BLOCK 5 BACKOFF x"),
            "ERR BACKOFF must be a positive duration",
        ),
        (
            format!("{ok} EXTEND"),
            "ERR syntax error: EXTEND needs BLOCK",
        ),
        (
            format!("{ok} BACKOFF 9"),
            "ERR syntax error: BACKOFF needs BLOCK",
        ),
        (
            format!("{ok} STRIKES"),
            "ERR syntax error: STRIKES needs BLOCK",
        ),
        (
            format!("{ok} IMPOSE"),
            "ERR syntax error: IMPOSE needs BLOCK",
        ),
        (
            format!("{ok} BLOCK 5 IMPOSE PEEK"),
            "ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other",
        ),
        (
            format!("{ok} BLOCK 5 IMPOSE IMPOSE"),
            "ERR syntax error: IMPOSE given more than once",
        ),
        (
            "RL.CONCURRENCY rl:{b}:c 2 60 ACQUIRE x BLOCK 5".into(),
            "ERR CONCURRENCY does not take BLOCK",
        ),
        (
            "RL.ALL 1 CONCURRENCY rl:{b}:c 2 60 BLOCK 5 LEASE x".into(),
            "ERR CONCURRENCY does not take BLOCK",
        ),
        (
            "RL.THROTTLE rl:{b}:t 1 2 3 BLOCK 5".into(),
            "ERR RL.THROTTLE does not take BLOCK",
        ),
        (
            format!("RL.ALL 1 FIXED rl:{{b}} 1 60 NOW {T0} BLOCK 5"),
            "ERR syntax error: BLOCK belongs to a limit",
        ),
        (
            format!("RL.ALL 1 FIXED rl:{{b}} 1 60 NOW {T0} IMPOSE"),
            "ERR syntax error: IMPOSE needs BLOCK",
        ),
        // An error in limit 2 lets limit 1 write nothing.
        (
            format!("RL.ALL 2 FIXED rl:{{b}} 1 60 BLOCK 5 GCRA rl:{{b}}:g 1 60 BLOCK 0 NOW {T0}"),
            "ERR BLOCK must be a positive duration",
        ),
    ];
    // A denied call is what BLOCK acts on: fill the limiter first.
    rl(c, &format!("{ok} NOW {T0}"));
    let before = snapshot(c);
    for (line, want) in cases {
        let line = if line.contains(" NOW ") {
            line.clone()
        } else {
            format!("{line} NOW {}", T0 + S)
        };
        let e = err_line(c, &line);
        assert!(e.starts_with(want), "{line}: {e}");
        assert_eq!(snapshot(c), before, "{line} wrote");
    }
    // A block key holding something else.
    let _: () = redis::cmd("SET")
        .arg("rl:{b}:block")
        .arg("soon")
        .query(c)
        .unwrap();
    let e = err_line(c, &format!("{ok} BLOCK 5 NOW {}", T0 + S));
    assert!(
        e.starts_with("ERR limiter key 'rl:{b}:block' does not hold a block"),
        "{e}"
    );
    let _: () = redis::cmd("DEL").arg("rl:{b}:block").query(c).unwrap();
    let _: () = redis::cmd("HSET")
        .arg("rl:{b}:block")
        .arg("f")
        .arg(1)
        .query(c)
        .unwrap();
    let e = err_line(c, &format!("{ok} BLOCK 5 NOW {}", T0 + S));
    assert!(e.starts_with("WRONGTYPE"), "{e}");
}

#[test]
fn the_block_key_obeys_the_callers_acl() {
    let s = Server::start();
    let c = &mut s.conn();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("narrow")
        .arg("on")
        .arg("nopass")
        .arg("+@all")
        .arg("~rl:x")
        .query(c)
        .unwrap();
    let mut n = s.conn();
    let _: () = redis::cmd("AUTH")
        .arg("narrow")
        .arg("x")
        .query(&mut n)
        .unwrap();
    // Without BLOCK the GCRA writes only its own key; with BLOCK it needs rl:x:block.
    assert_eq!(rl(&mut n, &format!("RL.GCRA rl:x 1 60 NOW {T0}")).0, 1);
    let before = snapshot(c);
    for mode in ["", "PEEK", "RESET"] {
        let e = err_line(
            &mut n,
            &format!("RL.GCRA rl:x 1 60 BLOCK 5 NOW {T0} {mode}"),
        );
        assert!(
            e.starts_with("NOPERM") && e.contains("rl:x:block"),
            "{mode}: {e}"
        );
        assert_eq!(snapshot(c), before, "{mode}");
    }
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("narrow")
        .arg("~rl:x:block")
        .query(c)
        .unwrap();
    let r = rl(&mut n, &format!("RL.GCRA rl:x 1 60 BLOCK 5 NOW {T0}"));
    assert_eq!(r, (0, 0, 5_000, 5_000));
}

#[test]
fn blocks_replicate_as_set_pxat_and_blocked_calls_replicate_nothing() {
    let primary = Server::start_with(&[
        "--repl-diskless-sync-delay",
        "0",
        "--repl-ping-replica-period",
        "3600",
    ]);
    let port = primary.port.to_string();
    let with = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let without = Server::start_without_module(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &with);
    wait_link(&primary, &without);
    let p = &mut primary.conn();
    let offset = |c: &mut Connection| info_int(c, "replication", "master_repl_offset");
    for (cmd, args) in LIMITERS {
        for options in ["", "STRIKES", "EXTEND", "BACKOFF 900"] {
            let base = args.split(' ').next().unwrap_or_default();
            let args = args.replacen(base, &format!("{base}:{}", options.len()), 1);
            let before = offset(p);
            start_block(p, cmd, &args, options);
            assert!(offset(p) > before, "{cmd} {options}: nothing replicated");
            for (step, mode) in [(5, ""), (6, "PEEK"), (7, "REFUND")] {
                let line = format!(
                    "{cmd} {args} BLOCK 300 {options} NOW {} {mode}",
                    T0 + step * S
                );
                let before = offset(p);
                let r = ints(p, &line);
                assert_eq!(r[0], 0, "{line}");
                let counted = !options.is_empty() && mode.is_empty();
                assert_eq!(offset(p) > before, counted, "{line}: replication moved");
            }
        }
    }
    // RESET of one, IMPOSE of another.
    rl(
        p,
        &format!("RL.FIXED rl:{{u}}:fix:0 2 60 BLOCK 300 NOW {T0} RESET"),
    );
    rl(
        p,
        &format!("RL.SLIDELOG rl:{{u}}:new 2 60 BLOCK 30 NOW {T0} IMPOSE"),
    );
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(p).unwrap();
    assert_eq!(acked, 2);
    let now = server_time_ms(p);
    let a = snapshot(p);
    assert!(
        a.iter().filter(|k| k.0.ends_with(b":block")).count() >= 19,
        "{a:?}"
    );
    for replica in [&with, &without] {
        let b = snapshot(&mut replica.conn());
        assert_same_data("blocks", &a, &b, now);
        // Exactly, the expiry instants included.
        assert_eq!(a, b);
    }
}

#[test]
fn an_aof_reload_restores_every_block() {
    let s = Server::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
        "--enable-debug-command",
        "yes",
    ]);
    let c = &mut s.conn();
    for (cmd, args) in LIMITERS {
        for options in ["", "STRIKES", "EXTEND"] {
            let base = args.split(' ').next().unwrap_or_default();
            let args = args.replacen(base, &format!("{base}:{}", options.len()), 1);
            start_block(c, cmd, &args, options);
            ints(
                c,
                &format!("{cmd} {args} BLOCK 300 {options} NOW {}", T0 + 9 * S),
            );
        }
    }
    rl(
        c,
        &format!("RL.GCRA rl:{{u}}:gcra:0 2 60 BLOCK 300 NOW {T0} RESET"),
    );
    let before = snapshot(c);
    assert!(before.iter().filter(|k| k.0.ends_with(b":block")).count() >= 14);
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(c).unwrap();
    assert_eq!(snapshot(c), before);
}

/// The keyevent notifications `act` fires, in order, as (event, key): a marker key
/// set afterwards on the same connection ends the list, so "none" is exact.
fn events(
    sub: &mut redis::PubSub,
    c: &mut Connection,
    line: &str,
    n: u64,
) -> Vec<(String, String)> {
    ints(c, line);
    let marker = format!("marker:{n}");
    let _: () = redis::cmd("SET").arg(&marker).arg(1).query(c).unwrap();
    let mut out = vec![];
    loop {
        let msg = sub.get_message().expect("a notification");
        let event = msg
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        let key: String = msg.get_payload().unwrap();
        if key == marker {
            return out;
        }
        out.push((event, key));
    }
}

#[test]
fn keyspace_events_name_exactly_the_keys_written() {
    let s = Server::start_with(&["--notify-keyspace-events", "KEA"]);
    let c = &mut s.conn();
    let mut listener = s.conn();
    let mut sub = listener.as_pubsub();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    sub.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let counter = format!("rl:{{n}}:{}", T0 / 1_000_000);
    let line = |t: u64, o: &str| format!("RL.FIXED rl:{{n}} 1 60 BLOCK 30 {o} NOW {t}");
    let ev = |e: &str, k: &str| (e.to_string(), k.to_string());
    assert_eq!(
        events(&mut sub, c, &line(T0, ""), 1),
        [ev("incrby", &counter), ev("expire", &counter)]
    );
    // The block starts: the counter goes, the block key is set with its expiry.
    assert_eq!(
        events(&mut sub, c, &line(T0 + S, ""), 2),
        [
            ev("del", &counter),
            ev("set", "rl:{n}:block"),
            ev("expire", "rl:{n}:block")
        ]
    );
    // Blocked: nothing, unless the call counts.
    for (n, o) in [(3, ""), (4, "PEEK"), (5, "REFUND")] {
        assert_eq!(events(&mut sub, c, &line(T0 + 2 * S, o), n), [], "{o}");
    }
    assert_eq!(
        events(&mut sub, c, &line(T0 + 2 * S, "STRIKES"), 6),
        [ev("set", "rl:{n}:block"), ev("expire", "rl:{n}:block")]
    );
    assert_eq!(
        events(&mut sub, c, &line(T0 + 3 * S, "RESET"), 7),
        [ev("del", "rl:{n}:block")]
    );
}

/// A block key's TTL is the time left rounded up to a whole millisecond, so that the key
/// never expires before the block ends: a strike 1.999 ms before the end writes a TTL of
/// 2 ms. Read where two TIME replies around the call and PEXPIRETIME fall in one
/// millisecond, so that the server's now is known to the millisecond.
#[test]
fn a_block_keys_ttl_rounds_the_time_left_up() {
    let s = Server::start();
    let c = &mut s.conn();
    let (cmd, args) = LIMITERS[0];
    let end = T0 + S + 300 * S;
    let mut seen = 0;
    for _ in 0..200 {
        let _: () = redis::cmd("FLUSHALL").query(c).unwrap();
        let block = start_block(c, cmd, args, "STRIKES");
        let mut p = redis::pipe();
        p.cmd("TIME");
        let mut call = redis::cmd(cmd);
        for w in format!("{args} BLOCK 300 STRIKES NOW {}", end - 1_999).split(' ') {
            call.arg(w);
        }
        p.add_command(call).ignore();
        p.cmd("PEXPIRETIME").arg(&block).cmd("TIME");
        let (before, at, after): ((u64, u64), i64, (u64, u64)) = p.query(c).unwrap();
        let ms = |t: (u64, u64)| (t.0 * 1000 + t.1 / 1000) as i64;
        if ms(before) != ms(after) || at < 0 {
            continue;
        }
        assert_eq!(
            at - ms(before),
            2,
            "expiry {at} at server ms {}",
            ms(before)
        );
        seen += 1;
        if seen == 5 {
            return;
        }
    }
    panic!("only {seen} readings inside one millisecond");
}
