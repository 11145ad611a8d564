//! RL.SLIDELOG on logs far larger than its own limits allow: what a script (no size
//! cap), a caller with a larger limit on a shared key, or a hand-made key left there.
//! Every call stays exact; the denial finds the entry whose leaving admits the request
//! by its rank (O(log n)) instead of walking to it, and at most 1,000 expired entries
//! are removed per call. (How long such a call takes is measured by
//! `tools/worst_case.sh`, not asserted here.)
mod common;
use common::*;

const MEMBERS: u64 = 1_000_000;
const WINDOW_US: u64 = 60_000_000;

/// A log of `n` entries one µs apart from `first`, `<score>:<8 hex>` as the layout has
/// them, added with pipelined ZADDs.
fn fill(c: &mut Connection, key: &str, first: u64, n: u64) {
    let mut pipe = redis::pipe();
    let batch = 10_000;
    for start in (0..n).step_by(batch) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(key);
        for k in start..(start + batch as u64).min(n) {
            let t = first + k;
            cmd.arg(t).arg(format!("{t}:{:08x}", k));
        }
        pipe.add_command(cmd).ignore();
    }
    pipe.query::<()>(c).expect("ZADD");
    let card: u64 = redis::cmd("ZCARD").arg(key).query(c).unwrap();
    assert_eq!(card, n);
}

#[test]
fn a_denial_on_a_million_entry_log_is_exact() {
    let s = Server::start();
    let mut c = s.conn();
    fill(&mut c, "big", T0, MEMBERS);
    let now = T0 + MEMBERS;

    // A limit of 1 on a full log: the request fits only once every entry has left, the
    // newest at T0 + 999,999 µs + 60 s.
    let newest_leaves = T0 + MEMBERS - 1 + WINDOW_US;
    let d = rl(&mut c, &format!("RL.SLIDELOG big 1 60 NOW {now}"));
    assert_eq!(
        d,
        (0, 0, (newest_leaves - now).div_ceil(1000) as i64, 60_000)
    );

    // Half the log must leave: the 500,000th oldest entry's exit admits the request.
    let limit = MEMBERS / 2 + 1;
    let leaves = T0 + MEMBERS / 2 - 1 + WINDOW_US;
    let retry = (leaves - now).div_ceil(1000) as i64;
    for mode in ["PEEK", ""] {
        let d = rl(
            &mut c,
            &format!("RL.SLIDELOG big {limit} 60 NOW {now} {mode}"),
        );
        assert_eq!((d.0, d.1, d.2), (0, 0, retry), "{mode}");
        // Exact to the millisecond: denied 1 ms before, admitted at the retry time.
        let before = now + retry as u64 * 1000 - 1000;
        let d = rl(
            &mut c,
            &format!("RL.SLIDELOG big {limit} 60 NOW {before} PEEK"),
        );
        assert_eq!(d.0, 0);
        let at = now + retry as u64 * 1000;
        let d = rl(&mut c, &format!("RL.SLIDELOG big {limit} 60 NOW {at} PEEK"));
        assert_eq!(d.0, 1);
    }
    // A costlier request waits for more entries (COST 7: 6 more must leave).
    let d = rl(
        &mut c,
        &format!("RL.SLIDELOG big {limit} 60 NOW {now} COST 7 PEEK"),
    );
    assert_eq!(d.2, (leaves + 6 - now).div_ceil(1000) as i64);
}

#[test]
fn expired_entries_before_the_window_do_not_shift_the_rank() {
    let s = Server::start();
    let mut c = s.conn();
    // 300,000 entries that have left the window, then 700,000 inside it.
    let expired = 300_000;
    fill(&mut c, "mixed", T0, MEMBERS);
    // At `now` the entries at or below now - 60 s (T0 + 299,999 µs) are out.
    let now = T0 + expired - 1 + WINDOW_US;
    let inside = MEMBERS - expired;

    // PEEK counts only what is inside, and removes nothing.
    let limit = inside + 1;
    let d = rl(
        &mut c,
        &format!("RL.SLIDELOG mixed {limit} 60 NOW {now} COST 2 PEEK"),
    );
    // One of the inside entries must leave: the oldest inside, at T0 + 300,000 µs,
    // which leaves 1 µs from now.
    assert_eq!((d.0, d.1, d.2), (0, 1, 1));
    let card: u64 = redis::cmd("ZCARD").arg("mixed").query(&mut c).unwrap();
    assert_eq!(card, MEMBERS);

    // A real call removes a bounded batch of the expired entries and decides the same.
    let real = rl(
        &mut c,
        &format!("RL.SLIDELOG mixed {limit} 60 NOW {now} COST 2"),
    );
    assert_eq!((real.0, real.1, real.2), (d.0, d.1, d.2));
    let card: u64 = redis::cmd("ZCARD").arg("mixed").query(&mut c).unwrap();
    assert_eq!(card, MEMBERS - 1_000);
}

/// `INFO commandstats` field `field` (calls, usec) of `command`, 0 if never called.
fn command_stat(c: &mut Connection, command: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).unwrap();
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|stats| {
            stats.split(',').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k == field).then(|| v.parse().ok())?
            })
        })
        .unwrap_or(0)
}

/// The libraries' stores take any cost up to the limit (limits' moving window pushes
/// one list entry per unit): COST 999,999 on a limit of 1,000,000 adds 999,999
/// members at once, the next unit fits and the one after is denied; a REFUND takes
/// 999,999 back. A replica without the module receives the members as ZADDs (and the
/// REFUND as ZREMs) of at most 1,000 each and ends with the same log. The call's time
/// on the server is printed, not asserted.
#[test]
fn a_cost_up_to_the_limit_is_admitted_and_replicated_in_batches() {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let replica = Server::start_without_module(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &replica);
    let mut c = primary.conn();
    let mut r = replica.conn();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(&mut c).unwrap();

    let log = "RL.SLIDELOG huge 1000000 60";
    let d = rl(&mut c, &format!("{log} COST 999999 NOW {T0}"));
    assert_eq!(d, (1, 1, 0, 60_000));
    let usec = command_stat(&mut c, "rl.slidelog", "usec");
    println!("RL.SLIDELOG COST 999999: {usec} µs on the server");
    let card = |c: &mut Connection| -> u64 { redis::cmd("ZCARD").arg("huge").query(c).unwrap() };
    assert_eq!(card(&mut c), 999_999);
    let at_t0: u64 = redis::cmd("ZCOUNT")
        .arg("huge")
        .arg(T0)
        .arg(T0)
        .query(&mut c)
        .unwrap();
    assert_eq!(at_t0, 999_999);

    // The last unit fits once; the next waits for the 999,999 to leave, 60 s after T0.
    assert_eq!(
        rl(&mut c, &format!("{log} NOW {}", T0 + 1)),
        (1, 0, 0, 60_000)
    );
    assert_eq!(
        rl(&mut c, &format!("{log} NOW {}", T0 + 2)),
        (0, 0, 60_000, 60_000)
    );
    assert_eq!(card(&mut c), 1_000_000);

    wait_replicas(&mut c);
    assert_eq!(card(&mut r), 1_000_000);
    let members = |c: &mut Connection| -> Vec<(String, u64)> {
        redis::cmd("ZRANGE")
            .arg("huge")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .unwrap()
    };
    assert!(
        members(&mut c) == members(&mut r),
        "the replica's log differs"
    );
    // 1,000 ZADDs for the 999,999 (999 of 1,000 and one of 999), one for the last unit.
    assert_eq!(command_stat(&mut r, "zadd", "calls"), 1_001);

    // A REFUND of the 999,999 removes the newest 999,999 (one of them the last unit's,
    // at T0 + 1), reaching the replica as 1,000 ZREMs.
    let d = rl(&mut c, &format!("{log} COST 999999 NOW {} REFUND", T0 + 3));
    assert_eq!((d.0, d.1), (1, 0));
    assert_eq!(card(&mut c), 1);
    wait_replicas(&mut c);
    assert!(
        members(&mut c) == members(&mut r),
        "the replica's log differs"
    );
    assert_eq!(command_stat(&mut r, "zrem", "calls"), 1_000);
}

fn wait_replicas(c: &mut Connection) {
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(30_000).query(c).unwrap();
    assert_eq!(acked, 1, "the replica did not acknowledge within 30 s");
}
