//! The documented limits (README "Commands" and "Choices where the spec is silent"),
//! at the edge and one past it: `limit` and `COST`/`BURST` up to 10^15 (RL.SLIDELOG:
//! limit 1,000,000 and COST 1,000), windows up to ten years, NOW from 1973 to 2^53 − 1.
//! At the edge a call works with exact integer arithmetic; one past it is a clear
//! `ERR` that writes nothing.
//!
//! And RL.SLIDELOG's bounded trimming: a call removes at most 1,000 expired members,
//! yet decides on the exact in-window count; later calls finish the job; a Lua-script
//! call on a half-trimmed log agrees; replicas end byte-identical.
mod common;
use common::*;

const E15: u64 = 1_000_000_000_000_000;
const TEN_YEARS_S: u64 = 315_360_000;
const TEN_YEARS_MS: i64 = 315_360_000_000;
const MAX_NOW: u64 = (1 << 53) - 1;
const TRIM_BATCH: u64 = 1_000;

const COUNTERS: [&str; 3] = ["RL.FIXED", "RL.SLIDECOUNT", "RL.GCRA"];
const ALL: [&str; 4] = ["RL.SLIDELOG", "RL.FIXED", "RL.SLIDECOUNT", "RL.GCRA"];

/// Asserts that `line` fails with `expected` and leaves every key as it was.
fn refused(c: &mut Connection, line: &str, expected: &str) {
    let before = snapshot(c);
    assert_eq!(err_line(c, line), expected, "{line}");
    assert_eq!(snapshot(c), before, "{line} changed something");
}

fn pttl(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(c).unwrap()
}

fn zcard(c: &mut Connection, key: &str) -> u64 {
    redis::cmd("ZCARD").arg(key).query(c).unwrap()
}

fn zcount(c: &mut Connection, key: &str, min: &str, max: &str) -> u64 {
    redis::cmd("ZCOUNT")
        .arg(key)
        .arg(min)
        .arg(max)
        .query(c)
        .unwrap()
}

fn get(c: &mut Connection, key: &str) -> Option<u64> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

/// Runs `lines` in one MULTI/EXEC: no key expires between them (Redis fixes the
/// expiry clock for the transaction), whatever NOW says.
fn atomic(c: &mut Connection, lines: &[String]) -> Vec<Reply> {
    let mut p = redis::pipe();
    p.atomic();
    for line in lines {
        let cmd = p.cmd(line.split_whitespace().next().unwrap());
        for w in line.split_whitespace().skip(1) {
            cmd.arg(w);
        }
    }
    p.query(c).unwrap_or_else(|e| panic!("{lines:?}: {e}"))
}

// ---------------------------------------------------------------------------------
// Amounts

#[test]
fn limit_cost_and_burst_up_to_ten_to_the_fifteen() {
    let s = Server::start();
    let mut c = s.conn();
    let now = T0 + 1;
    let too_big_limit = format!("ERR limit must be a positive integer no larger than {E15}");
    let too_big_cost = format!("ERR COST must be a positive integer no larger than {E15}");
    let too_big_burst = format!("ERR BURST must be a positive integer no larger than {E15}");
    for cmd in COUNTERS {
        let key = format!("rl:amount:{cmd}");
        // The largest limit: one unit spent, the rest remains. RL.GCRA allows at most
        // one unit per µs (see gcra_refuses_rates_above_one_per_microsecond), so its
        // largest limit is the window in µs.
        let edge = format!("rl:edge:{cmd}");
        let limit = if cmd == "RL.GCRA" {
            TEN_YEARS_S * 1_000_000
        } else {
            E15
        };
        let r = rl(
            &mut c,
            &format!("{cmd} {edge} {limit} {TEN_YEARS_S} NOW {now}"),
        );
        // Back to the full budget: FIXED when its ten-year window ends; SLIDECOUNT
        // 1 µs into the next one (the unit then weighs floor(1 × (w − 1) / w) = 0);
        // GCRA once its TAT, one 1 µs interval ahead, is reached. In ms, rounded up.
        let w = TEN_YEARS_S * 1_000_000;
        let window_end = (now / w + 1) * w;
        let reset_us = match cmd {
            "RL.FIXED" => window_end - now,
            "RL.SLIDECOUNT" => window_end - now + 1,
            _ => 1,
        };
        let reset_ms = reset_us.div_ceil(1000) as i64;
        assert!(reset_ms > 0);
        assert_eq!(r, (1, limit as i64 - 1, 0, reset_ms), "{cmd}");
        // (The GCRA TAT is 1 µs ahead, so the key lives 1 ms: drop it now rather
        // than have it expire between the snapshots below.)
        redis::cmd("DEL").arg(&edge).query::<()>(&mut c).unwrap();
        refused(
            &mut c,
            &format!("{cmd} {key} {} 10 NOW {now}", E15 + 1),
            &too_big_limit,
        );
        refused(
            &mut c,
            &format!("{cmd} {key} {} 10 NOW {now}", u64::MAX),
            &too_big_limit,
        );
        refused(
            &mut c,
            &format!("{cmd} {key} 10 10 COST {} NOW {now}", E15 + 1),
            &too_big_cost,
        );
        refused(
            &mut c,
            &format!("{cmd} {key} 10 10 COST 18446744073709551616 NOW {now}"),
            &too_big_cost,
        );
        // The largest cost is a valid request: never admissible under a smaller
        // budget (retry -1), admitted when the budget is the largest.
        let r = rl(
            &mut c,
            &format!("{cmd} rl:c:{cmd} 10 10 COST {E15} NOW {now}"),
        );
        assert_eq!((r.0, r.2), (0, -1), "{cmd}");
    }
    // FIXED and SLIDECOUNT counters hold the largest cost exactly, and refuse more.
    for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
        let key = format!("rl:full:{cmd}");
        let line = format!("{cmd} {key} {E15} {TEN_YEARS_S} COST {E15} NOW {now}");
        assert_eq!(rl(&mut c, &line).0, 1, "{line}");
        let r = rl(
            &mut c,
            &format!("{cmd} {key} {E15} {TEN_YEARS_S} NOW {now}"),
        );
        assert_eq!((r.0, r.1), (0, 0), "{cmd}");
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{key}:*"))
            .query(&mut c)
            .unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert_eq!(get(&mut c, &keys[0]), Some(E15), "{cmd}");
    }
    // BURST: the largest is accepted (GCRA with rate 1 per 10 years), one more is not.
    let r = rl(
        &mut c,
        &format!("RL.GCRA rl:burst 1 {TEN_YEARS_S} BURST {E15} NOW {now}"),
    );
    assert_eq!((r.0, r.1), (1, (E15 - 1) as i64));
    refused(
        &mut c,
        &format!("RL.GCRA rl:burst 1 10 BURST {} NOW {now}", E15 + 1),
        &too_big_burst,
    );
    refused(
        &mut c,
        &format!("RL.GCRA rl:burst 1 10 BURST 0 NOW {now}"),
        &too_big_burst,
    );
    // A TAT that would not fit in a signed 64-bit integer is an error, not a wrap.
    let line = format!("RL.GCRA rl:tat 1 {TEN_YEARS_S} BURST {E15} COST {E15} NOW {MAX_NOW}");
    let before = snapshot(&mut c);
    let e = err_line(&mut c, &line);
    assert!(
        e.starts_with("ERR ") && e.contains("overflow"),
        "{line}: {e}"
    );
    assert_eq!(snapshot(&mut c), before);
}

/// RL.SLIDECOUNT's integer estimate is exact at the largest numbers: with 10^15 in
/// the previous ten-year window and 1 µs into the next one, the estimate is
/// floor(10^15 × (W − 1) / W) = 10^15 − 4, so COST 4 fits and COST 5 does not (a float
/// ratio would round this away).
#[test]
fn slidecount_estimate_is_exact_at_the_largest_numbers() {
    let s = Server::start();
    let mut c = s.conn();
    let w = TEN_YEARS_S * 1_000_000;
    let i = T0 / w;
    let previous = i * w + 5;
    let next = (i + 1) * w + 1;
    let estimate = u64::try_from(u128::from(E15) * u128::from(w - 1) / u128::from(w)).unwrap();
    assert_eq!(estimate, E15 - 4);
    let base = format!("RL.SLIDECOUNT rl:sc {E15} {TEN_YEARS_S}");
    assert_eq!(
        rl(&mut c, &format!("{base} COST {E15} NOW {previous}")).0,
        1
    );
    let r = rl(&mut c, &format!("{base} COST 5 NOW {next} PEEK"));
    assert_eq!((r.0, r.1), (0, 4));
    let r = rl(&mut c, &format!("{base} COST 4 NOW {next}"));
    assert_eq!((r.0, r.1, r.2), (1, 0, 0));
    assert_eq!(get(&mut c, &format!("rl:sc:{}", i + 1)), Some(4));
}

#[test]
fn slidelog_limit_and_cost_bounds() {
    let s = Server::start();
    let mut c = s.conn();
    let now = T0 + 7;
    refused(
        &mut c,
        &format!("RL.SLIDELOG rl:log 1000001 10 NOW {now}"),
        "ERR limit must be a positive integer no larger than 1000000",
    );
    refused(
        &mut c,
        &format!("RL.SLIDELOG rl:log 1000001 10 NOW {now} PEEK"),
        "ERR limit must be a positive integer no larger than 1000000",
    );
    refused(
        &mut c,
        &format!("RL.SLIDELOG rl:log 10 10 COST 1000001 NOW {now}"),
        "ERR COST must be a positive integer no larger than 1000000",
    );
    refused(
        &mut c,
        &format!("RL.SLIDELOG rl:log 1000000 10 COST 1000001 NOW {now} PEEK"),
        "ERR COST must be a positive integer no larger than 1000000",
    );
    // A COST above the limit but within the bound never fits, and writes nothing.
    let r = rl(
        &mut c,
        &format!("RL.SLIDELOG rl:log 10 10 COST 1000000 NOW {now}"),
    );
    assert_eq!((r.0, r.1, r.2, r.3), (0, 10, -1, 0));
    assert_eq!(zcard(&mut c, "rl:log"), 0);
    // COST 1,000 adds 1,000 distinct members at once.
    let r = rl(
        &mut c,
        &format!("RL.SLIDELOG rl:log 1000000 10 COST 1000 NOW {now}"),
    );
    assert_eq!((r.0, r.1, r.2, r.3), (1, 999_000, 0, 10_000));
    assert_eq!(zcard(&mut c, "rl:log"), 1000);
    assert_eq!(
        zcount(&mut c, "rl:log", &now.to_string(), &now.to_string()),
        1000
    );
}

/// The largest log is reachable: 1,000 calls of COST 1,000 fill it to exactly
/// 1,000,000 members, the next unit is denied, and once the window has passed a call
/// trims only 1,000 of them yet is admitted (nothing is in the window).
#[test]
fn slidelog_of_a_million_members() {
    let s = Server::start();
    let mut c = s.conn();
    let mut p = redis::pipe();
    for k in 0..1000u64 {
        p.cmd("RL.SLIDELOG")
            .arg("rl:million")
            .arg(1_000_000)
            .arg(600)
            .arg("COST")
            .arg(1000)
            .arg("NOW")
            .arg(T0 + k);
    }
    let replies: Vec<Reply> = p.query(&mut c).unwrap();
    assert!(replies.iter().all(|r| r.0 == 1), "a fill call was denied");
    assert_eq!(replies.last().unwrap().1, 0);
    assert_eq!(zcard(&mut c, "rl:million"), 1_000_000);
    let r = rl(
        &mut c,
        &format!("RL.SLIDELOG rl:million 1000000 600 NOW {}", T0 + 1000),
    );
    // Denied; the wait is until the oldest member (at T0) leaves: 600 s - 1 ms.
    assert_eq!((r.0, r.1, r.2), (0, 0, 599_999));
    let after = T0 + 600_000_000 + 999;
    let r = rl(&mut c, &format!("RL.SLIDELOG rl:million 1 600 NOW {after}"));
    assert_eq!((r.0, r.1, r.2), (1, 0, 0));
    assert_eq!(zcard(&mut c, "rl:million"), 1_000_000 - TRIM_BATCH + 1);
}

// ---------------------------------------------------------------------------------
// Windows and NOW

#[test]
fn windows_up_to_ten_years() {
    let s = Server::start();
    let mut c = s.conn();
    let too_long = format!(
        "ERR window must be a positive duration such as 60, 60s or 1500ms, at most {TEN_YEARS_MS}ms"
    );
    let now = T0 + 3;
    for cmd in ALL {
        for (n, window) in [
            format!("{TEN_YEARS_S}"),
            format!("{TEN_YEARS_S}s"),
            format!("{TEN_YEARS_MS}ms"),
        ]
        .iter()
        .enumerate()
        {
            let key = format!("rl:w:{cmd}:{n}");
            let r = rl(&mut c, &format!("{cmd} {key} 1 {window} NOW {now}"));
            assert_eq!((r.0, r.1, r.2), (1, 0, 0), "{cmd} {window}");
            if cmd == "RL.SLIDELOG" || cmd == "RL.GCRA" {
                // Back to the full budget when this unit leaves: a whole window.
                assert_eq!(r.3, TEN_YEARS_MS, "{cmd} {window}");
            }
        }
        for window in [
            format!("{}", TEN_YEARS_S + 1),
            format!("{}s", TEN_YEARS_S + 1),
            format!("{}ms", TEN_YEARS_MS + 1),
            "18446744073709551615s".to_string(),
        ] {
            refused(
                &mut c,
                &format!("{cmd} rl:w:{cmd}:0 1 {window} NOW {now}"),
                &too_long,
            );
        }
    }
    // The TTLs are the documented ones, ten years out (twenty for counters), measured
    // on the server clock.
    let tolerance = 60_000;
    let log = pttl(&mut c, "rl:w:RL.SLIDELOG:0");
    assert!((log - TEN_YEARS_MS).abs() < tolerance, "{log}");
    let tat = pttl(&mut c, "rl:w:RL.GCRA:0");
    assert!((tat - TEN_YEARS_MS).abs() < tolerance, "{tat}");
    for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("rl:w:{cmd}:0:*"))
            .query(&mut c)
            .unwrap();
        assert_eq!(keys.len(), 1, "{keys:?}");
        let t = pttl(&mut c, &keys[0]);
        assert!((t - 2 * TEN_YEARS_MS).abs() < tolerance, "{cmd}: {t}");
    }
}

#[test]
fn now_from_1973_to_two_to_the_fifty_three() {
    let s = Server::start();
    let mut c = s.conn();
    let min = 94_694_400_000_000u64;
    for cmd in ALL {
        for now in [min, MAX_NOW] {
            let key = format!("rl:now:{cmd}:{now}");
            let r = rl(&mut c, &format!("{cmd} {key} 5 {TEN_YEARS_S} NOW {now}"));
            assert_eq!((r.0, r.1, r.2), (1, 4, 0), "{cmd} NOW {now}");
        }
        refused(
            &mut c,
            &format!("{cmd} rl:now 5 10 NOW {}", MAX_NOW + 1),
            "ERR NOW must be unix time in microseconds between 1973 and 2255",
        );
        refused(
            &mut c,
            &format!("{cmd} rl:now 5 10 NOW {}", u64::MAX),
            "ERR NOW must be unix time in microseconds between 1973 and 2255",
        );
        refused(
            &mut c,
            &format!("{cmd} rl:now 5 10 NOW {}", min - 1),
            &format!(
                "ERR NOW must be unix time in microseconds; {} looks like milliseconds",
                min - 1
            ),
        );
    }
    // At 2^53 - 1 the log's score is still the exact microsecond.
    let key = format!("rl:now:RL.SLIDELOG:{MAX_NOW}");
    let members: Vec<(String, String)> = redis::cmd("ZRANGE")
        .arg(&key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(&mut c)
        .unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].1, MAX_NOW.to_string());
    assert!(members[0].0.starts_with(&format!("{MAX_NOW}:")));
    // The counters are named by the window holding 2^53 - 1.
    let w = TEN_YEARS_S * 1_000_000;
    let start_s = (MAX_NOW - MAX_NOW % w) / 1_000_000;
    assert_eq!(
        get(&mut c, &format!("rl:now:RL.FIXED:{MAX_NOW}:{start_s}")),
        Some(1)
    );
    assert_eq!(
        get(
            &mut c,
            &format!("rl:now:RL.SLIDECOUNT:{MAX_NOW}:{}", MAX_NOW / w)
        ),
        Some(1)
    );
    // The TAT is one emission interval (ten years / 5) past 2^53 - 1.
    assert_eq!(
        get(&mut c, &format!("rl:now:RL.GCRA:{MAX_NOW}")),
        Some(MAX_NOW + w / 5)
    );
}

/// The TAT is stored in whole microseconds (the spec's layout), so an emission
/// interval below 1 µs cannot be represented: BURST and COST would be spent a whole
/// microsecond at a time. Such rates (limit above the window in µs, e.g. 10^15 per
/// 10 s) are refused with a clear error and write nothing; one per µs still works.
#[test]
fn gcra_refuses_rates_above_one_per_microsecond() {
    let s = Server::start();
    let mut c = s.conn();
    let now = T0 + 11;
    let before = snapshot(&mut c);
    for line in [
        format!("RL.GCRA rl:fast 3000000000 1000 BURST 3 NOW {now}"),
        format!("RL.GCRA rl:big {E15} 10 NOW {now}"),
        format!("RL.GCRA rl:edge 1001 1ms NOW {now}"),
    ] {
        let words: Vec<&[u8]> = line.split_whitespace().map(str::as_bytes).collect();
        let err = rl_err(&mut c, &words);
        assert!(err.contains("at least 1 µs apart"), "{line}: {err}");
    }
    assert_eq!(snapshot(&mut c), before);
    // Exactly one per µs: a burst of 3 at once, then one per µs.
    let line = format!("RL.GCRA rl:edge 1000 1ms BURST 3 NOW {now}");
    let replies = atomic(&mut c, &[line.clone(), line.clone(), line.clone(), line]);
    let allowed: Vec<i64> = replies.iter().map(|r| r.0).collect();
    assert_eq!(allowed, [1, 1, 1, 0], "{replies:?}");
}

// ---------------------------------------------------------------------------------
// Bounded trimming

const LOG: &str = "rl:trim";
/// The window of the trimming tests (long, so that no TTL runs out mid-test).
const WINDOW_S: u64 = 60;

/// Fills the log with 5 × 1,000 members at T0 .. T0 + 4 µs.
fn fill(c: &mut Connection) {
    for k in 0..5u64 {
        let r = rl(
            c,
            &format!(
                "RL.SLIDELOG {LOG} 1000000 {WINDOW_S} COST 1000 NOW {}",
                T0 + k
            ),
        );
        assert_eq!(r.0, 1);
    }
    assert_eq!(zcard(c, LOG), 5000);
}

/// Members the log still holds from before `cutoff` (score ≤ cutoff).
fn expired(c: &mut Connection, cutoff: u64) -> u64 {
    zcount(c, LOG, "-inf", &cutoff.to_string())
}

/// One call after the window trims 1,000 members (the oldest), counts only what is in
/// the window, and the next calls trim the rest, 1,000 at a time.
#[test]
fn slidelog_trims_at_most_a_thousand_per_call_and_stays_exact() {
    let s = Server::start();
    let mut c = s.conn();
    fill(&mut c);
    let now = T0 + WINDOW_S * 1_000_000 + 100;
    let cutoff = now - WINDOW_S * 1_000_000;
    let line = |limit: u64| format!("RL.SLIDELOG {LOG} {limit} {WINDOW_S} NOW {now}");

    // PEEK trims nothing, and already decides on the in-window count (0).
    assert_eq!(rl(&mut c, &format!("{} PEEK", line(1))).0, 1);
    assert_eq!(zcard(&mut c, LOG), 5000);

    // Nothing is in the window: admitted under limit 1, though 4,000 expired
    // members are still there.
    assert_eq!(rl(&mut c, &line(1)), (1, 0, 0, 60_000));
    assert_eq!(zcard(&mut c, LOG), 4001);
    assert_eq!(expired(&mut c, cutoff), 4000);
    // The oldest went first: nothing from T0 is left.
    assert_eq!(zcount(&mut c, LOG, "-inf", &T0.to_string()), 0);

    // One in the window: limit 1 is spent (denied), limit 2 admits; each call trims
    // another 1,000.
    let r = rl(&mut c, &line(1));
    assert_eq!((r.0, r.1, r.2), (0, 0, 60_000));
    assert_eq!(zcard(&mut c, LOG), 3001);
    assert_eq!(rl(&mut c, &line(2)), (1, 0, 0, 60_000));
    assert_eq!(zcard(&mut c, LOG), 2002);
    assert_eq!(expired(&mut c, cutoff), 2000);
    // PEEK during partial trimming: the in-window count (2), no trim.
    let r = rl(&mut c, &format!("{} PEEK", line(3)));
    assert_eq!((r.0, r.1), (1, 0));
    assert_eq!(zcard(&mut c, LOG), 2002);

    let r = rl(&mut c, &line(2));
    assert_eq!((r.0, r.1), (0, 0));
    assert_eq!(zcard(&mut c, LOG), 1002);
    // The last batch: exactly 1,000 expired members left, all removed.
    let r = rl(&mut c, &line(2));
    assert_eq!((r.0, r.1), (0, 0));
    assert_eq!(expired(&mut c, cutoff), 0);
    // Fully trimmed: ZCARD is the in-window count, as the Lua script reads it.
    assert_eq!(zcard(&mut c, LOG), 2);
    assert_eq!(zcount(&mut c, LOG, &format!("({cutoff}"), "+inf"), 2);
    assert!(pttl(&mut c, LOG) > 0);
}

/// The reference Lua script on a half-trimmed log trims everything and decides like
/// the module: both read the in-window count.
#[test]
fn lua_script_agrees_on_a_half_trimmed_log() {
    let s = Server::start();
    let mut c = s.conn();
    fill(&mut c);
    let now = T0 + WINDOW_S * 1_000_000 + 100;
    let w_us = WINDOW_S * 1_000_000;
    // The module admits 2 (trimming 2,000), leaving 2,000 expired members behind.
    for _ in 0..2 {
        assert_eq!(
            rl(&mut c, &format!("RL.SLIDELOG {LOG} 3 {WINDOW_S} NOW {now}")).0,
            1
        );
    }
    assert_eq!(zcard(&mut c, LOG), 3002);
    let peek = rl(
        &mut c,
        &format!("RL.SLIDELOG {LOG} 3 {WINDOW_S} NOW {now} PEEK"),
    );
    assert_eq!((peek.0, peek.1), (1, 0));
    let script = include_str!("../lua/sliding_window_log.lua");
    let reply: (i64, i64) = redis::cmd("EVAL")
        .arg(script)
        .arg(1)
        .arg(LOG)
        .arg(now)
        .arg(w_us)
        .arg(3)
        .arg(format!("{now}:0000beef"))
        .query(&mut c)
        .unwrap();
    assert_eq!(reply, (peek.0, peek.1), "script and module disagree");
    assert_eq!(zcard(&mut c, LOG), 3);
    let r = rl(&mut c, &format!("RL.SLIDELOG {LOG} 3 {WINDOW_S} NOW {now}"));
    assert_eq!((r.0, r.1), (0, 0));
    assert_eq!(zcard(&mut c, LOG), 3);
}

/// A primary and two linked replicas: one with the module, one without.
fn primary_and_replicas() -> (Server, Server, Server) {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let with_module = Server::start_with(&["--replicaof", "127.0.0.1", &port]);
    let without_module = Server::start_without_module(&["--replicaof", "127.0.0.1", &port]);
    wait_link(&primary, &with_module);
    wait_link(&primary, &without_module);
    (primary, with_module, without_module)
}

/// Partial trims remove specific members (replicated as ZREM of those members), so a
/// replica, with or without the module, ends byte-identical to the primary.
#[test]
fn partial_trims_replicate_identically() {
    let (primary, with_module, without_module) = primary_and_replicas();

    let mut c = primary.conn();
    fill(&mut c);
    let now = T0 + WINDOW_S * 1_000_000 + 100;
    let mut sizes = Vec::new();
    for limit in [1, 1, 2, 2, 2, 2] {
        rl(
            &mut c,
            &format!("RL.SLIDELOG {LOG} {limit} {WINDOW_S} NOW {now}"),
        );
        sizes.push(zcard(&mut c, LOG));
    }
    assert_eq!(sizes, [4001, 3001, 2002, 1002, 2, 2]);
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut c).unwrap();
    assert_eq!(acked, 2, "replicas did not acknowledge");
    let expected = snapshot(&mut c);
    assert_eq!(snapshot(&mut with_module.conn()), expected);
    assert_eq!(snapshot(&mut without_module.conn()), expected);

    // And at every step, not only at the end.
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    fill(&mut c);
    for limit in [1, 1, 2] {
        rl(
            &mut c,
            &format!("RL.SLIDELOG {LOG} {limit} {WINDOW_S} NOW {now}"),
        );
        let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut c).unwrap();
        assert_eq!(acked, 2);
        let expected = snapshot(&mut c);
        assert_eq!(snapshot(&mut with_module.conn()), expected);
        assert_eq!(snapshot(&mut without_module.conn()), expected);
    }
}

/// Runs of more than a few expired members (but no more than one call trims) are
/// removed by Redis's own ZREMRANGEBYSCORE inside the call: the decision is the same,
/// the log keeps exactly the in-window members, and replicas with and without the
/// module end byte-identical, the emptied log included.
#[test]
fn longer_trims_replicate_identically() {
    let (primary, with_module, without_module) = primary_and_replicas();
    let mut c = primary.conn();
    let window_us = WINDOW_S * 1_000_000;
    let check = |c: &mut Connection, line: String, reply: (i64, i64), zcard_after: u64| {
        let r = rl(c, &line);
        assert_eq!((r.0, r.1), reply, "{line}");
        assert_eq!(zcard(c, LOG), zcard_after, "{line}");
        let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(c).unwrap();
        assert_eq!(acked, 2, "replicas did not acknowledge");
        let expected = snapshot(c);
        assert_eq!(snapshot(&mut with_module.conn()), expected, "{line}");
        assert_eq!(snapshot(&mut without_module.conn()), expected, "{line}");
    };
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 100 {WINDOW_S} COST 30 NOW {T0}"),
        (1, 70),
        30,
    );
    let later = T0 + 10_000_000;
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 100 {WINDOW_S} COST 20 NOW {later}"),
        (1, 50),
        50,
    );
    // The 30 oldest left the window: trimmed, 20 counted, one admitted.
    let now = T0 + window_us + 1;
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 22 {WINDOW_S} NOW {now}"),
        (1, 1),
        21,
    );
    // Everything left: the trim empties the log, the call then writes it anew.
    let now = later + 2 * window_us;
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 1 {WINDOW_S} NOW {now}"),
        (1, 0),
        1,
    );
    // A cost that can never pass still trims: 20 more expired, the emptied key is gone.
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 100 {WINDOW_S} COST 20 NOW {now}"),
        (1, 79),
        21,
    );
    let now = now + window_us;
    check(
        &mut c,
        format!("RL.SLIDELOG {LOG} 1 {WINDOW_S} COST 2 NOW {now}"),
        (0, 1),
        0,
    );
}
