//! Many clients, one hot key: 50 connections (one thread each) fire 2,000 requests
//! apiece, pipelined in batches of 100, at a single limiter key with a budget of
//! 1,000. Every call decides at the same fixed NOW with a long window, so time never
//! refills the budget and the exact outcome is known in advance:
//!
//! - RL.SLIDELOG, RL.FIXED and RL.GCRA (BURST = limit) admit exactly 1,000 in total,
//!   each admission sees a different `remaining` (1,000 distinct check-and-updates,
//!   none lost or doubled), and the stored state agrees (ZCARD, counter, TAT).
//! - RL.SLIDECOUNT never admits more than the limit; with a previous window weighing
//!   in, it admits exactly what its estimate leaves.
//! - `INFO rl` counted every call, admission and denial.
mod common;
use common::*;

use std::sync::{Arc, Barrier};

const CLIENTS: usize = 50;
const REQUESTS: usize = 2_000;
const BATCH: usize = 100;
const LIMIT: i64 = 1_000;
const TOTAL: i64 = (CLIENTS * REQUESTS) as i64;

/// Ten minutes: T0 is a multiple of it, so NOW below sits inside one window.
const WINDOW_S: u64 = 600;
const WINDOW_US: u64 = WINDOW_S * 1_000_000;

/// Every reply of every client, after all clients started together.
fn hammer(server: &Server, line: &str) -> Vec<Reply> {
    let mut cmd = redis::Cmd::new();
    for word in line.split_whitespace() {
        cmd.arg(word);
    }
    let start = Arc::new(Barrier::new(CLIENTS));
    let handles: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = server.conn();
            let cmd = cmd.clone();
            let start = Arc::clone(&start);
            std::thread::spawn(move || {
                let mut replies = Vec::with_capacity(REQUESTS);
                start.wait();
                for _ in 0..REQUESTS / BATCH {
                    let mut pipe = redis::pipe();
                    for _ in 0..BATCH {
                        pipe.add_command(cmd.clone());
                    }
                    let batch: Vec<Reply> = pipe.query(&mut c).expect("pipeline");
                    assert_eq!(batch.len(), BATCH);
                    replies.extend(batch);
                }
                replies
            })
        })
        .collect();
    let replies: Vec<Reply> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("client thread"))
        .collect();
    assert_eq!(replies.len() as i64, TOTAL);
    replies
}

/// Checks the replies of one run: `admitted` admissions, each with its own
/// `remaining` (admission k of n leaves n - k), denials spending nothing and saying
/// when to retry. Returns the number admitted.
fn check_replies(what: &str, replies: &[Reply], admitted: i64) -> i64 {
    let allowed: Vec<&Reply> = replies.iter().filter(|r| r.0 == 1).collect();
    for r in replies {
        assert!(r.0 == 0 || r.0 == 1, "{what}: {r:?}");
        if r.0 == 0 {
            assert_eq!(r.1, 0, "{what}: a denial with budget left: {r:?}");
            assert!(r.2 > 0, "{what}: a denial without a retry time: {r:?}");
        } else {
            assert_eq!(r.2, 0, "{what}: {r:?}");
        }
    }
    assert!(
        allowed.len() as i64 <= LIMIT,
        "{what}: {} admitted over a limit of {LIMIT}",
        allowed.len()
    );
    assert_eq!(allowed.len() as i64, admitted, "{what}: admitted");
    let mut remaining: Vec<i64> = allowed.iter().map(|r| r.1).collect();
    remaining.sort_unstable();
    assert!(
        remaining.iter().copied().eq(0..admitted),
        "{what}: admissions did not each see their own count: {:?}…",
        &remaining[..remaining.len().min(20)]
    );
    allowed.len() as i64
}

/// The `rl_<command>_<field>` counters of `INFO rl`.
fn info_counters(c: &mut Connection, command: &str) -> [i64; 3] {
    let info: String = redis::cmd("INFO").arg("rl").query(c).unwrap();
    let field = |name: &str| -> i64 {
        let prefix = format!("rl_{command}_{name}:");
        info.lines()
            .find_map(|l| l.trim().strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {prefix} in INFO rl:\n{info}"))
            .parse()
            .unwrap()
    };
    [field("calls"), field("allowed"), field("denied")]
}

fn get(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

#[test]
fn slidelog_admits_exactly_its_limit() {
    let s = Server::start();
    let key = "rl:hot:log";
    let now = T0 + 1_234_567;
    let replies = hammer(
        &s,
        &format!("RL.SLIDELOG {key} {LIMIT} {WINDOW_S} NOW {now}"),
    );
    check_replies("RL.SLIDELOG", &replies, LIMIT);
    let mut c = s.conn();
    let zcard: i64 = redis::cmd("ZCARD").arg(key).query(&mut c).unwrap();
    assert_eq!(zcard, LIMIT, "one member per admitted request");
    let at_now: i64 = redis::cmd("ZCOUNT")
        .arg(key)
        .arg(now)
        .arg(now)
        .query(&mut c)
        .unwrap();
    assert_eq!(at_now, LIMIT, "every member scored at NOW");
    assert_eq!(
        info_counters(&mut c, "slidelog"),
        [TOTAL, LIMIT, TOTAL - LIMIT]
    );
}

#[test]
fn fixed_admits_exactly_its_limit() {
    let s = Server::start();
    let key = "rl:hot:fixed";
    let now = T0 + 1_234_567;
    let replies = hammer(&s, &format!("RL.FIXED {key} {LIMIT} {WINDOW_S} NOW {now}"));
    check_replies("RL.FIXED", &replies, LIMIT);
    let mut c = s.conn();
    let start_s = (now - now % WINDOW_US) / 1_000_000;
    assert_eq!(get(&mut c, &format!("{key}:{start_s}")), LIMIT);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys, [format!("{key}:{start_s}")]);
    assert_eq!(
        info_counters(&mut c, "fixed"),
        [TOTAL, LIMIT, TOTAL - LIMIT]
    );
}

#[test]
fn gcra_admits_exactly_its_burst() {
    let s = Server::start();
    let key = "rl:hot:gcra";
    let now = T0 + 1_234_567;
    let replies = hammer(
        &s,
        &format!("RL.GCRA {key} {LIMIT} {WINDOW_S} BURST {LIMIT} NOW {now}"),
    );
    check_replies("RL.GCRA", &replies, LIMIT);
    let mut c = s.conn();
    // LIMIT admissions of one emission interval (WINDOW / LIMIT) each.
    assert_eq!(get(&mut c, key), (now + WINDOW_US) as i64, "the TAT");
    assert_eq!(info_counters(&mut c, "gcra"), [TOTAL, LIMIT, TOTAL - LIMIT]);
}

#[test]
fn slidecount_never_admits_more_than_its_limit() {
    let s = Server::start();
    let key = "rl:hot:count";
    let mut c = s.conn();
    // Three quarters into window i, with 600 in window i-1: the estimate starts at
    // floor(600 × 1/4) = 150, leaving exactly 850 of the 1,000.
    let now = T0 + 3 * WINDOW_US / 4;
    let i = now / WINDOW_US;
    let () = redis::cmd("SET")
        .arg(format!("{key}:{}", i - 1))
        .arg(600)
        .query(&mut c)
        .unwrap();
    let expected = LIMIT - 150;
    let replies = hammer(
        &s,
        &format!("RL.SLIDECOUNT {key} {LIMIT} {WINDOW_S} NOW {now}"),
    );
    check_replies("RL.SLIDECOUNT", &replies, expected);
    assert_eq!(get(&mut c, &format!("{key}:{i}")), expected);
    assert_eq!(get(&mut c, &format!("{key}:{}", i - 1)), 600, "untouched");
    assert_eq!(
        info_counters(&mut c, "slidecount"),
        [TOTAL, expected, TOTAL - expected]
    );
}
