//! RL.TOKENBUCKET against a real server: Symfony's token bucket, refilled in steps.
//! Decisions with NOW stepped through Symfony's own test numbers; the stored layout
//! (`<tokens>:<timer-µs>`, PEXPIRETIME = when the bucket is full again); a spend at a
//! later NOW (a reservation) holding for the present; bad input and foreign values
//! changing nothing; PEEK, REFUND, RESET, BLOCK and RL.ALL; and a replica without the
//! module and an AOF reload holding the same values and instants.
mod common;
use common::workload::server_time_ms;
use common::*;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

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

/// Symfony's TokenBucketLimiterTest::testBucketRefilledWithStrictFrequency: 1000
/// tokens, 100 every 15 s; 300 taken, then one every 4 s. The steps come at the first
/// call + 15 s, 30 s, …, whenever the calls are.
#[test]
fn symfony_strict_frequency() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let at = |now: u64, cost: u64| {
        format!("RL.TOKENBUCKET rl:tb 1000 15 REFILL 100 COST {cost} NOW {now}")
    };
    assert_eq!(rl(&mut c, &at(t, 300)), (1, 700, 0, 45_000));
    assert_eq!(get(&mut c, "rl:tb"), Some(format!("700:{t}")));
    let mut expected = 699;
    for i in 1..=20u64 {
        let now = t + (i - 1) * 4 * S;
        let r = rl(&mut c, &at(now, 1));
        assert_eq!(
            (r.0, r.1),
            (1, expected),
            "consume {i} at +{} s",
            (i - 1) * 4
        );
        expected -= 1;
        if [4, 8, 12].contains(&i) {
            expected += 100;
        } else if [15, 19].contains(&i) {
            expected = 999;
        }
    }
    // Steps came at +15 s, +30 s, +45 s and +60 s. By the 20th call (+76 s) the step
    // at +75 s has filled it: a full bucket is a new one, whose steps start there.
    assert_eq!(get(&mut c, "rl:tb"), Some(format!("999:{}", t + 76 * S)));
    let r = rl(&mut c, &format!("{} PEEK", at(t + 76 * S, 1)));
    assert_eq!(r, (1, 998, 0, 15_000));
}

/// testReserve's numbers (10 tokens, 10 a second): two fives pass, the third waits
/// until the next step, a whole second after the first call, where a smooth refill
/// (RL.GCRA) has five back after half a second.
#[test]
fn waits_for_the_next_step() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let at = |now: u64, rest: &str| format!("RL.TOKENBUCKET rl:r 10 1 REFILL 10 NOW {now}{rest}");
    assert_eq!(rl(&mut c, &at(t, " COST 5")), (1, 5, 0, 1000));
    assert_eq!(rl(&mut c, &at(t + 500_000, " COST 5")), (1, 0, 0, 500));
    assert_eq!(rl(&mut c, &at(t + 500_000, " COST 5")), (0, 0, 500, 500));
    assert_eq!(rl(&mut c, &at(t + 999_999, " COST 1")), (0, 0, 1, 1));
    // A refusal is not saved.
    assert_eq!(get(&mut c, "rl:r"), Some(format!("0:{t}")));
    assert_eq!(rl(&mut c, &at(t + S, " COST 5")), (1, 5, 0, 1000));
    assert_eq!(get(&mut c, "rl:r"), Some(format!("5:{}", t + S)));
    let gcra = |cost: u64, now: u64| format!("RL.GCRA rl:g 10 1 COST {cost} NOW {now}");
    assert_eq!(rl(&mut c, &gcra(10, t)).0, 1);
    assert_eq!(
        rl(&mut c, &gcra(5, t + 500_000)).0,
        1,
        "smooth: five back by +0.5 s"
    );
    // REFILL defaults to 1.
    let one = |now: u64| format!("RL.TOKENBUCKET rl:one 2 1 NOW {now}");
    rl(&mut c, &one(t));
    rl(&mut c, &one(t));
    assert_eq!(rl(&mut c, &one(t + S)), (1, 0, 0, 2000));
}

/// The key holds `<tokens>:<timer-µs>` and expires when the bucket is full again; a
/// full bucket is no key.
#[test]
fn layout_and_expiry() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let k = "rl:lay";
    let line = |now: u64, rest: &str| format!("RL.TOKENBUCKET {k} 5 10 REFILL 2 NOW {now}{rest}");
    assert_eq!(rl(&mut c, &line(t, " PEEK")), (1, 4, 0, 0));
    assert_eq!(get(&mut c, k), None, "a PEEK wrote");
    let before = server_time_ms(&mut c);
    assert_eq!(rl(&mut c, &line(t, " COST 3")), (1, 2, 0, 20_000));
    let after = server_time_ms(&mut c);
    assert_eq!(get(&mut c, k), Some(format!("2:{t}")));
    let at = pexpiretime(&mut c, k);
    assert!(
        (before + 20_000..=after + 20_000).contains(&at),
        "expires at {at}, not full again in 20 s ({before}..={after})"
    );
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(k)
        .query(&mut c)
        .unwrap();
    assert_ne!(encoding, "int");
    // Two steps later (+23 s) it is full again, so a new bucket, whose steps start
    // there; a REFUND to full deletes it.
    assert_eq!(rl(&mut c, &line(t + 23 * S, " COST 1")), (1, 4, 0, 10_000));
    assert_eq!(get(&mut c, k), Some(format!("4:{}", t + 23 * S)));
    assert_eq!(rl(&mut c, &line(t + 23 * S, " REFUND")), (1, 4, 0, 0));
    assert_eq!(get(&mut c, k), None);
}

/// The PHP kit reserves as a spend decided at the instant the tokens come (NOW in the
/// future); a call at the present must then find them gone, as after Symfony's
/// reservation, not the tokens of steps still to come.
#[test]
fn a_spend_at_a_later_now_holds_for_the_present() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    // testReserveMaxWaitingTime: 10 tokens, one a minute.
    let at = |now: u64, cost: u64| format!("RL.TOKENBUCKET rl:res 10 60 COST {cost} NOW {now}");
    assert_eq!(rl(&mut c, &at(t, 10)).0, 1);
    let r = rl(&mut c, &at(t, 5));
    assert_eq!((r.0, r.2), (0, 300_000));
    assert_eq!(rl(&mut c, &at(t + 300 * S, 5)), (1, 0, 0, 600_000));
    assert_eq!(get(&mut c, "rl:res"), Some(format!("0:{}", t + 300 * S)));
    // At the present: the five are owed, so five more wait ten steps.
    assert_eq!(rl(&mut c, &at(t, 5)), (0, 0, 600_000, 900_000));
    assert_eq!(rl(&mut c, &at(t + 299 * S, 1)), (0, 0, 61_000, 601_000));
    assert_eq!(rl(&mut c, &at(t + 360 * S, 1)), (1, 0, 0, 600_000));
}

/// Random calls on a few buckets at stepped NOW against a model of Symfony's
/// arithmetic (tokens, timer; floor of whole steps), checking every reply.
#[test]
fn agrees_with_symfonys_arithmetic() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let mut rng = StdRng::seed_from_u64(0x70_4e4b);
    let buckets = [(10, 1, 1), (10, 10, 1), (1000, 100, 15), (7, 3, 2)];
    let mut model: Vec<Option<(i64, u64)>> = vec![None; buckets.len()];
    let mut now = t;
    let (mut allowed, mut denied) = (0, 0);
    for _ in 0..3_000 {
        now += rng.gen_range(0..700_000);
        let n = rng.gen_range(0..buckets.len());
        let (cap, refill, secs) = buckets[n];
        let step = secs * S;
        let cost = rng.gen_range(1..=cap as u64 + 1) as i64;
        let (tokens, timer) = match model[n] {
            None => (cap, now),
            Some((tk, tm)) => {
                let k = (now - tm) / step;
                let tk = tk + k as i64 * refill;
                // Full, it is a new bucket (Symfony's expires from storage later).
                if tk >= cap {
                    (cap, now)
                } else {
                    (tk, tm + k * step)
                }
            }
        };
        let r = rl(
            &mut c,
            &format!("RL.TOKENBUCKET rl:m:{n} {cap} {secs} REFILL {refill} COST {cost} NOW {now}"),
        );
        let ms = |us: u64| us.div_ceil(1000) as i64;
        let full_at = |left: i64| timer + ((cap - left) as u64).div_ceil(refill as u64) * step;
        if cost <= tokens {
            allowed += 1;
            let left = tokens - cost;
            assert_eq!(r, (1, left, 0, ms(full_at(left) - now)), "bucket {n}");
            model[n] = (left < cap).then_some((left, timer));
        } else {
            denied += 1;
            let retry = if cost > cap {
                -1
            } else {
                ms(timer + ((cost - tokens) as u64).div_ceil(refill as u64) * step - now)
            };
            let reset = if tokens >= cap {
                0
            } else {
                ms(full_at(tokens) - now)
            };
            assert_eq!(r, (0, tokens, retry, reset), "bucket {n}");
        }
    }
    assert!(allowed > 500 && denied > 500, "{allowed} / {denied}");
}

/// Bad arguments and values of other layouts are refused, PEEK included, and change
/// nothing.
#[test]
fn bad_input_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    rl(&mut c, &format!("RL.TOKENBUCKET rl:ok 5 10 NOW {t}"));
    let set = |c: &mut Connection, key: &str, value: &str| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(c).unwrap();
    };
    for (key, value) in [
        ("rl:int", "7"),
        ("rl:neg", "-1:1764480000000000"),
        ("rl:three", "1:2:3"),
        ("rl:big", "1000000000000001:1764480000000000"),
        ("rl:late", "1:9322559254740992"),
        ("rl:blank", ":"),
        ("rl:text", "tokens"),
    ] {
        set(&mut c, key, value);
    }
    let _: () = redis::cmd("ZADD")
        .arg("rl:zset")
        .arg(1)
        .arg("m")
        .query(&mut c)
        .unwrap();
    let before = snapshot(&mut c);
    let mut sent = 0;
    for key in [
        "rl:int", "rl:neg", "rl:three", "rl:big", "rl:late", "rl:blank", "rl:text",
    ] {
        for rest in ["", " PEEK", " REFUND", " RESET"] {
            let line = format!("RL.TOKENBUCKET {key} 5 10 NOW {t}{rest}");
            let e = err_line(&mut c, &line);
            assert!(
                e.starts_with(&format!(
                    "ERR limiter key '{key}' does not hold a token bucket"
                )),
                "{line}: {e}"
            );
            sent += 1;
        }
        let all = format!("RL.ALL 1 TOKENBUCKET {key} 5 10 NOW {t}");
        assert!(err_line(&mut c, &all).contains("does not hold a token bucket"));
    }
    assert!(
        err_line(&mut c, &format!("RL.TOKENBUCKET rl:zset 5 10 NOW {t}")).starts_with("WRONGTYPE")
    );
    for args in [
        "rl:ok 0 10",
        "rl:ok 5 0",
        "rl:ok 5 10 REFILL 0",
        "rl:ok 5 10 REFILL",
        "rl:ok 5 10 REFILL x",
        "rl:ok 5 10 REFILL 1 REFILL 1",
        "rl:ok 5 10 REFILL 1000000000000001",
        "rl:ok 5 10 BURST 2",
        "rl:ok 5 10 COUNTALL",
        "rl:ok 5 10 COST 0",
        "rl:ok 5 10 PEEK RESET",
        "rl:ok 5 10 IMPOSE",
        "rl:ok 5 10 NOW 1764480000",
    ] {
        let e = err_line(&mut c, &format!("RL.TOKENBUCKET {args}"));
        assert!(e.starts_with("ERR"), "{args}: {e}");
        sent += 1;
    }
    // REFILL belongs to TOKENBUCKET limits only, in RL.ALL too.
    for line in [
        format!("RL.GCRA rl:ok 5 10 REFILL 2 NOW {t}"),
        format!("RL.ALL 1 FIXED rl:ok 5 10 REFILL 2 NOW {t}"),
        format!("RL.ALL 1 TOKENBUCKET rl:ok 5 10 NOW {t} REFILL 2"),
    ] {
        assert!(err_line(&mut c, &line).contains("REFILL"), "{line}");
    }
    assert_eq!(snapshot(&mut c), before, "a refused call wrote");
    assert!(sent > 40);
}

/// PEEK, REFUND, RESET, BLOCK, and RL.ALL with another limit.
#[test]
fn modes_block_and_all() {
    let s = Server::start();
    let mut c = s.conn();
    let t = server_us(&mut c);
    let line =
        |now: u64, rest: &str| format!("RL.TOKENBUCKET rl:{{u}}:b 4 10 REFILL 2 NOW {now}{rest}");
    assert_eq!(rl(&mut c, &line(t, " COST 3")), (1, 1, 0, 20_000));
    // PEEK says what a spend would, with the state's own reset, and writes nothing.
    assert_eq!(
        rl(&mut c, &line(t + 1, " COST 2 PEEK")),
        (0, 1, 10_000, 20_000)
    );
    assert_eq!(rl(&mut c, &line(t + 1, " PEEK")), (1, 0, 0, 20_000));
    assert_eq!(
        rl(&mut c, &line(t + 1, " COST 2 REFUND")),
        (1, 1, 0, 10_000)
    );
    assert_eq!(get(&mut c, "rl:{u}:b"), Some(format!("3:{t}")));
    assert_eq!(rl(&mut c, &line(t + 2, " RESET")), (1, 3, 0, 0));
    assert_eq!(get(&mut c, "rl:{u}:b"), None);

    // BLOCK: the denial starts a block, which clears the bucket.
    let b = |now: u64| format!("{} BLOCK 30", line(now, " COST 3"));
    assert_eq!(rl(&mut c, &b(t + 3)).0, 1);
    assert_eq!(rl(&mut c, &b(t + 4)), (0, 0, 30_000, 30_000));
    assert_eq!(get(&mut c, "rl:{u}:b"), None);
    assert!(get(&mut c, "rl:{u}:b:block").is_some());
    assert_eq!(rl(&mut c, &b(t + 30 * S + 4)), (1, 1, 0, 20_000));

    // RL.ALL: the bucket spends only if the other limit admits too.
    let all = |now: u64, fixed: u64| -> Reply {
        let line = format!(
            "RL.ALL 2 TOKENBUCKET rl:{{a}}:b 2 5 REFILL 1 FIXED rl:{{a}}:f {fixed} 60 NOW {now}"
        );
        let mut cmd = redis::Cmd::new();
        for word in line.split_whitespace() {
            cmd.arg(word);
        }
        let (a, r, ra, re, _limits): (i64, i64, i64, i64, redis::Value) =
            cmd.query(&mut s.conn()).unwrap();
        (a, r, ra, re)
    };
    let r = all(t, 1);
    assert_eq!((r.0, r.1), (1, 0));
    assert_eq!(get(&mut c, "rl:{a}:b"), Some(format!("1:{t}")));
    assert_eq!(all(t + 1, 1).0, 0);
    assert_eq!(
        get(&mut c, "rl:{a}:b"),
        Some(format!("1:{t}")),
        "a denied RL.ALL spent"
    );
    assert_eq!(all(t + 2, 5).0, 1);
    assert_eq!(all(t + 3, 5).2, 5000);
}

/// Spends, refunds, resets and blocks reach a replica without the module and an AOF
/// reload as the same values and expiry instants.
#[test]
fn replicas_and_the_aof_get_the_effects() {
    let (primary, replica) = primary_with_aof_and_replica();
    let mut p = primary.conn();
    let t = server_us(&mut p);
    let mut rng = StdRng::seed_from_u64(0x7b);
    let mut now = t;
    for _ in 0..2_000 {
        now += rng.gen_range(0..300_000);
        let n = rng.gen_range(0..8);
        let mut line = format!(
            "RL.TOKENBUCKET rl:{{r}}:{n} {} 2 REFILL {} NOW {now}",
            n + 2,
            n % 3 + 1
        );
        match rng.gen_range(0..100) {
            0..=69 => {}
            70..=89 => line.push_str(&format!(" COST {}", rng.gen_range(2..=3))),
            _ => line.push_str(" COST 2 BLOCK 20"),
        }
        match rng.gen_range(0..100) {
            0..=4 => line.push_str(" PEEK"),
            5..=14 => line.push_str(" REFUND"),
            15..=16 => line.push_str(" RESET"),
            _ => {}
        }
        rl(&mut p, &line);
    }
    let expected = same_on_the_replica_and_after_loadaof(&mut p, &replica);
    assert!(expected.len() >= 4, "{expected:?}");
}
