//! The commands describe themselves to the server: `COMMAND DOCS` (summary, since,
//! complexity, arguments), `COMMAND INFO` (arity, flags, key specs), the argument
//! hints redis-cli shows from those docs, and the `@ratelimit` ACL category where the
//! server lets modules add one (Redis 7.4+, Valkey), grants by name elsewhere.
mod common;
use common::*;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::from_redis_value;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        Value::Okay => "OK".into(),
        other => panic!("not text: {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        Value::Set(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// A RESP2 flat key/value array (or a RESP3 map) as a map.
fn map(v: &Value) -> BTreeMap<String, Value> {
    match v {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        _ => items(v)
            .chunks(2)
            .map(|p| (text(&p[0]), p[1].clone()))
            .collect(),
    }
}

fn rl_commands(c: &mut Connection) -> Vec<String> {
    let mut names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("rl")
        .query(c)
        .unwrap();
    names.sort();
    names
}

fn docs(c: &mut Connection, name: &str) -> BTreeMap<String, Value> {
    let v: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg(name)
        .query(c)
        .unwrap();
    let m = map(&v);
    assert_eq!(m.len(), 1, "{name}: {v:?}");
    map(m.values().next().unwrap())
}

/// An argument as (name, type, token, flags, sub-arguments).
#[derive(Debug, PartialEq)]
struct Arg {
    name: String,
    kind: String,
    token: Option<String>,
    flags: Vec<String>,
    args: Vec<Arg>,
}

fn args(v: &Value) -> Vec<Arg> {
    items(v)
        .iter()
        .map(|a| {
            let m = map(a);
            Arg {
                name: text(&m["name"]),
                kind: text(&m["type"]),
                token: m.get("token").map(text),
                flags: m
                    .get("flags")
                    .map(|f| items(f).iter().map(text).collect())
                    .unwrap_or_default(),
                args: m.get("arguments").map(args).unwrap_or_default(),
            }
        })
        .collect()
}

fn arg(
    name: &str,
    kind: &str,
    token: Option<&str>,
    optional: bool,
) -> (String, String, Option<String>, bool) {
    (name.into(), kind.into(), token.map(Into::into), optional)
}

/// The parts of an argument the tests pin down: name, type, token, optional.
fn shape(a: &Arg) -> (String, String, Option<String>, bool) {
    (
        a.name.clone(),
        a.kind.clone(),
        a.token.clone(),
        a.flags.iter().any(|f| f == "optional"),
    )
}

#[test]
fn command_docs_describe_every_rl_command() {
    let s = Server::start();
    let c = &mut s.conn();
    let names = rl_commands(c);
    assert_eq!(
        names,
        [
            "rl.all",
            "rl.concurrency",
            "rl.counter",
            "rl.fixed",
            "rl.gcra",
            "rl.pseudonym",
            "rl.slidecount",
            "rl.slidelog",
            "rl.slidewindow",
            "rl.throttle",
            "rl.tokenbucket",
            "rl.top"
        ]
    );
    for name in &names {
        let d = docs(c, name);
        for field in ["summary", "since", "complexity"] {
            let value = d.get(field).map(text).unwrap_or_default();
            assert!(!value.trim().is_empty(), "{name}: no {field}: {d:?}");
        }
        assert_eq!(text(&d["since"]), "0.2.0", "{name}");
        assert_eq!(text(&d["module"]), "rl", "{name}");
        let a = args(
            d.get("arguments")
                .unwrap_or_else(|| panic!("{name}: no arguments")),
        );
        assert!(!a.is_empty(), "{name}");
        // Every keyword option carries its token, so redis-cli can hint it (the
        // positional optionals, RL.PSEUDONYM's scope and RL.THROTTLE's quantity, have
        // none).
        let positional = ["scope", "quantity"];
        for x in &a {
            if x.flags.iter().any(|f| f == "optional")
                && x.kind != "oneof"
                && !positional.contains(&x.name.as_str())
            {
                assert!(
                    x.token.is_some(),
                    "{name}: optional {} without token",
                    x.name
                );
            }
        }
    }

    let fixed = args(&docs(c, "rl.fixed")["arguments"]);
    let shapes: Vec<_> = fixed.iter().map(shape).collect();
    assert_eq!(
        shapes,
        [
            arg("key", "key", None, false),
            arg("limit", "integer", None, false),
            arg("window", "string", None, false),
            arg("cost", "integer", Some("COST"), true),
            arg("block", "block", Some("BLOCK"), true),
            arg("now", "unix-time", Some("NOW"), true),
            arg("mode", "oneof", None, true),
        ]
    );
    // BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES].
    let block: Vec<_> = fixed[4].args.iter().map(shape).collect();
    assert_eq!(
        block,
        [
            arg("duration", "string", None, false),
            arg("growth", "oneof", None, true),
            arg("strikes", "pure-token", Some("STRIKES"), true),
        ]
    );
    let growth: Vec<_> = fixed[4].args[1].args.iter().map(shape).collect();
    assert_eq!(
        growth,
        [
            arg("extend", "pure-token", Some("EXTEND"), false),
            arg("max", "string", Some("BACKOFF"), false),
        ]
    );
    let modes: Vec<_> = fixed[6]
        .args
        .iter()
        .map(|m| (m.kind.clone(), m.token.clone()))
        .collect();
    assert_eq!(
        modes,
        ["PEEK", "REFUND", "RESET", "IMPOSE"]
            .map(|t| ("pure-token".to_string(), Some(t.to_string())))
    );
    // The other window limiters take the same arguments; RL.COUNTER three more.
    for name in ["rl.slidelog", "rl.slidecount", "rl.slidewindow"] {
        assert_eq!(args(&docs(c, name)["arguments"]), fixed, "{name}");
    }
    let counter = args(&docs(c, "rl.counter")["arguments"]);
    let (own, common): (Vec<_>, Vec<_>) = counter
        .into_iter()
        .partition(|a| matches!(a.name.as_str(), "countall" | "renew" | "escalate"));
    assert_eq!(common, fixed);
    assert_eq!(
        own.iter().map(shape).collect::<Vec<_>>(),
        [
            arg("countall", "pure-token", Some("COUNTALL"), true),
            arg("renew", "pure-token", Some("RENEW"), true),
            arg("escalate", "pure-token", Some("ESCALATE"), true),
        ]
    );

    let gcra: Vec<_> = args(&docs(c, "rl.gcra")["arguments"])
        .iter()
        .map(shape)
        .collect();
    assert!(
        gcra.contains(&arg("burst", "integer", Some("BURST"), true)),
        "{gcra:?}"
    );
    assert!(
        gcra.contains(&arg("block", "block", Some("BLOCK"), true)),
        "{gcra:?}"
    );
    assert_eq!(gcra.len(), 8);

    // RL.TOKENBUCKET: capacity and interval where the others have limit and window,
    // and REFILL.
    let bucket: Vec<_> = args(&docs(c, "rl.tokenbucket")["arguments"])
        .iter()
        .map(shape)
        .collect();
    assert_eq!(
        bucket[..4],
        [
            arg("key", "key", None, false),
            arg("capacity", "integer", None, false),
            arg("interval", "string", None, false),
            arg("refill", "integer", Some("REFILL"), true),
        ]
    );
    assert!(
        bucket.contains(&arg("block", "block", Some("BLOCK"), true)),
        "{bucket:?}"
    );
    assert_eq!(bucket.len(), 8);

    let all = args(&docs(c, "rl.all")["arguments"]);
    assert_eq!(shape(&all[0]), arg("numlimits", "integer", None, false));
    assert_eq!(all[1].kind, "block");
    assert!(
        all[1].flags.contains(&"multiple".to_string()),
        "{:?}",
        all[1]
    );
    let block: Vec<_> = all[1].args.iter().map(shape).collect();
    assert_eq!(
        block,
        [
            arg("algorithm", "oneof", None, false),
            arg("key", "key", None, false),
            arg("limit", "integer", None, false),
            arg("window", "string", None, false),
            arg("burst", "integer", Some("BURST"), true),
            arg("refill", "integer", Some("REFILL"), true),
            arg("cost", "integer", Some("COST"), true),
            arg("block", "block", Some("BLOCK"), true),
        ]
    );
    let algos: Vec<_> = all[1].args[0]
        .args
        .iter()
        .map(|a| a.token.clone().unwrap())
        .collect();
    assert_eq!(
        algos,
        [
            "SLIDELOG",
            "SLIDECOUNT",
            "SLIDEWINDOW",
            "FIXED",
            "COUNTER",
            "GCRA",
            "TOKENBUCKET",
            "CONCURRENCY"
        ]
    );
    let tail: Vec<_> = all[2..].iter().map(shape).collect();
    assert_eq!(
        tail,
        [
            arg("now", "unix-time", Some("NOW"), true),
            arg("lease", "string", Some("LEASE"), true),
            arg("mode", "oneof", None, true)
        ]
    );
    let conc: Vec<_> = args(&docs(c, "rl.concurrency")["arguments"])
        .iter()
        .map(shape)
        .collect();
    assert_eq!(
        conc,
        [
            arg("key", "key", None, false),
            arg("limit", "integer", None, false),
            arg("ttl", "string", None, false),
            arg("operation", "oneof", None, false),
            arg("now", "unix-time", Some("NOW"), true),
        ]
    );
    let throttle: Vec<_> = args(&docs(c, "rl.throttle")["arguments"])
        .iter()
        .map(shape)
        .collect();
    assert_eq!(
        throttle,
        [
            arg("key", "key", None, false),
            arg("max_burst", "integer", None, false),
            arg("count", "integer", None, false),
            arg("period", "integer", None, false),
            arg("quantity", "integer", None, true),
            arg("now", "unix-time", Some("NOW"), true),
        ]
    );
}

/// The choices inside a `oneof` (RL.ALL's algorithm, the PEEK/REFUND/RESET mode)
/// are not optional each: one of them is what the `oneof` is. Flagged optional,
/// Redis 7.0's `COMMAND DOCS` marked `SLIDELOG`... optional inside a required
/// algorithm and redis-cli hinted `[[PEEK]|[REFUND]|[RESET]]` (fixed in edab081; this
/// found it first).
#[test]
fn oneof_choices_are_not_flagged_optional() {
    let s = Server::start();
    let c = &mut s.conn();
    fn check(name: &str, a: &[Arg]) {
        for x in a {
            if x.kind == "oneof" {
                for choice in &x.args {
                    assert!(
                        !choice.flags.iter().any(|f| f == "optional"),
                        "{name}: {} choice {:?} is flagged optional",
                        x.name,
                        choice.token
                    );
                }
            }
            check(name, &x.args);
        }
    }
    for name in rl_commands(c) {
        check(&name, &args(&docs(c, &name)["arguments"]));
    }
}

#[test]
fn command_info_gives_arity_flags_and_key_specs() {
    let s = Server::start();
    let c = &mut s.conn();
    let names = rl_commands(c);
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(&names)
        .query(c)
        .unwrap();
    let mut info = BTreeMap::new();
    for entry in items(&v) {
        let e = items(entry);
        info.insert(text(&e[0]), e.to_vec());
    }
    assert_eq!(info.len(), names.len());
    let flags = |e: &Vec<Value>| -> Vec<String> { items(&e[2]).iter().map(text).collect() };
    for (name, arity, flag, keys) in [
        ("rl.fixed", -4, "write", true),
        ("rl.counter", -4, "write", true),
        ("rl.slidecount", -4, "write", true),
        ("rl.slidelog", -4, "write", true),
        ("rl.slidewindow", -4, "write", true),
        ("rl.gcra", -4, "write", true),
        ("rl.tokenbucket", -4, "write", true),
        ("rl.all", -6, "write", true),
        ("rl.concurrency", -4, "write", true),
        ("rl.throttle", -4, "write", true),
        ("rl.pseudonym", -2, "readonly", false),
        ("rl.top", -1, "readonly", false),
    ] {
        let e = &info[name];
        let got_arity: i64 = from_redis_value(&e[1]).unwrap();
        assert_eq!(got_arity, arity, "{name}");
        let f = flags(e);
        assert!(f.contains(&flag.to_string()), "{name}: {f:?}");
        assert!(!f.contains(&if flag == "write" { "readonly" } else { "write" }.to_string()));
        let specs = items(&e[8]);
        assert_eq!(!specs.is_empty(), keys, "{name}: key specs {specs:?}");
    }
    // RL.FIXED: one key at index 1, read and written.
    let fixed = &info["rl.fixed"];
    let (first, last, step): (i64, i64, i64) = (
        from_redis_value(&fixed[3]).unwrap(),
        from_redis_value(&fixed[4]).unwrap(),
        from_redis_value(&fixed[5]).unwrap(),
    );
    assert_eq!((first, last, step), (1, 1, 1));
    let specs = items(&fixed[8]);
    assert_eq!(specs.len(), 1);
    let spec = map(&specs[0]);
    let spec_flags: Vec<String> = items(&spec["flags"]).iter().map(text).collect();
    assert!(spec_flags.contains(&"RW".to_string()), "{spec_flags:?}");
    let begin = map(&spec["begin_search"]);
    assert_eq!(text(&begin["type"]), "index");
    assert_eq!(text(&map(&begin["spec"])["index"]), "1");
    // RL.ALL finds its keys by parsing: movablekeys.
    assert!(flags(&info["rl.all"]).contains(&"movablekeys".to_string()));
    // RL.TOP reads the server's own summary: on a replica, while loading, keyless.
    let top = flags(&info["rl.top"]);
    for f in ["readonly", "loading", "stale"] {
        assert!(top.contains(&f.to_string()), "rl.top: {top:?}");
    }
}

// ---------------------------------------------------------------------------------
// redis-cli hints

/// Removes terminal escape sequences (`ESC [ ... letter`).
fn strip_ansi(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// redis-cli (7.0+) builds its hints from the server's `COMMAND DOCS`. It runs on a
/// pseudo-terminal (`script`), with a window size set so that its line editor does
/// not query the cursor position; each wait is bounded.
#[test]
fn redis_cli_shows_argument_hints_from_the_docs() {
    let s = Server::start();
    let cli = std::env::var("RL_CLI").unwrap_or_else(|_| "redis-cli".into());
    let inner = format!("stty cols 250 rows 50; exec {cli} -p {}", s.port);
    let mut child = Command::new("script")
        .args(["-qc", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("script (util-linux) is needed for this test");
    let output = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let sink = Arc::clone(&output);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    let wait_for = |needle: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen = strip_ansi(&output.lock().unwrap());
            if seen.contains(needle) {
                return seen;
            }
            assert!(
                Instant::now() < deadline,
                "redis-cli never showed {needle:?}; it showed:\n{seen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let prompt = format!("127.0.0.1:{}> ", s.port);
    wait_for(&prompt);
    stdin.write_all(b"RL.FIXED ").unwrap();
    stdin.flush().unwrap();
    wait_for("RL.FIXED key limit window [COST cost] [BLOCK duration [EXTEND|BACKOFF max] [STRIKES]] [NOW now] [PEEK|REFUND|RESET|IMPOSE]");
    // Clear the line (Ctrl-U) and ask about RL.GCRA and RL.ALL.
    stdin.write_all(b"\x15RL.GCRA ").unwrap();
    stdin.flush().unwrap();
    wait_for("RL.GCRA key limit window [BURST burst] [COST cost] [BLOCK duration");
    stdin.write_all(b"\x15RL.ALL ").unwrap();
    stdin.flush().unwrap();
    wait_for("RL.ALL numlimits SLIDELOG|SLIDECOUNT|SLIDEWINDOW|FIXED|COUNTER|GCRA|TOKENBUCKET|CONCURRENCY key limit window [BURST burst] [REFILL refill] [COST cost]");
    stdin.write_all(b"\x15RL.CONCURRENCY ").unwrap();
    stdin.flush().unwrap();
    wait_for("RL.CONCURRENCY key limit ttl ACQUIRE acquire|RELEASE release|HEARTBEAT heartbeat|PEEK|RESET [NOW now]");
    stdin.write_all(b"\x15RL.THROTTLE ").unwrap();
    stdin.flush().unwrap();
    wait_for("RL.THROTTLE key max_burst count period [quantity] [NOW now]");
    stdin.write_all(b"\x15quit\r").unwrap();
    stdin.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------------
// ACL categories

fn version(c: &mut Connection) -> String {
    let info: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .map(|v| v.trim().to_string())
    };
    match field("valkey_version") {
        Some(v) => format!("valkey {v}"),
        None => format!("redis {}", field("redis_version").unwrap()),
    }
}

fn login(s: &Server, user: &str) -> Connection {
    redis::Client::open(format!("redis://{user}:pw@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .expect("login")
}

#[test]
fn ratelimit_category_grants_every_command_where_supported_else_names_do() {
    let s = Server::start_with_env(&[], &[("RL_SECRET", "docs-test-secret")]);
    let admin = &mut s.conn();
    let version = version(admin);
    let categories: Vec<String> = redis::cmd("ACL").arg("CAT").query(admin).unwrap();
    let has_category = categories.iter().any(|c| c == "ratelimit");
    let (major, minor) = {
        let v = version.split(' ').nth(1).unwrap();
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
        (parts.next().unwrap(), parts.next().unwrap())
    };
    let supported = version.starts_with("valkey") || (major, minor) >= (7, 4);
    assert_eq!(has_category, supported, "{version}: ACL CAT {categories:?}");
    let names = rl_commands(admin);
    let calls = [
        format!("RL.FIXED {{u}}:f 5 10 NOW {T0}"),
        format!("RL.COUNTER {{u}}:n 5 10 NOW {T0}"),
        format!("RL.SLIDECOUNT {{u}}:c 5 10 NOW {T0}"),
        format!("RL.SLIDELOG {{u}}:l 5 10 NOW {T0}"),
        format!("RL.SLIDEWINDOW {{u}}:w 5 10 NOW {T0}"),
        format!("RL.GCRA {{u}}:g 5 10 NOW {T0}"),
        format!("RL.TOKENBUCKET {{u}}:b 5 10 REFILL 2 NOW {T0}"),
        format!("RL.ALL 1 GCRA {{u}}:a 5 10 NOW {T0}"),
        format!("RL.CONCURRENCY {{u}}:c 5 10 ACQUIRE a NOW {T0}"),
        format!("RL.THROTTLE {{u}}:t 5 10 60 NOW {T0}"),
        "RL.PSEUDONYM 192.0.2.1".to_string(),
        "RL.TOP COUNT 5".to_string(),
    ];
    assert_eq!(calls.len(), names.len(), "a new command needs a call here");
    if has_category {
        // Every command carries the category (COMMAND INFO's ACL categories; Redis
        // 7.4's `ACL CAT ratelimit` does not list module commands, so it is not used).
        for name in &names {
            let info: Value = redis::cmd("COMMAND")
                .arg("INFO")
                .arg(name)
                .query(admin)
                .unwrap();
            let text = format!("{info:?}");
            assert!(text.contains("@ratelimit"), "{name}: {text}");
        }
        let _: () = query_line(admin, "ACL SETUSER u on >pw ~* +@ratelimit")
            .map(|_| ())
            .unwrap();
    } else {
        let e = query_line(admin, "ACL SETUSER u on >pw ~* +@ratelimit").unwrap_err();
        assert!(e.to_string().contains("category"), "{e}");
        let grants: Vec<String> = names.iter().map(|n| format!("+{n}")).collect();
        let _: () = query_line(
            admin,
            &format!("ACL SETUSER u on >pw ~* {}", grants.join(" ")),
        )
        .map(|_| ())
        .unwrap();
    }
    let u = &mut login(&s, "u");
    for line in &calls {
        query_line(u, line).unwrap_or_else(|e| panic!("{version}: u may not {line}: {e}"));
    }
    // And nothing else.
    let e = query_line(u, "GET x").unwrap_err();
    assert_eq!(e.code(), Some("NOPERM"), "{e}");
}
