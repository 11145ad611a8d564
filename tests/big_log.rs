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
