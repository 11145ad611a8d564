//! Bad input: every malformed argument, every key of the wrong type and every counter
//! the module cannot use gets a clear `ERR …` (or `WRONGTYPE …`) reply, and changes
//! nothing at all in a keyspace full of live limiter state (DUMP and PEXPIRETIME of
//! every key are compared before and after each call). Odd key names (empty, binary,
//! control characters, very long) never crash the server or garble the protocol.
mod common;
use common::*;

const COMMANDS: [&str; 3] = ["RL.SLIDELOG", "RL.SLIDECOUNT", "RL.FIXED"];

/// The decision time of every call (not aligned to any window on purpose).
const NOW: u64 = T0 + 1_234_567;

/// The window of the populated limiter state: long, so that nothing the module wrote
/// during setup expires while the test runs.
const WINDOW: &str = "3600";
const WINDOW_MS: u64 = 3_600_000;

/// `<base>:<n>`, as src/layout.rs names a SLIDECOUNT or FIXED counter.
fn derived(base: &[u8], n: u64) -> Vec<u8> {
    let mut k = base.to_vec();
    k.push(b':');
    k.extend_from_slice(n.to_string().as_bytes());
    k
}

/// The counter RL.FIXED uses at `now`: named by the window start, in seconds for
/// whole-second windows, else in milliseconds.
fn fixed_key(base: &[u8], now: u64, window_ms: u64) -> Vec<u8> {
    let w = window_ms * 1000;
    let start = now - now % w;
    let n = if window_ms.is_multiple_of(1000) {
        start / 1_000_000
    } else {
        start / 1000
    };
    derived(base, n)
}

/// The counter RL.SLIDECOUNT uses at `now` (`back` = 1: the previous window's).
fn slidecount_key(base: &[u8], now: u64, window_ms: u64, back: u64) -> Vec<u8> {
    derived(base, now / (window_ms * 1000) - back)
}

/// Runs a command and returns the raw error line as the server sent it
/// (`ERR …`, `WRONGTYPE …`); panics if the command succeeded.
fn err_line(c: &mut Connection, args: &[Vec<u8>]) -> String {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a.as_slice());
    }
    match cmd.query::<Value>(c) {
        Ok(v) => panic!("{} succeeded: {v:?}", show(args)),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => format!("{code} {detail}"),
            (Some(code), None) => code.to_string(),
            _ => panic!("{}: not a server error reply: {e}", show(args)),
        },
    }
}

fn query(c: &mut Connection, args: &[Vec<u8>]) -> redis::RedisResult<Value> {
    let mut cmd = redis::Cmd::new();
    for a in args {
        cmd.arg(a.as_slice());
    }
    cmd.query::<Value>(c)
}

fn show(args: &[Vec<u8>]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 60 {
                format!(
                    "{:?}…({} bytes)",
                    s.chars().take(40).collect::<String>(),
                    a.len()
                )
            } else {
                format!("{s:?}")
            }
        })
        .collect();
    words.join(" ")
}

type Snapshot = Vec<(Vec<u8>, Option<Vec<u8>>, i64)>;

/// The same as `snapshot()` (every key's DUMP and PEXPIRETIME, sorted) in two round
/// trips instead of two per key: it runs after each of well over a thousand calls.
fn quick_snapshot(c: &mut Connection) -> Snapshot {
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("DUMP").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let values: Vec<(Option<Vec<u8>>, i64)> = pipe.query(c).expect("DUMP/PEXPIRETIME");
    let mut out: Snapshot = keys
        .into_iter()
        .zip(values)
        .map(|(k, (dump, at))| (k, dump, at))
        .collect();
    out.sort();
    out
}

/// `snapshot()` of the harness, checked against `quick_snapshot` once per test.
fn snapshot_both(c: &mut Connection) -> Snapshot {
    let slow = snapshot(c);
    assert!(
        slow == quick_snapshot(c),
        "quick_snapshot disagrees with snapshot"
    );
    slow
}

fn ping(c: &mut Connection) {
    let pong: String = redis::cmd("PING").query(c).expect("PING");
    assert_eq!(pong, "PONG");
}

/// Keys of every other type, plain at their own names (for RL.SLIDELOG).
const OTHER_TYPES: [&str; 8] = [
    "t:list", "t:hash", "t:set", "t:str", "t:float", "t:neg", "t:zeros", "t:max",
];

/// Values a string counter cannot hold for the module (INCRBY would refuse them, or
/// they are negative), with a label for the key name.
const NOT_COUNTERS: [(&str, &str); 9] = [
    ("abc", "abc"),
    ("float", "1.5"),
    ("neg", "-3"),
    ("zeros", "007"),
    ("above_i64", "9223372036854775808"),
    ("empty", ""),
    ("space", " 1"),
    ("plus", "+1"),
    ("negzero", "-0"),
];

/// Creates limiter state through the commands themselves, and keys of other types.
fn populate(c: &mut Connection) {
    // RL.SLIDELOG: two entries.
    assert_eq!(
        rl(
            c,
            &format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {NOW} COST 2")
        )
        .0,
        1
    );
    // RL.SLIDECOUNT: the previous and the current window.
    let prev = NOW - WINDOW_MS * 1000;
    assert_eq!(
        rl(
            c,
            &format!("RL.SLIDECOUNT rl:cnt 5 {WINDOW} NOW {prev} COST 3")
        )
        .0,
        1
    );
    assert_eq!(
        rl(c, &format!("RL.SLIDECOUNT rl:cnt 5 {WINDOW} NOW {NOW}")).0,
        1
    );
    // RL.FIXED: two units spent in the current window.
    assert_eq!(
        rl(c, &format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW} COST 2")).0,
        1
    );
    // A full FIXED window and a full log.
    assert_eq!(
        rl(
            c,
            &format!("RL.FIXED rl:fixfull 2 {WINDOW} NOW {NOW} COST 2")
        )
        .0,
        1
    );
    assert_eq!(
        rl(
            c,
            &format!("RL.SLIDELOG rl:logfull 2 {WINDOW} NOW {NOW} COST 2")
        )
        .0,
        1
    );

    let set = |c: &mut Connection, k: &[u8], v: &[u8]| {
        let _: () = redis::cmd("SET").arg(k).arg(v).query(c).unwrap();
    };
    let _: () = redis::cmd("RPUSH")
        .arg("t:list")
        .arg("a")
        .arg("b")
        .query(c)
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg("t:hash")
        .arg("f")
        .arg("1")
        .query(c)
        .unwrap();
    let _: () = redis::cmd("SADD").arg("t:set").arg("m").query(c).unwrap();
    set(c, b"t:str", b"abc");
    set(c, b"t:float", b"1.5");
    set(c, b"t:neg", b"-3");
    set(c, b"t:zeros", b"007");
    set(c, b"t:max", b"9223372036854775807");
    // A TTL on one of them, which a stray PEXPIRE would change.
    let _: () = redis::cmd("PEXPIRE")
        .arg("t:hash")
        .arg(7_200_000)
        .query(c)
        .unwrap();

    // The per-window counters RL.FIXED and RL.SLIDECOUNT would use for `rl:bad:*`
    // bases at NOW, holding something that is not a counter (or a list).
    for window_ms in [WINDOW_MS, 1500] {
        for (label, value) in NOT_COUNTERS {
            let base = format!("rl:bad:{label}:{window_ms}");
            set(
                c,
                &fixed_key(base.as_bytes(), NOW, window_ms),
                value.as_bytes(),
            );
            set(
                c,
                &slidecount_key(base.as_bytes(), NOW, window_ms, 0),
                value.as_bytes(),
            );
            // Only the previous window is bad here; the current one is a live counter.
            let base = format!("rl:badprev:{label}:{window_ms}");
            set(
                c,
                &slidecount_key(base.as_bytes(), NOW, window_ms, 1),
                value.as_bytes(),
            );
            set(c, &slidecount_key(base.as_bytes(), NOW, window_ms, 0), b"1");
        }
        let base = format!("rl:bad:list:{window_ms}");
        for k in [
            fixed_key(base.as_bytes(), NOW, window_ms),
            slidecount_key(base.as_bytes(), NOW, window_ms, 0),
        ] {
            let _: () = redis::cmd("RPUSH").arg(k).arg("x").query(c).unwrap();
        }
        let base = format!("rl:badprev:list:{window_ms}");
        let _: () = redis::cmd("RPUSH")
            .arg(slidecount_key(base.as_bytes(), NOW, window_ms, 1))
            .arg("x")
            .query(c)
            .unwrap();
        set(c, &slidecount_key(base.as_bytes(), NOW, window_ms, 0), b"1");
        // Counters at the top of i64.
        let base = format!("rl:max:{window_ms}");
        for k in [
            fixed_key(base.as_bytes(), NOW, window_ms),
            slidecount_key(base.as_bytes(), NOW, window_ms, 0),
        ] {
            set(c, &k, b"9223372036854775807");
        }
        let base = format!("rl:maxprev:{window_ms}");
        set(
            c,
            &slidecount_key(base.as_bytes(), NOW, window_ms, 1),
            b"9223372036854775807",
        );
    }
}

struct Case {
    args: Vec<Vec<u8>>,
    /// The error code the reply must start with.
    code: &'static str,
    /// Words the message must contain (case-insensitively): what was wrong.
    mentions: Vec<String>,
    /// Words it must not contain (a NOW in seconds must not be called milliseconds).
    not_mentions: Vec<&'static str>,
}

fn case(args: Vec<Vec<u8>>, code: &'static str, mentions: &[&str]) -> Case {
    Case {
        args,
        code,
        mentions: mentions.iter().map(|m| m.to_string()).collect(),
        not_mentions: Vec::new(),
    }
}

/// `<cmd> <key> <limit> <window> <options…>` as separate arguments (any may be empty).
fn call(cmd: &str, key: &[u8], limit: &str, window: &str, options: &[&str]) -> Vec<Vec<u8>> {
    let mut v = vec![cmd.as_bytes().to_vec(), key.to_vec()];
    v.push(limit.as_bytes().to_vec());
    v.push(window.as_bytes().to_vec());
    v.extend(options.iter().map(|o| o.as_bytes().to_vec()));
    v
}

/// Every class of malformed argument for `cmd` on `key` (a key holding live state).
fn argument_cases(cmd: &str, key: &[u8]) -> Vec<Case> {
    let now = NOW.to_string();
    let now = now.as_str();
    let lower = cmd.to_ascii_lowercase();
    let arity = &["wrong number of arguments", lower.as_str()];
    let mut cases = vec![
        case(vec![cmd.as_bytes().to_vec()], "ERR", arity),
        case(vec![cmd.as_bytes().to_vec(), key.to_vec()], "ERR", arity),
        case(
            vec![cmd.as_bytes().to_vec(), key.to_vec(), b"5".to_vec()],
            "ERR",
            arity,
        ),
    ];

    let bad_amounts = [
        "abc",
        "",
        "0",
        "-1",
        "+1",
        "1.5",
        "1.0",
        " 1",
        "1 ",
        "1e3",
        "0x10",
        "1000000000000001",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999",
    ];
    for bad in bad_amounts {
        cases.push(case(
            call(cmd, key, bad, WINDOW, &["NOW", now]),
            "ERR",
            &["limit"],
        ));
        cases.push(case(
            call(cmd, key, "5", WINDOW, &["COST", bad, "NOW", now]),
            "ERR",
            &["COST"],
        ));
        cases.push(case(
            call(cmd, key, "5", WINDOW, &["NOW", now, "COST", bad]),
            "ERR",
            &["COST"],
        ));
    }
    // Without NOW: a call that slipped through would write at the server's clock.
    cases.push(case(call(cmd, key, "0", WINDOW, &[]), "ERR", &["limit"]));
    cases.push(case(
        call(cmd, key, "5", WINDOW, &["COST", "0"]),
        "ERR",
        &["COST"],
    ));
    if cmd == "RL.SLIDELOG" {
        // A log is bounded: one member per unit.
        for bad in ["1000001", "1000000000000000"] {
            cases.push(case(
                call(cmd, key, bad, WINDOW, &["NOW", now]),
                "ERR",
                &["limit"],
            ));
        }
    }

    let bad_windows = [
        "abc",
        "",
        "0",
        "0s",
        "0ms",
        "-1",
        "-1s",
        "+1",
        "10m",
        "10h",
        "1.5s",
        "1.5",
        "1e3",
        "10 s",
        " 10",
        "ms",
        "s",
        "sms",
        "10mss",
        // Over ten years, in each unit, and beyond u64.
        "315360001",
        "315360001s",
        "315360000001ms",
        "18446744073709551615",
        "18446744073709551616ms",
        "99999999999999999999999s",
    ];
    for bad in bad_windows {
        cases.push(case(
            call(cmd, key, "5", bad, &["NOW", now]),
            "ERR",
            &["window"],
        ));
    }

    // NOW in the wrong unit names the unit it looks like.
    for (bad, unit) in [
        ("1764480001", "seconds"),
        ("0", "seconds"),
        ("1", "seconds"),
        ("94694399999", "seconds"),
        ("1764480001234", "milliseconds"),
        ("94694400000", "milliseconds"),
        ("94694399999999", "milliseconds"),
    ] {
        let mut c = case(
            call(cmd, key, "5", WINDOW, &["NOW", bad]),
            "ERR",
            &["NOW", "microseconds", unit, bad],
        );
        if unit == "seconds" {
            c.not_mentions.push("milliseconds");
        }
        cases.push(c);
    }
    for bad in [
        "abc",
        "",
        "-1",
        "-1764480001234567",
        "+1764480001234567",
        "1764480001234567.0",
        "1.764480001234567e15",
        " 1764480001234567",
        "9007199254740992", // 2^53
        "9223372036854775807",
        "18446744073709551616",
        "99999999999999999999999",
    ] {
        cases.push(case(
            call(cmd, key, "5", WINDOW, &["NOW", bad]),
            "ERR",
            &["NOW"],
        ));
    }

    // Options: unknown, repeated, missing a value, BURST (GCRA only).
    let option_cases: &[(&[&str], &str)] = &[
        (&["NOW", now, "FOO"], "FOO"),
        (&["FOO", "1", "NOW", now], "FOO"),
        (&["NOW", now, "COST", "1", "PEEK", "EXTRA"], "EXTRA"),
        (&["NOW", now, "5"], "option"),
        (&["NOW", now, ""], "option"),
        (&["NOW", now, "PEEKS"], "PEEKS"),
        (&["NOW", now, "BURST", "2"], "BURST"),
        (&["BURST", "1", "NOW", now], "BURST"),
        (&["NOW", now, "BURST"], "BURST"),
        (&["NOW", now, "REFILL", "2"], "REFILL"),
        (&["COST", "1", "COST", "1", "NOW", now], "COST"),
        (&["COST", "1", "NOW", now, "cost", "2"], "COST"),
        (&["NOW", now, "NOW", now], "NOW"),
        (&["NOW", now, "now", "1764480009999999"], "NOW"),
        (&["NOW", now, "PEEK", "PEEK"], "PEEK"),
        (&["PEEK", "NOW", now, "peek"], "PEEK"),
        (&["NOW", now, "COST"], "COST"),
        (&["COST", "1", "NOW"], "NOW"),
        (&["NOW"], "NOW"),
        (&["COST"], "COST"),
        (&["NOW", now, "COST", "PEEK"], "COST"),
        (&["NOW", "PEEK"], "NOW"),
        // RL.COUNTER's own options.
        (
            &["NOW", now, "COUNTALL"],
            "COUNTALL is only accepted by RL.COUNTER",
        ),
        (
            &["renew", "NOW", now],
            "RENEW is only accepted by RL.COUNTER",
        ),
    ];
    for (options, mention) in option_cases {
        cases.push(case(
            call(cmd, key, "5", WINDOW, options),
            "ERR",
            &[mention],
        ));
    }
    cases
}

/// Sends `case`, checks the error line, and checks that nothing changed.
fn check(c: &mut Connection, before: &Snapshot, case: &Case) {
    let what = show(&case.args);
    let line = err_line(c, &case.args);
    assert!(
        line.starts_with(&format!("{} ", case.code)),
        "{what}: expected a {} reply, got {line:?}",
        case.code
    );
    assert!(
        !line.contains(['\r', '\n']),
        "{what}: error spans lines: {line:?}"
    );
    let lower = line.to_ascii_lowercase();
    for m in &case.mentions {
        assert!(
            lower.contains(&m.to_ascii_lowercase()),
            "{what}: {line:?} does not mention {m:?}"
        );
    }
    for m in &case.not_mentions {
        assert!(
            !lower.contains(&m.to_ascii_lowercase()),
            "{what}: {line:?} mentions {m:?}"
        );
    }
    assert!(
        quick_snapshot(c) == *before,
        "{what} ({line}) changed the keyspace"
    );
}

fn key_of(cmd: &str) -> &'static [u8] {
    match cmd {
        "RL.SLIDELOG" => b"rl:log",
        "RL.SLIDECOUNT" => b"rl:cnt",
        _ => b"rl:fix",
    }
}

fn with_peek(case: &Case) -> Option<Case> {
    // Arity cases would just move the error to another argument.
    (case.args.len() > 4).then(|| Case {
        args: case
            .args
            .iter()
            .cloned()
            .chain([b"PEEK".to_vec()])
            .collect(),
        code: case.code,
        mentions: case.mentions.clone(),
        not_mentions: case.not_mentions.clone(),
    })
}

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    let mut s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    let before = snapshot_both(&mut c);
    assert!(before.len() > 40, "setup made {} keys", before.len());

    let mut sent = 0;
    for cmd in COMMANDS {
        for key in [key_of(cmd), b"rl:fresh".as_slice()] {
            for case in argument_cases(cmd, key) {
                check(&mut c, &before, &case);
                sent += 1;
                if let Some(peek) = with_peek(&case) {
                    check(&mut c, &before, &peek);
                    sent += 1;
                }
            }
        }
    }
    assert!(sent > 500, "{sent}");
    // The limiters still work, on the state the bad calls left alone.
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW} COST 3")
        )
        .0,
        1
    );
    assert_eq!(
        rl(&mut c, &format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW}")).0,
        0
    );
    assert!(s.alive());
    ping(&mut c);
}

/// COUNTALL and RENEW: refused by every command but RL.COUNTER, anywhere in RL.ALL,
/// and when repeated; a refused call changes nothing, RL.COUNTER state included.
#[test]
fn counter_options_elsewhere_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    for line in [
        format!("RL.COUNTER rl:ctr 2 {WINDOW} NOW {NOW} COUNTALL"),
        format!("RL.COUNTER rl:ctr 2 {WINDOW} NOW {NOW} COUNTALL"),
        format!("RL.COUNTER rl:ctr 2 {WINDOW} NOW {NOW} COUNTALL RENEW"),
        format!("RL.SLIDEWINDOW rl:sw 2 {WINDOW} NOW {NOW}"),
        format!("RL.CONCURRENCY rl:cc 2 {WINDOW} ACQUIRE a NOW {NOW}"),
        format!("RL.GCRA rl:g 2 {WINDOW} NOW {NOW}"),
    ] {
        rl(&mut c, &line);
    }
    let before = snapshot_both(&mut c);
    let only = |name: &str| format!("{name} is only accepted by RL.COUNTER");
    let in_all = |name: &str| format!("{name} is not accepted in RL.ALL");
    let w = WINDOW;
    let lines = [
        (format!("RL.FIXED rl:fix 5 {w} COUNTALL"), only("COUNTALL")),
        (format!("RL.SLIDECOUNT rl:cnt 5 {w} renew"), only("RENEW")),
        (
            format!("RL.SLIDEWINDOW rl:sw 5 {w} COUNTALL"),
            only("COUNTALL"),
        ),
        (
            format!("RL.SLIDELOG rl:log 5 {w} CountAll"),
            only("COUNTALL"),
        ),
        (format!("RL.GCRA rl:g 5 {w} RENEW COST 1"), only("RENEW")),
        (
            format!("RL.GCRA rl:g 5 {w} BURST 2 COUNTALL"),
            only("COUNTALL"),
        ),
        (
            format!("RL.CONCURRENCY rl:cc 5 {w} ACQUIRE b COUNTALL"),
            only("COUNTALL"),
        ),
        (
            format!("RL.CONCURRENCY rl:cc 5 {w} RENEW ACQUIRE b"),
            only("RENEW"),
        ),
        (
            format!("RL.ALL 1 COUNTER rl:ctr 5 {w} COUNTALL"),
            in_all("COUNTALL"),
        ),
        (
            format!("RL.ALL 1 COUNTER rl:ctr 5 {w} RENEW"),
            in_all("RENEW"),
        ),
        (
            format!("RL.ALL 2 COUNTER rl:ctr 5 {w} countall FIXED rl:fix 5 {w}"),
            in_all("COUNTALL"),
        ),
        (
            format!("RL.ALL 2 FIXED rl:fix 5 {w} COUNTER rl:ctr 5 {w} NOW {NOW} RENEW"),
            in_all("RENEW"),
        ),
        (
            format!("RL.ALL 1 FIXED rl:fix 5 {w} PEEK COUNTALL"),
            in_all("COUNTALL"),
        ),
        (
            format!("RL.COUNTER rl:ctr 5 {w} COUNTALL countall"),
            "COUNTALL given more than once".into(),
        ),
        (
            format!("RL.COUNTER rl:ctr 5 {w} RENEW COUNTALL Renew"),
            "RENEW given more than once".into(),
        ),
        (
            format!("RL.COUNTER rl:ctr 5 {w} COUNTALL COUNTALL PEEK"),
            "COUNTALL given more than once".into(),
        ),
    ];
    for (line, text) in &lines {
        // Without NOW too: a call that slipped through would write at the server's clock.
        for line in [line.clone(), format!("{line} NOW {NOW}")] {
            let error = common::err_line(&mut c, &line);
            assert!(error.starts_with("ERR syntax error: "), "{line}: {error}");
            assert!(error.contains(text.as_str()), "{line}: {error}");
            assert!(
                quick_snapshot(&mut c) == before,
                "{line} changed the keyspace"
            );
        }
    }
    // The state the refused calls left alone: three counted, the third denied.
    let ctr: Option<String> = redis::cmd("GET").arg("rl:ctr").query(&mut c).unwrap();
    assert_eq!(ctr.as_deref(), Some("3"));
    ping(&mut c);
}

#[test]
fn keys_of_the_wrong_type_are_refused_and_change_nothing() {
    let mut s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    let before = snapshot_both(&mut c);
    let now = NOW.to_string();

    let mut cases = Vec::new();
    // RL.SLIDELOG's key must be a sorted set (or absent).
    for key in OTHER_TYPES {
        for options in [vec!["NOW", &now], vec!["NOW", &now, "PEEK"]] {
            cases.push(case(
                call("RL.SLIDELOG", key.as_bytes(), "5", WINDOW, &options),
                "WRONGTYPE",
                &["wrong kind"],
            ));
        }
    }
    // RL.FIXED and RL.SLIDECOUNT: the per-window counter must be an integer INCRBY
    // accepts, and not negative; a list there is the wrong type.
    for (window, window_ms) in [(WINDOW, WINDOW_MS), ("1500ms", 1500)] {
        for options in [vec!["NOW", &now], vec!["NOW", &now, "PEEK", "COST", "1"]] {
            for (label, _) in NOT_COUNTERS {
                let base = format!("rl:bad:{label}:{window_ms}");
                let fixed = String::from_utf8(fixed_key(base.as_bytes(), NOW, window_ms)).unwrap();
                let current =
                    String::from_utf8(slidecount_key(base.as_bytes(), NOW, window_ms, 0)).unwrap();
                cases.push(case(
                    call("RL.FIXED", base.as_bytes(), "5", window, &options),
                    "ERR",
                    &[&fixed, "integer"],
                ));
                cases.push(case(
                    call("RL.SLIDECOUNT", base.as_bytes(), "5", window, &options),
                    "ERR",
                    &[&current, "integer"],
                ));
                let base = format!("rl:badprev:{label}:{window_ms}");
                let previous =
                    String::from_utf8(slidecount_key(base.as_bytes(), NOW, window_ms, 1)).unwrap();
                cases.push(case(
                    call("RL.SLIDECOUNT", base.as_bytes(), "5", window, &options),
                    "ERR",
                    &[&previous, "integer"],
                ));
            }
            for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
                for base in ["rl:bad:list", "rl:badprev:list"] {
                    if cmd == "RL.FIXED" && base == "rl:badprev:list" {
                        continue;
                    }
                    let base = format!("{base}:{window_ms}");
                    cases.push(case(
                        call(cmd, base.as_bytes(), "5", window, &options),
                        "WRONGTYPE",
                        &["wrong kind"],
                    ));
                }
            }
        }
    }
    for case in &cases {
        check(&mut c, &before, case);
    }
    assert!(s.alive());
    ping(&mut c);
}

#[test]
fn counters_at_the_top_of_i64_never_wrap() {
    let mut s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    let before = snapshot_both(&mut c);
    let now = NOW.to_string();

    for (window, window_ms) in [(WINDOW, WINDOW_MS), ("1500ms", 1500)] {
        for cmd in ["RL.FIXED", "RL.SLIDECOUNT"] {
            for base in ["rl:max", "rl:maxprev"] {
                if cmd == "RL.FIXED" && base == "rl:maxprev" {
                    continue;
                }
                let base = format!("{base}:{window_ms}");
                for (limit, cost) in [
                    ("5", "1"),
                    ("1000000000000000", "1"),
                    ("1000000000000000", "2"),
                    ("1000000000000000", "1000000000000000"),
                ] {
                    for peek in [false, true] {
                        let mut options = vec!["NOW", now.as_str(), "COST", cost];
                        if peek {
                            options.push("PEEK");
                        }
                        let args = call(cmd, base.as_bytes(), limit, window, &options);
                        let what = show(&args);
                        // Either the request is denied (the counter is far above any
                        // limit) or refused: as an overflow, or as a counter beyond any
                        // limit (no layout's); never admitted, never wrapped.
                        match query(&mut c, &args) {
                            Ok(v) => {
                                let (allowed, remaining, _, _): Reply = redis::from_redis_value(&v)
                                    .unwrap_or_else(|e| panic!("{what}: {v:?}: {e}"));
                                assert_eq!((allowed, remaining), (0, 0), "{what}");
                            }
                            Err(e) => {
                                assert_eq!(e.code(), Some("ERR"), "{what}: {e}");
                                let detail = e.detail().unwrap_or("").to_ascii_lowercase();
                                assert!(
                                    detail.contains("overflow")
                                        || detail.contains("does not hold a window counter"),
                                    "{what}: {e}"
                                );
                            }
                        }
                        assert!(
                            quick_snapshot(&mut c) == before,
                            "{what} changed the keyspace"
                        );
                    }
                }
            }
        }
    }
    let max: String = redis::cmd("GET")
        .arg(fixed_key(b"rl:max:3600000", NOW, WINDOW_MS))
        .query(&mut c)
        .unwrap();
    assert_eq!(max, "9223372036854775807");
    assert!(s.alive());
    ping(&mut c);
}

#[test]
fn peek_writes_nothing() {
    let mut s = Server::start();
    let mut c = s.conn();
    populate(&mut c);
    let before = snapshot_both(&mut c);
    let later = NOW + 2 * WINDOW_MS * 1000 + 1;
    let next_window = NOW + WINDOW_MS * 1000;

    // (call, expected allowed, expected remaining)
    let peeks: Vec<(String, i64, i64)> = vec![
        // 2 of 5 spent in the log.
        (
            format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {NOW} PEEK"),
            1,
            2,
        ),
        (
            format!("RL.SLIDELOG rl:log 5 {WINDOW} PEEK NOW {NOW} COST 3"),
            1,
            0,
        ),
        (
            format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {NOW} COST 4 PEEK"),
            0,
            3,
        ),
        (
            format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {NOW} COST 6 PEEK"),
            0,
            3,
        ),
        // Every entry is out of the window: a write would trim the log.
        (
            format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {later} PEEK"),
            1,
            4,
        ),
        (
            format!("RL.SLIDELOG rl:logfull 2 {WINDOW} NOW {NOW} PEEK"),
            0,
            0,
        ),
        (
            format!("RL.SLIDELOG rl:nolog 5 {WINDOW} NOW {NOW} PEEK"),
            1,
            4,
        ),
        // 2 of 5 spent in the fixed window.
        (format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW} PEEK"), 1, 2),
        (
            format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW} COST 3 PEEK"),
            1,
            0,
        ),
        (
            format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW} COST 4 PEEK"),
            0,
            3,
        ),
        (
            format!("RL.FIXED rl:fix 5 {WINDOW} NOW {next_window} PEEK"),
            1,
            4,
        ),
        (
            format!("RL.FIXED rl:fixfull 2 {WINDOW} NOW {NOW} PEEK"),
            0,
            0,
        ),
        (format!("RL.FIXED rl:nofix 5 1500ms NOW {NOW} PEEK"), 1, 4),
        (
            format!("RL.SLIDECOUNT rl:nocnt 5 {WINDOW} NOW {NOW} PEEK"),
            1,
            4,
        ),
        (
            format!("RL.SLIDECOUNT rl:cnt 5 {WINDOW} NOW {later} PEEK"),
            1,
            4,
        ),
        (
            format!("RL.SLIDECOUNT rl:cnt 5 {WINDOW} NOW {NOW} COST 6 PEEK"),
            0,
            -1,
        ),
    ];
    for (line, allowed, remaining) in &peeks {
        let first = rl(&mut c, line);
        assert_eq!(first.0, *allowed, "{line}: {first:?}");
        if *remaining >= 0 {
            assert_eq!(first.1, *remaining, "{line}: {first:?}");
        }
        // Nothing was spent: the same question gets the same answer.
        assert_eq!(rl(&mut c, line), first, "{line}");
        assert!(
            quick_snapshot(&mut c) == before,
            "{line} changed the keyspace"
        );
    }

    // A PEEK answers what the real call then does (its reset is the state's own, the
    // spend's counts the spent unit), and the real call writes (which shows the
    // snapshot would have seen a write).
    for line in [
        format!("RL.SLIDELOG rl:log 5 {WINDOW} NOW {NOW}"),
        format!("RL.SLIDECOUNT rl:cnt 5 {WINDOW} NOW {NOW}"),
        format!("RL.FIXED rl:fix 5 {WINDOW} NOW {NOW}"),
    ] {
        let before = snapshot_both(&mut c);
        let peek = rl(&mut c, &format!("{line} PEEK"));
        assert!(
            snapshot(&mut c) == before,
            "{line} PEEK changed the keyspace"
        );
        let real = rl(&mut c, &line);
        assert_eq!((real.0, real.1, real.2), (peek.0, peek.1, peek.2), "{line}");
        assert!(real.3 >= peek.3, "{line}");
        assert_eq!(real.0, 1, "{line}");
        assert!(snapshot(&mut c) != before, "{line} wrote nothing");
    }
    assert!(s.alive());
    ping(&mut c);
}

#[test]
fn binary_and_empty_key_names_do_not_break_anything() {
    let mut s = Server::start();
    let mut c = s.conn();
    let now = NOW.to_string();
    let long: Vec<u8> = (0..70_000u32).map(|i| (i % 256) as u8).collect();
    let names: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\x00".to_vec(),
        b"\r\n".to_vec(),
        b"-ERR fake\r\n+OK\r\n".to_vec(),
        b"a b".to_vec(),
        b"\xff\xfe\x00\x01{}:".to_vec(),
        b"{".to_vec(),
        b"%s%n%x".to_vec(),
        "ключ🔑".as_bytes().to_vec(),
        (0..=255u8).collect(),
        long,
    ];

    for name in &names {
        for cmd in COMMANDS {
            // A valid call: well formed, admitted, and it wrote where the layout says.
            let args = call(cmd, name, "5", WINDOW, &["NOW", &now, "COST", "2"]);
            let v = query(&mut c, &args).unwrap_or_else(|e| panic!("{}: {e}", show(&args)));
            let reply: Reply =
                redis::from_redis_value(&v).unwrap_or_else(|e| panic!("{}: {e}", show(&args)));
            assert_eq!((reply.0, reply.1, reply.2), (1, 3, 0), "{}", show(&args));
            ping(&mut c);
            match cmd {
                "RL.SLIDELOG" => {
                    let n: i64 = redis::cmd("ZCARD").arg(name).query(&mut c).unwrap();
                    assert_eq!(n, 2, "{}", show(&args));
                }
                "RL.SLIDECOUNT" => {
                    let k = slidecount_key(name, NOW, WINDOW_MS, 0);
                    let n: i64 = redis::cmd("GET").arg(k).query(&mut c).unwrap();
                    assert_eq!(n, 2, "{}", show(&args));
                }
                _ => {
                    let k = fixed_key(name, NOW, WINDOW_MS);
                    let n: i64 = redis::cmd("GET").arg(k).query(&mut c).unwrap();
                    assert_eq!(n, 2, "{}", show(&args));
                }
            }
            // Arity errors with odd keys.
            let line = err_line(&mut c, &[cmd.as_bytes().to_vec(), name.clone()]);
            assert!(line.starts_with("ERR "), "{line:?}");
            ping(&mut c);
        }

        // Errors that quote the key name are still one well-formed line.
        let mut odd = b"x".to_vec();
        odd.extend_from_slice(name);
        let _: () = redis::cmd("SET")
            .arg(&odd)
            .arg("abc")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(fixed_key(&odd, NOW, 7000))
            .arg("abc")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("RPUSH")
            .arg(slidecount_key(&odd, NOW, 7000, 0))
            .arg("x")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(slidecount_key(&odd, NOW, 9000, 1))
            .arg("-3")
            .query(&mut c)
            .unwrap();
        let before = snapshot_both(&mut c);
        for (args, code) in [
            (
                call("RL.SLIDELOG", &odd, "5", WINDOW, &["NOW", &now]),
                "WRONGTYPE",
            ),
            (call("RL.FIXED", &odd, "5", "7", &["NOW", &now]), "ERR"),
            (
                call("RL.SLIDECOUNT", &odd, "5", "7s", &["NOW", &now]),
                "WRONGTYPE",
            ),
            (
                call("RL.SLIDECOUNT", &odd, "5", "9000ms", &["NOW", &now]),
                "ERR",
            ),
        ] {
            let case = case(args, code, &[]);
            check(&mut c, &before, &case);
            ping(&mut c);
        }
    }
    assert!(s.alive());
    ping(&mut c);
}

#[test]
fn extremes_of_the_valid_range_are_accepted() {
    let mut s = Server::start();
    let mut c = s.conn();
    let first = "94694400000000"; // 1973-01-01, the smallest NOW
    let last = "9007199254740991"; // 2^53 - 1, the largest
    let mut n = 0;
    for now in [first, last] {
        for window in ["1ms", "1", "315360000", "315360000s", "315360000000ms"] {
            for (cmd, limit, cost) in [
                ("RL.SLIDELOG", "1000000", "1000"),
                ("RL.SLIDECOUNT", "1000000000000000", "1000000000000000"),
                ("RL.FIXED", "1000000000000000", "1000000000000000"),
                ("RL.FIXED", "1000000000000000", "1"),
            ] {
                n += 1;
                let key = format!("rl:edge:{n}");
                let reply = rl(
                    &mut c,
                    &format!("{cmd} {key} {limit} {window} COST {cost} NOW {now}"),
                );
                let remaining = limit.parse::<i64>().unwrap() - cost.parse::<i64>().unwrap();
                assert_eq!(
                    (reply.0, reply.1, reply.2),
                    (1, remaining, 0),
                    "{cmd} {now} {window}"
                );
                let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut c).unwrap();
                // (Only the ten-year windows: a 1 ms or 1 s log may already be gone.)
                if cmd == "RL.SLIDELOG" && window.starts_with("315") {
                    assert!(ttl > 0, "{cmd} {now} {window}: PTTL {ttl}");
                }
            }
        }
    }
    assert!(s.alive());
    ping(&mut c);
}

/// The first window (index 0, possible when NOW is within one window of the epoch:
/// a ten-year window and a NOW in the 1970s) has no previous window. The module uses
/// `i.saturating_sub(1)`, so it reads `<key>:0` as both the current and the previous
/// window and counts it twice.
#[test]
fn slidecount_first_window_has_no_previous_window() {
    let mut s = Server::start();
    let mut c = s.conn();
    let now = 94_694_400_000_000u64; // 1973-01-01, within the first ten-year window
    let line = format!("RL.SLIDECOUNT rl:first 5 315360000 NOW {now}");
    assert_eq!(
        slidecount_key(b"rl:first", now, 315_360_000_000, 0),
        b"rl:first:0"
    );
    assert_eq!(rl(&mut c, &format!("{line} COST 4")).0, 1);
    let v: i64 = redis::cmd("GET").arg("rl:first:0").query(&mut c).unwrap();
    assert_eq!(v, 4);
    // 4 of 5 spent: one more unit fits.
    let peek = rl(&mut c, &format!("{line} PEEK"));
    assert_eq!((peek.0, peek.1), (1, 0), "4 of 5 spent, yet {peek:?}");
    assert!(s.alive());
}

/// One mistake, one text, whichever command makes it: a NOW without its value, and a
/// COST on a lease (RL.CONCURRENCY's own command says what RL.ALL says).
#[test]
fn the_same_mistake_gets_the_same_words_on_every_command() {
    let s = Server::start();
    let mut c = s.conn();
    let line = |c: &mut Connection, text: &str| {
        let args: Vec<Vec<u8>> = text.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        err_line(c, &args)
    };
    // Live state on every key the calls name.
    for call in [
        format!("RL.FIXED k 5 60 NOW {NOW}"),
        format!("RL.THROTTLE t 1 2 3 NOW {NOW}"),
        format!("RL.CONCURRENCY l 5 10 ACQUIRE y NOW {NOW}"),
        format!("RL.COUNTER n 5 60 NOW {NOW}"),
        format!("RL.SLIDEWINDOW w 5 60 NOW {NOW}"),
    ] {
        let args: Vec<Vec<u8>> = call.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        query(&mut c, &args).unwrap_or_else(|e| panic!("{call}: {e}"));
    }
    let before = snapshot(&mut c);
    for text in [
        "RL.FIXED k 5 60 NOW",
        "RL.SLIDECOUNT k 5 60 NOW",
        "RL.SLIDELOG k 5 60 NOW",
        "RL.GCRA k 5 60 NOW",
        "RL.COUNTER n 5 60 NOW",
        "RL.COUNTER n 5 60 PEEK NOW",
        "RL.SLIDEWINDOW w 5 60 NOW",
        "RL.SLIDEWINDOW w 5 60 REFUND NOW",
        "RL.ALL 1 FIXED k 5 60 NOW",
        "RL.CONCURRENCY l 5 10 ACQUIRE x NOW",
        "RL.THROTTLE t 1 2 3 4 NOW",
        "RL.THROTTLE t 1 2 3 NOW",
        "RL.THROTTLE t 1 2 3 now",
    ] {
        assert_eq!(
            line(&mut c, text),
            "ERR syntax error: NOW needs a value",
            "{text}"
        );
    }
    let lease_cost = line(&mut c, "RL.ALL 1 CONCURRENCY l 5 10 COST 2 LEASE x");
    assert!(lease_cost.contains("a lease is one slot"), "{lease_cost}");
    for text in [
        "RL.CONCURRENCY l 5 10 ACQUIRE x COST 2",
        "RL.CONCURRENCY l 5 10 COST 2 ACQUIRE x",
        "RL.CONCURRENCY l 5 10 HEARTBEAT x cost 1",
    ] {
        assert_eq!(line(&mut c, text), lease_cost, "{text}");
    }
    assert_eq!(snapshot(&mut c), before, "a refused call wrote");
}

/// A value beyond its layout's range is another layout's (CL.THROTTLE's nanoseconds
/// read by RL.GCRA as microseconds answered a 57,000-year wait): refused with
/// `does not hold`, PEEK included, and nothing written.
#[test]
fn values_beyond_their_layout_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let run = |c: &mut Connection, text: &str| {
        let args: Vec<Vec<u8>> = text.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        query(c, &args)
    };
    let set = |c: &mut Connection, key: &[u8], value: &str| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(c).unwrap();
    };
    run(&mut c, "RL.THROTTLE cell 1 2 60").expect("RL.THROTTLE");
    // Past NOW's ceiling plus the longest window (2^53 - 1 + 10 years in µs).
    set(&mut c, b"gcra:2266", "9322559254740992");
    set(
        &mut c,
        &fixed_key(b"fix", NOW, WINDOW_MS),
        "1000000000000001",
    );
    set(
        &mut c,
        &slidecount_key(b"cnt", NOW, WINDOW_MS, 1),
        "1000000000000001",
    );
    set(&mut c, b"gcra:ok", &(NOW + 1_000_000).to_string());
    set(&mut c, b"cell:ok", &(u64::MAX / 2).to_string());
    let before = snapshot(&mut c);
    for (call, key, holds) in [
        (
            format!("RL.GCRA cell 5 60 NOW {NOW}"),
            "cell",
            "GCRA arrival time",
        ),
        (
            format!("RL.GCRA gcra:2266 5 60 NOW {NOW}"),
            "gcra:2266",
            "GCRA arrival time",
        ),
        (
            format!("RL.ALL 1 GCRA cell 5 60 NOW {NOW}"),
            "cell",
            "GCRA arrival time",
        ),
        (
            format!("RL.FIXED fix 5 {WINDOW} NOW {NOW}"),
            "fix:",
            "window counter",
        ),
        (
            format!("RL.SLIDECOUNT cnt 5 {WINDOW} NOW {NOW}"),
            "cnt:",
            "window counter",
        ),
    ] {
        for call in [call.clone(), format!("{call} PEEK")] {
            let e = run(&mut c, &call).expect_err(&call);
            let text = format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""));
            assert!(
                text.starts_with(&format!("ERR limiter key '{key}"))
                    && text.contains(&format!("does not hold a {holds}")),
                "{call}: {text}"
            );
            assert_eq!(snapshot(&mut c), before, "{call} wrote");
        }
    }
    // Values inside their layouts are read as before: a GCRA TAT 1 s ahead, a
    // nanosecond TAT far ahead (denied, nothing spent).
    let r = run(&mut c, &format!("RL.GCRA gcra:ok 1 1 NOW {NOW} PEEK")).unwrap();
    assert_eq!(redis::from_redis_value::<Reply>(&r).unwrap().0, 0);
    let r = run(&mut c, &format!("RL.THROTTLE cell:ok 1 2 60 NOW {NOW}")).unwrap();
    assert_eq!(
        redis::from_redis_value::<(i64, i64, i64, i64, i64)>(&r)
            .unwrap()
            .0,
        1
    );
    // RL.GCRA never stores a TAT past the ceiling it reads.
    let e = run(
        &mut c,
        "RL.GCRA far 1 315360000 BURST 2 COST 2 NOW 9007199254740991",
    )
    .expect_err("far");
    assert!(e.to_string().contains("overflow"), "{e}");
    assert_eq!(snapshot(&mut c), before);
}

/// The instants the other layouts store, checked as a TAT is: a block's end up to
/// NOW's ceiling plus the longest block (2^53 - 1 + 10 years in µs) and its strikes up to
/// 10^15; a log entry or a lease up to NOW's ceiling (2^53 - 1), which is as late as any
/// call writes one. Beyond (or infinite), refused with `does not hold`, PEEK included,
/// and nothing written; at the ceilings, read as before.
#[test]
fn blocks_logs_and_leases_beyond_their_layout_are_refused_and_change_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    let run = |c: &mut Connection, text: &str| {
        let args: Vec<Vec<u8>> = text.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        query(c, &args)
    };
    let set = |c: &mut Connection, key: &str, value: &str| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(c).unwrap();
    };
    let zadd = |c: &mut Connection, key: &str, score: &str, member: &str| {
        let _: () = redis::cmd("ZADD")
            .arg(key)
            .arg(score)
            .arg(member)
            .query(c)
            .unwrap();
    };
    let later = NOW + 60_000_000;
    set(&mut c, "b:end:block", "9322559254740992");
    set(
        &mut c,
        "b:strikes:block",
        &format!("{later}:1000000000000001"),
    );
    set(&mut c, "b:u64:block", "18446744073709551615");
    for (key, score) in [
        ("log:2^53", "9007199254740992"),
        ("log:inf", "+inf"),
        ("log:1e300", "1e300"),
        ("lease:2^53", "9007199254740992"),
        ("lease:inf", "+inf"),
    ] {
        // A live entry below it: only the newest is past the layout.
        zadd(&mut c, key, &NOW.to_string(), "a");
        zadd(&mut c, key, score, "b");
    }
    // At the ceilings: read as before.
    set(&mut c, "top:block", "9322559254740991:1000000000000000");
    zadd(&mut c, "log:top", "9007199254740991", "a");
    zadd(&mut c, "lease:top", "9007199254740991", "a");
    let before = snapshot(&mut c);
    let block = "block (its end in unix microseconds up to 2265";
    let log = "sliding log (entries scored in unix microseconds up to 2255)";
    let lease = "lease set (leases scored with their expiry in unix microseconds up to 2255)";
    let mut refused = 0;
    for (call, key, holds) in [
        (
            format!("RL.FIXED b:end 5 60 BLOCK 60 NOW {NOW}"),
            "b:end:block",
            block,
        ),
        (
            format!("RL.GCRA b:strikes 5 60 BLOCK 60 STRIKES NOW {NOW}"),
            "b:strikes:block",
            block,
        ),
        (
            format!("RL.SLIDELOG b:u64 5 60 BLOCK 60 EXTEND NOW {NOW}"),
            "b:u64:block",
            block,
        ),
        (
            format!("RL.ALL 1 SLIDECOUNT b:end 5 60 BLOCK 60 NOW {NOW}"),
            "b:end:block",
            block,
        ),
        (
            format!("RL.SLIDELOG log:2^53 5 60 NOW {NOW}"),
            "log:2^53",
            log,
        ),
        (
            format!("RL.SLIDELOG log:inf 5 60 NOW {NOW}"),
            "log:inf",
            log,
        ),
        (
            format!("RL.SLIDELOG log:1e300 5 60 COST 2 NOW {NOW}"),
            "log:1e300",
            log,
        ),
        (
            format!("RL.ALL 1 SLIDELOG log:inf 5 60 NOW {NOW}"),
            "log:inf",
            log,
        ),
        (
            format!("RL.CONCURRENCY lease:2^53 5 60 ACQUIRE x NOW {NOW}"),
            "lease:2^53",
            lease,
        ),
        (
            format!("RL.CONCURRENCY lease:inf 5 60 ACQUIRE b NOW {NOW}"),
            "lease:inf",
            lease,
        ),
        (
            format!("RL.ALL 1 CONCURRENCY lease:inf 5 60 NOW {NOW} LEASE x"),
            "lease:inf",
            lease,
        ),
    ] {
        let peek = match call.find("ACQUIRE") {
            Some(at) => format!("{}PEEK NOW {NOW}", &call[..at]),
            None => format!("{call} PEEK"),
        };
        for call in [call.clone(), peek] {
            let e = run(&mut c, &call).expect_err(&call);
            let text = format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""));
            assert!(
                text.starts_with(&format!("ERR limiter key '{key}' does not hold a {holds}")),
                "{call}: {text}"
            );
            assert_eq!(snapshot(&mut c), before, "{call} wrote");
            refused += 1;
        }
    }
    assert_eq!(refused, 22);
    // At the ceilings: a block of 10^15 strikes holds until 2265; a log entry and a
    // lease at 2^53 - 1 count (of two allowed, the one the PEEK asks for is the last).
    let r = run(
        &mut c,
        &format!("RL.FIXED top 5 60 BLOCK 60 STRIKES NOW {NOW} PEEK"),
    )
    .unwrap();
    let r: (i64, i64, i64, i64, i64) = redis::from_redis_value(&r).unwrap();
    assert_eq!((r.0, r.1, r.4), (0, 0, 1_000_000_000_000_000));
    for call in [
        format!("RL.SLIDELOG log:top 2 60 NOW {NOW} PEEK"),
        format!("RL.CONCURRENCY lease:top 2 60 PEEK NOW {NOW}"),
    ] {
        let r: Reply = redis::from_redis_value(&run(&mut c, &call).unwrap()).unwrap();
        assert_eq!((r.0, r.1), (1, 0), "{call}");
    }
    assert_eq!(snapshot(&mut c), before);
    // Counting strikes stops at the layout's top: the block written reads back.
    run(
        &mut c,
        &format!("RL.FIXED top 5 60 BLOCK 60 BACKOFF 120 STRIKES NOW {NOW}"),
    )
    .unwrap();
    let v: String = redis::cmd("GET").arg("top:block").query(&mut c).unwrap();
    assert_eq!(v, "9322559254740991:1000000000000000");
    run(
        &mut c,
        &format!("RL.FIXED top 5 60 BLOCK 60 STRIKES NOW {NOW} PEEK"),
    )
    .unwrap();
}

/// RL.THROTTLE with a NOW long after the stored TAT decides as redis-cell at that
/// instant (its key would have expired): `remaining` is at most max_burst + 1.
#[test]
fn throttle_remaining_stays_within_the_burst_after_a_long_idle_now() {
    let s = Server::start();
    let mut c = s.conn();
    let reply = |c: &mut Connection, text: String| -> (i64, i64, i64, i64, i64) {
        let args: Vec<Vec<u8>> = text.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        redis::from_redis_value(&query(c, &args).expect(&text)).unwrap()
    };
    reply(&mut c, format!("RL.THROTTLE t 1 1 1 NOW {NOW}"));
    for gap_s in [1, 60, 86_400] {
        let at = NOW + gap_s * 1_000_000;
        // Quantity 3 > max_burst + 1: limited, and the reply is the fresh key's.
        let stale = reply(&mut c, format!("RL.THROTTLE t 1 1 1 3 NOW {at}"));
        let fresh = reply(&mut c, format!("RL.THROTTLE fresh 1 1 1 3 NOW {at}"));
        assert_eq!(stale, fresh, "{gap_s} s later");
        assert_eq!(stale, (1, 2, 2, -1, 0), "{gap_s} s later");
    }
}
