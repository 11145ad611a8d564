//! RL.SLIDEWINDOW against a real server: Symfony RateLimiter's sliding window, anchored
//! at the first admitted call. SlidingWindowLimiterTest's numbers with NOW stepped as
//! its clock mock sleeps; the stored layout (`GET <key>` = `<end-µs>:<count>:<previous>`,
//! PEXPIRETIME = the end of the window after it); foreign values refused without a
//! write; PEEK, REFUND, RESET; RL.ALL and BLOCK with it; and the effects on a replica
//! without the module and in an AOF reload.
mod common;
use common::workload::server_time_ms;
use common::*;

const S: u64 = 1_000_000;

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pexpiretime(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap()
}

fn server_us(c: &mut Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).unwrap();
    s * 1_000_000 + us
}

/// Symfony's limiter in those tests: 10 per 12 s.
fn consume(c: &mut Connection, key: &str, tokens: u64, now: u64) -> Reply {
    rl(
        c,
        &format!("RL.SLIDEWINDOW {key} 10 12 COST {tokens} NOW {now}"),
    )
}

/// SlidingWindowLimiterTest::testConsume: 8, then 15 s later (25 % into the next
/// window, 8 × 9/12 = 6 still counted) 1 admitted and 5 refused with 3 left, then 13 s
/// later all 10. Each reply's reset is until the end of the window after the
/// current one; the window's end is Symfony's retryAfter.
#[test]
fn symfony_test_consume() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    assert_eq!(consume(&mut c, "rl:sw", 8, t), (1, 2, 0, 24_000));
    assert_eq!(
        get(&mut c, "rl:sw").as_deref(),
        Some(&*format!("{}:8:0", t + 12 * S))
    );
    assert_eq!(consume(&mut c, "rl:sw", 1, t + 15 * S), (1, 3, 0, 21_000));
    let stored = format!("{}:1:8", t + 24 * S);
    assert_eq!(get(&mut c, "rl:sw").as_deref(), Some(&*stored));
    // 1 + 6 + 5 > 10. The 5 fit once 8 × covered / 12 s < 5: 1.500001 s later.
    let before = snapshot(&mut c);
    assert_eq!(
        consume(&mut c, "rl:sw", 5, t + 15 * S),
        (0, 3, 1_501, 21_000)
    );
    assert_eq!(snapshot(&mut c), before, "a denial wrote");
    // A microsecond too early: 8 × 7.5 / 12 = 5 still counted.
    assert_eq!(
        consume(&mut c, "rl:sw", 5, t + 16_500_000),
        (0, 4, 1, 19_500)
    );
    assert_eq!(consume(&mut c, "rl:sw", 10, t + 28 * S), (1, 0, 0, 20_000));
    assert_eq!(
        get(&mut c, "rl:sw").as_deref(),
        Some(&*format!("{}:10:1", t + 36 * S))
    );
}

/// SlidingWindowLimiterTest::testWaitIntervalOnConsumeOverLimit: 8, then 4 refused.
/// Symfony's retryAfter is its window's end, 12 s (reset less a window); the 4 fit
/// only once 8 × (1 − x) < 7 in the next window: 13.5 s and a microsecond.
#[test]
fn symfony_wait_interval_on_consume_over_limit() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    assert_eq!(consume(&mut c, "rl:sw", 8, t).0, 1);
    assert_eq!(consume(&mut c, "rl:sw", 4, t), (0, 2, 13_501, 24_000));
    assert_eq!(
        consume(&mut c, "rl:sw", 4, t + 13_500_001),
        (1, 0, 0, 22_500)
    );
    // A fresh window over one that no longer counts: anchored at this call.
    let later = t + 13_500_001 + 24 * S;
    assert_eq!(consume(&mut c, "rl:sw", 1, later), (1, 9, 0, 24_000));
    assert_eq!(
        get(&mut c, "rl:sw").as_deref(),
        Some(&*format!("{}:1:0", later + 12 * S))
    );
}

/// The key expires when the window after the stored one ends: then nothing it holds
/// counts any more.
#[test]
fn the_key_expires_when_it_stops_counting() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let before = server_time_ms(&mut c);
    consume(&mut c, "rl:sw", 3, t);
    let after = server_time_ms(&mut c);
    let at = pexpiretime(&mut c, "rl:sw");
    assert!(
        (before + 24_000..=after + 24_000).contains(&at),
        "expires at {at}, not now + 24 s ({before}..={after})"
    );
    // In the next window the count becomes the previous one, and the TTL moves on.
    let before = server_time_ms(&mut c);
    assert_eq!(consume(&mut c, "rl:sw", 1, t + 13 * S), (1, 7, 0, 23_000));
    let at = pexpiretime(&mut c, "rl:sw");
    assert!((before + 23_000..=server_time_ms(&mut c) + 23_000).contains(&at));
}

/// What another writer left at the key is refused, never decided on, and nothing is
/// written: not three fields, not decimals, an end or counts beyond what a call writes.
#[test]
fn a_value_that_is_not_a_window_is_refused_and_nothing_changes() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let layout = "ERR limiter key 'rl:x' does not hold a sliding window (<end in unix microseconds up to 2265>:<count>:<previous count>, counts up to 1000000000000000)";
    let end = t + 12 * S;
    for bad in [
        "abc".to_string(),
        "7".to_string(),
        format!("{end}:1"),
        format!("{end}:1:2:3"),
        format!("{end}:1:"),
        format!("{end}:-1:0"),
        format!("{end}:1.5:0"),
        format!(" {end}:1:0"),
        "9400000000000000:1:0".to_string(),
        format!("{end}:1000000000000001:0"),
        format!("{end}:0:1000000000000001"),
    ] {
        let _: () = redis::cmd("SET")
            .arg("rl:x")
            .arg(&bad)
            .query(&mut c)
            .unwrap();
        let before = snapshot(&mut c);
        for mode in ["", " PEEK", " REFUND"] {
            let line = format!("RL.SLIDEWINDOW rl:x 10 12 NOW {t}{mode}");
            assert_eq!(err_line(&mut c, &line), layout, "{bad:?}{mode}");
        }
        assert_eq!(snapshot(&mut c), before, "{bad:?}: a refused call wrote");
    }
    // The largest values a call writes are read back.
    let _: () = redis::cmd("SET")
        .arg("rl:x")
        .arg("9322559254740991:1000000000000000:1000000000000000")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        rl(&mut c, &format!("RL.SLIDEWINDOW rl:x 10 12 NOW {t}")).0,
        0
    );
    let _: () = redis::cmd("LPUSH")
        .arg("rl:l")
        .arg(1)
        .query(&mut c)
        .unwrap();
    assert!(
        err_line(&mut c, &format!("RL.SLIDEWINDOW rl:l 3 10 NOW {t}")).starts_with("WRONGTYPE")
    );
    let before = snapshot(&mut c);
    for (line, error) in [
        (
            "RL.SLIDEWINDOW rl:n 0 10".to_string(),
            "limit must be a positive integer",
        ),
        ("RL.SLIDEWINDOW rl:n 3 10 BURST 2".to_string(), "BURST"),
        (
            format!("RL.SLIDEWINDOW rl:n 3 10 NOW {t} RENEW"),
            "RENEW is only accepted by RL.COUNTER",
        ),
        (format!("RL.SLIDEWINDOW rl:n 3 10 COST 0 NOW {t}"), "COST"),
    ] {
        let got = err_line(&mut c, &line);
        assert!(
            got.starts_with("ERR ") && got.contains(error),
            "{line}: {got}"
        );
    }
    assert_eq!(snapshot(&mut c), before, "a refused call wrote");
}

/// PEEK writes nothing; REFUND gives back the current window's units only; RESET
/// deletes the key. Each replies what the request would get, with the state's reset.
#[test]
fn peek_refund_and_reset() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let line = |now: u64, rest: &str| format!("RL.SLIDEWINDOW rl:p 10 12 NOW {now}{rest}");
    assert_eq!(rl(&mut c, &line(t, " PEEK")), (1, 9, 0, 0));
    assert_eq!(get(&mut c, "rl:p"), None, "a PEEK on nothing wrote");
    assert_eq!(rl(&mut c, &line(t, " COST 3")), (1, 7, 0, 24_000));
    let before = snapshot(&mut c);
    assert_eq!(rl(&mut c, &line(t + S, " COST 2 PEEK")), (1, 5, 0, 23_000));
    assert_eq!(rl(&mut c, &line(t + S, " COST 8 PEEK")).0, 0);
    assert_eq!(snapshot(&mut c), before, "a PEEK wrote");
    let end = t + 12 * S;
    assert_eq!(
        rl(&mut c, &line(t + S, " COST 2 REFUND")),
        (1, 7, 0, 23_000)
    );
    assert_eq!(get(&mut c, "rl:p").as_deref(), Some(&*format!("{end}:1:0")));
    // In the next window the unit left is its previous count: nothing to give back.
    let before = snapshot(&mut c);
    assert_eq!(rl(&mut c, &line(end + 6 * S, " REFUND")).0, 1);
    assert_eq!(snapshot(&mut c), before, "a REFUND of a past window wrote");
    assert_eq!(rl(&mut c, &line(t + S, " RESET")), (1, 9, 0, 0));
    assert_eq!(get(&mut c, "rl:p"), None, "RESET left the key");
}

/// RL.ALL names it as SLIDEWINDOW: a denial by it spends on no limit. With BLOCK its
/// denial starts a block, which clears its key.
#[test]
fn rl_all_and_block_take_it() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let all = |now: u64| format!("RL.ALL 2 SLIDEWINDOW {{u}}:w 2 12 FIXED {{u}}:f 5 10 NOW {now}");
    let ints = |c: &mut Connection, line: &str| -> (i64, i64, i64, i64, Vec<Vec<i64>>) {
        query_line(c, line)
            .and_then(|v| redis::from_redis_value(&v))
            .unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    let r = ints(&mut c, &all(t));
    assert_eq!(r.4[0], vec![1, 1, 0, 24_000]);
    assert_eq!(ints(&mut c, &all(t + 1)).0, 1);
    let before = snapshot(&mut c);
    let r = ints(&mut c, &all(t + 2));
    assert_eq!((r.0, r.2), (0, 12_000));
    assert_eq!(r.4[0][0], 0);
    assert_eq!(snapshot(&mut c), before, "a denied RL.ALL wrote");

    let b = |now: u64| format!("RL.SLIDEWINDOW {{b}}:w 1 12 BLOCK 60 NOW {now}");
    assert_eq!(rl(&mut c, &b(t)).0, 1);
    assert_eq!(rl(&mut c, &b(t + 1)), (0, 0, 60_000, 60_000));
    assert_eq!(
        get(&mut c, "{b}:w"),
        None,
        "the block did not clear the window"
    );
    assert!(get(&mut c, "{b}:w:block").is_some());
    // The block over, the budget is back: a window anchored at that call.
    assert_eq!(rl(&mut c, &b(t + 60_000_001)), (1, 0, 0, 24_000));
}

/// Every kind of write (a new window, a count, the next window, a fresh one over a
/// forgotten one, refund, reset, a block) reaches a replica without the module and an
/// AOF reload as the same values and expiry instants.
#[test]
fn replicas_and_the_aof_get_the_effects() {
    let (primary, replica) = primary_with_aof_and_replica();
    let mut p = primary.conn();
    let t = server_us(&mut p);
    let line = |key: &str, now: u64, rest: &str| {
        format!("RL.SLIDEWINDOW rl:{{r}}:{key} 2 12 NOW {now}{rest}")
    };
    for l in [
        line("a", t, ""),
        line("a", t + 1, ""),
        line("a", t + 2, ""),
        line("a", t + 13 * S, ""),
        line("b", t, " COST 2"),
        line("b", t + 40 * S, ""),
        line("c", t, " COST 2"),
        line("c", t + 1, " REFUND"),
        line("d", t, ""),
        line("d", t + 1, " RESET"),
        line("e", t, " BLOCK 30"),
        line("e", t + 1, " BLOCK 30 COST 2"),
    ] {
        rl(&mut p, &l);
    }
    let expected = same_on_the_replica_and_after_loadaof(&mut p, &replica);
    // The snapshot holds DUMPs: the values as stored, read with GET.
    let state: Vec<(String, Option<String>)> = expected
        .iter()
        .map(|(k, _, _)| {
            let k = String::from_utf8_lossy(k).into_owned();
            (k.clone(), get(&mut p, &k))
        })
        .collect();
    let at = |end: u64, count: u64, previous: u64| Some(format!("{end}:{count}:{previous}"));
    assert_eq!(state.len(), 4, "{state:?}");
    assert_eq!(
        state,
        [
            ("rl:{r}:a".to_string(), at(t + 24 * S, 1, 2)),
            ("rl:{r}:b".to_string(), at(t + 52 * S, 1, 0)),
            ("rl:{r}:c".to_string(), at(t + 12 * S, 1, 0)),
            (
                "rl:{r}:e:block".to_string(),
                Some((t + 1 + 30 * S).to_string())
            ),
        ]
    );
}
