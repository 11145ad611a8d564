//! A PEEK changes nothing, not even how Redis stores a value: counters, TATs and block
//! keys that the scripts wrote (INCR and SET keep integers int-encoded) keep their encoding,
//! bytes, TTL and memory when the module reads them with PEEK. The module's own
//! writes are integers too (`rl.integer-values yes`, the default: as small as the
//! scripts'), or raw strings with `rl.integer-values no`; no PEEK changes either.
mod common;
use common::*;

const FIXED_LUA: &str = include_str!("../lua/fixed_window.lua");
const COUNTER_LUA: &str = include_str!("../lua/sliding_window_counter.lua");

fn eval(c: &mut Connection, script: &str, keys: &[&str], args: &[String]) {
    let _: Vec<i64> = redis::cmd("EVAL")
        .arg(script)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(c)
        .expect("EVAL");
}

/// What a read must leave as it is: the value, its encoding, its serialized bytes,
/// its expiry and its memory.
fn state(c: &mut Connection, key: &str) -> (Option<String>, String, Vec<u8>, i64, i64) {
    let value: Option<String> = redis::cmd("GET").arg(key).query(c).unwrap();
    let encoding: String = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(key)
        .query(c)
        .unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(c).unwrap();
    let expire: i64 = redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap();
    let memory: i64 = redis::cmd("MEMORY").arg("USAGE").arg(key).query(c).unwrap();
    (value, encoding, dump, expire, memory)
}

#[test]
fn peek_leaves_script_written_counters_and_tats_as_they_are() {
    let s = Server::start();
    let mut c = s.conn();
    let now_s = T0 / 1_000_000;

    // The seed's fixed-window script: rl:fix:<start> by INCR.
    for _ in 0..3 {
        eval(
            &mut c,
            FIXED_LUA,
            &["rl:fix"],
            &[now_s.to_string(), "10".into(), "8".into()],
        );
    }
    // The counter script: the current window (i) and, from an earlier call, i - 1.
    let i = now_s / 10;
    for key in [format!("rl:cnt:{i}"), format!("rl:cnt:{}", i - 1)] {
        let prev = format!("{key}:unused");
        eval(
            &mut c,
            COUNTER_LUA,
            &[&key, &prev],
            &["100".into(), "0.5".into(), "10".into()],
        );
        eval(
            &mut c,
            COUNTER_LUA,
            &[&key, &prev],
            &["100".into(), "0.5".into(), "10".into()],
        );
    }
    // A TAT as the GCRA script stores it: SET of the integer, with an expiry. (Sent
    // by a client, SET always encodes it as an integer; inside a script Redis may
    // reuse an argument object and keep it a string, so the test sets it itself.)
    let _: () = redis::cmd("SET")
        .arg("rl:gcra")
        .arg((T0 + 100_000).to_string())
        .arg("PX")
        .arg(100)
        .query(&mut c)
        .unwrap();

    let keys = [
        format!("rl:fix:{now_s}"),
        format!("rl:cnt:{i}"),
        format!("rl:cnt:{}", i - 1),
        "rl:gcra".to_string(),
    ];
    let before: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    for (k, st) in keys.iter().zip(&before) {
        assert_eq!(st.1, "int", "{k}: the scripts store integers int-encoded");
    }

    let fixed = rl(&mut c, &format!("RL.FIXED rl:fix 8 10 NOW {T0} PEEK"));
    assert_eq!(
        (fixed.0, fixed.1),
        (1, 4),
        "the script's 3 count, and this one"
    );
    let count = rl(
        &mut c,
        &format!("RL.SLIDECOUNT rl:cnt 100 10 NOW {T0} PEEK"),
    );
    assert_eq!(
        (count.0, count.1),
        (1, 95),
        "2 now, 2 fully weighted, and this one"
    );
    let gcra = rl(
        &mut c,
        &format!("RL.GCRA rl:gcra 10 1 BURST 5 NOW {T0} PEEK"),
    );
    assert_eq!(
        (gcra.0, gcra.1),
        (1, 3),
        "one spent by the script, and this one"
    );

    let after: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(
        after, before,
        "PEEK changed a stored value or how it is stored"
    );
}

/// A block key as a replica or an AOF reload holds it, and as the scripts write it: by
/// SET, so an integer when it has no count. A PEEK with BLOCK while it holds is answered
/// from it and leaves it as it is.
#[test]
fn peek_leaves_a_set_written_block_key_as_it_is() {
    let s = Server::start();
    let mut c = s.conn();
    let end = T0 + 300_000_000;
    for value in [end.to_string(), format!("{end}:3")] {
        let _: () = redis::cmd("SET")
            .arg("rl:{p}:block")
            .arg(&value)
            .arg("PX")
            .arg(600_000)
            .query(&mut c)
            .unwrap();
        let before = state(&mut c, "rl:{p}:block");
        for line in [
            "RL.FIXED rl:{p} 1 60 BLOCK 300",
            "RL.GCRA rl:{p} 1 60 BLOCK 300 STRIKES",
            "RL.SLIDELOG rl:{p} 1 60 BLOCK 300 EXTEND",
        ] {
            let mut cmd = redis::Cmd::new();
            for word in format!("{line} NOW {T0} PEEK").split_whitespace() {
                cmd.arg(word);
            }
            let r: Vec<i64> = cmd.query(&mut c).unwrap();
            assert_eq!(r[..4], [0, 0, 300_000, 300_000], "{line}");
        }
        let after = state(&mut c, "rl:{p}:block");
        assert_eq!(after, before, "{value}: PEEK changed the block key");
    }
}

/// The module's own counters and TATs, written in `mode` (`rl.integer-values`), are
/// stored as `encoding`, and no PEEK changes them. A call that reads a counter through
/// the key API (SLIDECOUNT's previous window, in the next window) leaves its value
/// and DUMP as they were: only an integer becomes a raw string.
fn own_values(mode: &str, encoding: &str) {
    let s = Server::start();
    let mut c = s.conn();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rl.integer-values")
        .arg(mode)
        .query(&mut c)
        .unwrap();
    rl(&mut c, &format!("RL.FIXED own 8 10 NOW {T0}"));
    rl(&mut c, &format!("RL.FIXED own 8 10 NOW {T0}"));
    rl(&mut c, &format!("RL.GCRA own:g 10 1 NOW {T0}"));
    rl(&mut c, &format!("RL.GCRA own:g 10 1 NOW {T0}"));
    rl(&mut c, &format!("RL.SLIDECOUNT own:c 8 10 NOW {T0}"));
    let i = T0 / 10_000_000;
    let keys = [
        format!("own:{}", T0 / 1_000_000),
        "own:g".to_string(),
        format!("own:c:{i}"),
    ];
    let before: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    for (k, st) in keys.iter().zip(&before) {
        assert_eq!(st.1, encoding, "{k}: rl.integer-values {mode}");
    }
    assert_eq!(before[0].0.as_deref(), Some("2"));
    for _ in 0..3 {
        rl(&mut c, &format!("RL.FIXED own 8 10 NOW {T0} PEEK"));
        rl(&mut c, &format!("RL.GCRA own:g 10 1 NOW {T0} PEEK"));
        rl(&mut c, &format!("RL.SLIDECOUNT own:c 8 10 NOW {T0} PEEK"));
    }
    let after: Vec<_> = keys.iter().map(|k| state(&mut c, k)).collect();
    assert_eq!(after, before, "rl.integer-values {mode}");
    // The next window: own:c:<i> is now the previous counter, read by the key API.
    let next = T0 + 10_000_000;
    let count = rl(&mut c, &format!("RL.SLIDECOUNT own:c 8 10 NOW {next}"));
    assert_eq!((count.0, count.1), (1, 6), "one now, one fully weighted");
    let previous = state(&mut c, &keys[2]);
    assert_eq!(
        (&previous.0, &previous.2, previous.3, previous.1.as_str()),
        (&before[2].0, &before[2].2, before[2].3, "raw")
    );
    // And the spend in that window wrote its own counter as `encoding`.
    let current = state(&mut c, &format!("own:c:{}", i + 1));
    assert_eq!(current.1, encoding);
}

#[test]
fn the_modules_own_values_are_integers_and_do_not_change_when_read() {
    own_values("yes", "int");
}

#[test]
fn with_integer_values_off_they_are_raw_strings_and_do_not_change_when_read() {
    own_values("no", "raw");
}

/// The default is what the memory per identity depends on.
#[test]
fn integer_values_is_on_by_default() {
    let s = Server::start();
    let mut c = s.conn();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("rl.integer-values")
        .query(&mut c)
        .unwrap();
    assert_eq!(got, ["rl.integer-values", "yes"]);
}
