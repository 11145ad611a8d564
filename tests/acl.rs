//! ACL key permissions: Redis checks the base key (argument 1) against the caller's
//! key patterns; the module checks the derived keys `<key>:<n>` that RL.FIXED and
//! RL.SLIDECOUNT read and write, with the same read/write distinction. A refused call
//! writes nothing (DUMP and expiry of every key, and the dirty counter, are compared
//! as the default user before and after). The operations page's `ACL SETUSER` lines
//! (by name; `+@ratelimit` where the server has module categories) grant every command
//! the kits send.
mod common;
use common::*;

/// A NOW inside the window that starts at T0 (T0 is a multiple of every window here).
const NOW: u64 = T0 + 1_234_567;
/// RL.FIXED's counter for a 10 s window at NOW: named by the window start in seconds.
const FIXED_N: u64 = T0 / 1_000_000;
/// RL.SLIDECOUNT's counter for a 10 s window at NOW: the window index.
const SLIDE_N: u64 = T0 / 10_000_000;

const PASSWORD: &str = "pw-8c1f";

fn setuser(c: &mut Connection, name: &str, rules: &[&str]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(name)
        .arg("reset")
        .arg("on")
        .arg(format!(">{PASSWORD}"))
        .arg("+acl|whoami");
    for r in rules {
        cmd.arg(*r);
    }
    let ok: String = cmd
        .query(c)
        .unwrap_or_else(|e| panic!("ACL SETUSER {name} {rules:?}: {e}"));
    assert_eq!(ok, "OK");
}

fn login(s: &Server, user: &str) -> Connection {
    let client =
        redis::Client::open(format!("redis://{user}:{PASSWORD}@127.0.0.1:{}/", s.port)).unwrap();
    let mut c = client.get_connection().expect("connect as user");
    let me: String = redis::cmd("ACL").arg("WHOAMI").query(&mut c).unwrap();
    assert_eq!(me, user);
    c
}

fn query(c: &mut Connection, line: &str) -> redis::RedisResult<Value> {
    let mut cmd = redis::Cmd::new();
    for w in line.split_whitespace() {
        cmd.arg(w);
    }
    cmd.query(c)
}

/// The error a call gets, as `CODE detail`; panics if it succeeded.
fn refused(c: &mut Connection, line: &str) -> String {
    match query(c, line) {
        Ok(v) => panic!("{line}: succeeded with {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

fn dirty(c: &mut Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("persistence").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .expect("rdb_changes_since_last_save")
        .trim()
        .parse()
        .unwrap()
}

type State = (Vec<(Vec<u8>, Option<Vec<u8>>, i64)>, i64);

fn state(admin: &mut Connection) -> State {
    (snapshot(admin), dirty(admin))
}

fn get(c: &mut Connection, key: &str) -> Option<i64> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

/// Live limiter state on the keys the users will be refused on, written as the
/// default user: FIXED and SLIDECOUNT counters of `rl:x`, a log at `rl:x`, a TAT at
/// `rl:g`, and something unrelated.
fn populate(admin: &mut Connection) {
    for line in [
        format!("RL.FIXED rl:x 5 10 NOW {NOW}"),
        format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"),
        format!("RL.SLIDECOUNT rl:x 5 10 NOW {}", NOW - 10_000_000),
        format!("RL.SLIDELOG rl:x 5 10 NOW {NOW}"),
        format!("RL.GCRA rl:g 5 10 NOW {NOW}"),
        format!("RL.FIXED other 5 10 NOW {NOW}"),
    ] {
        assert_eq!(rl(admin, &line).0, 1, "{line}");
    }
    assert_eq!(get(admin, &format!("rl:x:{FIXED_N}")), Some(1));
    assert_eq!(get(admin, &format!("rl:x:{SLIDE_N}")), Some(1));
    assert_eq!(get(admin, &format!("rl:x:{}", SLIDE_N - 1)), Some(1));
}

/// A user allowed only `~rl:x ~rl:g` may run RL.SLIDELOG and RL.GCRA on those keys
/// (one key each), but RL.FIXED and RL.SLIDECOUNT on `rl:x` would touch `rl:x:<n>`:
/// NOPERM naming that key, even for PEEK (which reads it), and nothing changes.
#[test]
fn exact_key_pattern_refuses_derived_keys() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(
        &mut admin,
        "exact",
        &[
            "~rl:x",
            "~rl:g",
            "+rl.slidelog",
            "+rl.slidecount",
            "+rl.fixed",
            "+rl.gcra",
        ],
    );
    let mut u = login(&s, "exact");

    let before = state(&mut admin);
    for (line, derived) in [
        (format!("RL.FIXED rl:x 5 10 NOW {NOW}"), FIXED_N),
        (format!("RL.FIXED rl:x 5 10 NOW {NOW} PEEK"), FIXED_N),
        (format!("RL.FIXED rl:x 5 10 COST 9 NOW {NOW}"), FIXED_N),
        (format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"), SLIDE_N),
        (format!("RL.SLIDECOUNT rl:x 5 10 PEEK NOW {NOW}"), SLIDE_N),
        // A window with no counter yet: the key would be created.
        (
            format!("RL.FIXED rl:x 5 10 NOW {}", NOW + 60_000_000),
            FIXED_N + 60,
        ),
    ] {
        let e = refused(&mut u, &line);
        assert!(e.starts_with("NOPERM "), "{line}: {e}");
        assert!(e.contains(&format!("'rl:x:{derived}'")), "{line}: {e}");
        assert_eq!(state(&mut admin), before, "{line} changed something");
    }

    // The single-key limiters work on the allowed keys.
    assert_eq!(rl(&mut u, &format!("RL.SLIDELOG rl:x 5 10 NOW {NOW}")).0, 1);
    assert_eq!(rl(&mut u, &format!("RL.GCRA rl:g 5 10 NOW {NOW}")).0, 1);
    assert_eq!(
        rl(&mut u, &format!("RL.SLIDELOG rl:x 5 10 PEEK NOW {NOW}")).0,
        1
    );
    let members: i64 = redis::cmd("ZCARD").arg("rl:x").query(&mut admin).unwrap();
    assert_eq!(members, 2);
    // And Redis refuses any other base key itself.
    let e = refused(&mut u, &format!("RL.SLIDELOG rl:y 5 10 NOW {NOW}"));
    assert!(e.starts_with("NOPERM "), "{e}");
    let e = refused(&mut u, &format!("RL.GCRA rl:x:1 5 10 NOW {NOW}"));
    assert!(e.starts_with("NOPERM "), "{e}");
}

/// `~rl:x*` covers the derived keys: every limiter works and counts on the same
/// counters the default user filled.
#[test]
fn prefix_pattern_allows_derived_keys() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(
        &mut admin,
        "prefix",
        &[
            "~rl:x*",
            "+rl.slidelog",
            "+rl.slidecount",
            "+rl.fixed",
            "+rl.gcra",
        ],
    );
    let mut u = login(&s, "prefix");
    assert_eq!(
        rl(&mut u, &format!("RL.FIXED rl:x 5 10 NOW {NOW}")),
        (1, 3, 0, 8766)
    );
    assert_eq!(get(&mut admin, &format!("rl:x:{FIXED_N}")), Some(2));
    let r = rl(&mut u, &format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"));
    // current 1 + floor(previous 1 × 8.77 s / 10 s) = 1, plus this one.
    assert_eq!((r.0, r.1), (1, 3));
    assert_eq!(get(&mut admin, &format!("rl:x:{SLIDE_N}")), Some(2));
    assert_eq!(rl(&mut u, &format!("RL.SLIDELOG rl:x 5 10 NOW {NOW}")).0, 1);
    assert_eq!(rl(&mut u, &format!("RL.GCRA rl:xg 5 10 NOW {NOW}")).0, 1);
    // PEEK reads the same counter (2 spent, 1 more would leave 2).
    assert_eq!(
        rl(&mut u, &format!("RL.FIXED rl:x 5 10 NOW {NOW} PEEK")).1,
        2
    );
}

/// Read-only key permission `%R~rl:*`: Redis itself refuses every limiter command on
/// the base key, PEEK included, because the commands declare their key as read-write
/// (module commands on 7.0 get the legacy key spec `RW access update`).
#[test]
fn read_only_pattern_refuses_writes_and_peek() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(&mut admin, "reader", &["%R~rl:*", "+@all"]);
    let mut u = login(&s, "reader");
    // The user can read the limiter state with core commands.
    assert_eq!(get(&mut u, &format!("rl:x:{FIXED_N}")), Some(1));

    let before = state(&mut admin);
    for cmd in [
        "RL.SLIDELOG rl:x",
        "RL.SLIDECOUNT rl:x",
        "RL.FIXED rl:x",
        "RL.GCRA rl:g",
    ] {
        for opts in ["", "PEEK"] {
            let line = format!("{cmd} 5 10 NOW {NOW} {opts}");
            let e = refused(&mut u, &line);
            assert!(e.starts_with("NOPERM "), "{line}: {e}");
            assert_eq!(state(&mut admin), before, "{line} changed something");
        }
    }
}

/// The module's own check keeps reads and writes apart: base key writable, derived
/// keys read-only (`%RW~rl:x %R~rl:x:*`). A spending call is refused (NOPERM naming
/// the counter it would write) and writes nothing; PEEK, which only reads, answers.
#[test]
fn read_only_derived_keys_allow_peek_only() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(
        &mut admin,
        "peeker",
        &["%RW~rl:x", "%R~rl:x:*", "+rl.slidecount", "+rl.fixed"],
    );
    let mut u = login(&s, "peeker");
    let before = state(&mut admin);
    for (line, derived) in [
        (format!("RL.FIXED rl:x 5 10 NOW {NOW}"), FIXED_N),
        (format!("RL.FIXED rl:x 5 10 NOW {NOW} COST 5"), FIXED_N),
        (format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"), SLIDE_N),
    ] {
        let e = refused(&mut u, &line);
        assert!(e.starts_with("NOPERM "), "{line}: {e}");
        assert!(e.contains(&format!("'rl:x:{derived}'")), "{line}: {e}");
        assert_eq!(state(&mut admin), before, "{line} changed something");
    }
    // PEEK: the decision on the counters the default user wrote (1 of 5 spent).
    assert_eq!(
        rl(&mut u, &format!("RL.FIXED rl:x 5 10 NOW {NOW} PEEK")),
        (1, 3, 0, 8766)
    );
    assert_eq!(
        rl(&mut u, &format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW} PEEK")).1,
        3
    );
    assert_eq!(state(&mut admin), before);
}

/// RL.SLIDECOUNT writes `<key>:<i>` and only reads `<key>:<i-1>`: write permission on
/// the current counter and read permission on the previous one is exactly enough;
/// without the read permission the call is refused, naming the previous counter.
#[test]
fn slidecount_needs_read_on_the_previous_counter_only() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    let current = format!("%RW~rl:x:{SLIDE_N}");
    let previous = format!("%R~rl:x:{}", SLIDE_N - 1);
    setuser(
        &mut admin,
        "nearly",
        &["%RW~rl:x", &current, "+rl.slidecount"],
    );
    setuser(
        &mut admin,
        "enough",
        &["%RW~rl:x", &current, &previous, "+rl.slidecount"],
    );
    let line = format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}");

    let mut nearly = login(&s, "nearly");
    let before = state(&mut admin);
    for l in [line.clone(), format!("{line} PEEK")] {
        let e = refused(&mut nearly, &l);
        assert!(e.starts_with("NOPERM "), "{l}: {e}");
        assert!(e.contains(&format!("'rl:x:{}'", SLIDE_N - 1)), "{l}: {e}");
        assert_eq!(state(&mut admin), before, "{l} changed something");
    }

    let mut enough = login(&s, "enough");
    assert_eq!(rl(&mut enough, &line).0, 1);
    assert_eq!(get(&mut admin, &format!("rl:x:{SLIDE_N}")), Some(2));
    assert_eq!(get(&mut admin, &format!("rl:x:{}", SLIDE_N - 1)), Some(1));
}

/// The operations page: where the ACL lines are.
fn operations_page() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md")
}

/// The docs' by-name line (every server), run as written: the user it creates may run
/// every command the kits send on `rl:*` keys (derived keys included), and nothing else.
#[test]
fn readme_acl_line_grants_the_commands() {
    let page = operations_page();
    let line = page
        .lines()
        .find(|l| l.trim_start().starts_with("ACL SETUSER app ") && l.contains("+rl.fixed"))
        .expect("docs/operations.md shows an ACL SETUSER line that grants by name")
        .trim();
    let s = Server::start_with_env(&[], &[("RL_SECRET", "acl test secret")]);
    app_may_run_every_kit_command(&s, line);
}

/// The docs' category line (`+@ratelimit`), run as written where the server lets modules
/// add ACL categories (Redis 7.4+, Valkey): the same grants as the by-name line.
#[test]
fn docs_category_line_grants_the_commands() {
    let page = operations_page();
    let line = page
        .lines()
        .find(|l| l.trim_start().starts_with("ACL SETUSER app ") && l.contains("+@ratelimit"))
        .expect("docs/operations.md shows an ACL SETUSER line that grants +@ratelimit")
        .trim();
    let s = Server::start_with_env(&[], &[("RL_SECRET", "acl test secret")]);
    let categories: Vec<String> = redis::cmd("ACL").arg("CAT").query(&mut s.conn()).unwrap();
    if !categories.iter().any(|c| c == "ratelimit") {
        skipped("this server has no module ACL categories (Redis 7.4+ and Valkey do); run with RL_SERVER set to one");
        return;
    }
    app_may_run_every_kit_command(&s, line);
}

/// Runs `line` (an `ACL SETUSER app …` from the docs) as the default user, then logs in
/// as `app`: every command a kit sends succeeds on `rl:*` keys, anything else is refused
/// and changes nothing.
fn app_may_run_every_kit_command(s: &Server, line: &str) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let password = words
        .iter()
        .find_map(|w| w.strip_prefix('>'))
        .expect("the line sets a password");
    let mut admin = s.conn();
    let version: String = {
        let info: String = redis::cmd("INFO").arg("server").query(&mut admin).unwrap();
        let field = |name: &str| info.lines().find_map(|l| l.strip_prefix(name));
        match field("valkey_version:") {
            Some(v) => format!("valkey {}", v.trim()),
            None => format!("redis {}", field("redis_version:").unwrap().trim()),
        }
    };
    let ok = query(&mut admin, line).unwrap_or_else(|e| panic!("{line} on {version}: {e}"));
    assert_eq!(ok, Value::Okay, "{line}");

    let client =
        redis::Client::open(format!("redis://app:{password}@127.0.0.1:{}/", s.port)).unwrap();
    let mut app = client.get_connection().expect("log in as app");
    for cmd in [
        format!("RL.SLIDELOG rl:log:1 5 10 NOW {NOW}"),
        format!("RL.SLIDECOUNT rl:cnt:1 5 10 NOW {NOW}"),
        format!("RL.FIXED rl:fixed:1 5 10 NOW {NOW}"),
        format!("RL.COUNTER rl:counter:1 5 10 NOW {NOW}"),
        format!("RL.SLIDEWINDOW rl:window:1 5 10 NOW {NOW}"),
        format!("RL.GCRA rl:gcra:1 5 10 NOW {NOW}"),
        format!("RL.TOKENBUCKET rl:bucket:1 5 10 REFILL 5 NOW {NOW}"),
        format!("RL.CONCURRENCY rl:lease:1 5 10 ACQUIRE id-1 NOW {NOW}"),
    ] {
        assert_eq!(rl(&mut app, &cmd).0, 1, "{cmd} on {version}");
    }
    let all = format!("RL.ALL 2 FIXED rl:{{a}}:1 5 10 GCRA rl:{{a}}:2 5 10 NOW {NOW}");
    match query_line(&mut app, &all) {
        Ok(Value::Array(v)) => assert_eq!(v.first(), Some(&Value::Int(1)), "{all}"),
        other => panic!("{all} on {version}: {other:?}"),
    }
    let throttle: Vec<i64> = redis::cmd("RL.THROTTLE")
        .arg("rl:throttle:1")
        .arg(15)
        .arg(30)
        .arg(60)
        .query(&mut app)
        .unwrap_or_else(|e| panic!("RL.THROTTLE on {version}: {e}"));
    assert_eq!(throttle[0], 0, "RL.THROTTLE admitted");
    let pseudonym: String = redis::cmd("RL.PSEUDONYM")
        .arg("192.0.2.1")
        .arg("trending")
        .query(&mut app)
        .unwrap_or_else(|e| panic!("RL.PSEUDONYM on {version}: {e}"));
    assert!(
        pseudonym.ends_with(":trending") && pseudonym.len() == 33,
        "{pseudonym}"
    );
    // What every kit's top() sends.
    let top = query_line(&mut app, "RL.TOP COUNT 10")
        .unwrap_or_else(|e| panic!("RL.TOP on {version}: {e}"));
    assert!(matches!(top, Value::Array(_)), "RL.TOP: {top:?}");

    let before = state(&mut admin);
    for line in [
        format!("RL.FIXED other:1 5 10 NOW {NOW}"),
        format!("RL.GCRA x 5 10 NOW {NOW}"),
        "GET rl:gcra:1".to_string(),
        "DEL rl:gcra:1".to_string(),
    ] {
        let e = refused(&mut app, &line);
        assert!(e.starts_with("NOPERM "), "{line}: {e}");
    }
    assert_eq!(state(&mut admin), before);
}

/// The patterns the operations page suggests for granting a limiter key with its derived keys
/// ("grant `~rl:x*` (or `%W~rl:x*`) instead") each let the user run every limiter on
/// `rl:x`.
#[test]
fn readme_suggested_patterns_grant_the_limiters() {
    let readme = operations_page();
    let patterns: Vec<&str> = readme
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.ends_with("~rl:x*") && !t.contains(' '))
        .collect();
    assert!(patterns.contains(&"~rl:x*"), "{patterns:?}");
    for (n, pattern) in patterns.iter().enumerate() {
        let s = Server::start();
        let mut admin = s.conn();
        let user = format!("suggested{n}");
        setuser(
            &mut admin,
            &user,
            &[
                pattern,
                "+rl.slidelog",
                "+rl.slidecount",
                "+rl.fixed",
                "+rl.gcra",
            ],
        );
        let mut u = login(&s, &user);
        for line in [
            format!("RL.FIXED rl:x 5 10 NOW {NOW}"),
            format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"),
            format!("RL.SLIDELOG rl:x 5 10 NOW {NOW}"),
            format!("RL.GCRA rl:xg 5 10 NOW {NOW}"),
        ] {
            match query(&mut u, &line) {
                Ok(_) => {}
                Err(e) => panic!("README suggests `{pattern}`, but {line} gets: {e}"),
            }
        }
    }
}

/// `ACL LOG` as one map per entry (field → value, integers as text), newest first.
fn acl_log(admin: &mut Connection) -> Vec<std::collections::BTreeMap<String, String>> {
    let entries: Vec<Value> = redis::cmd("ACL").arg("LOG").query(admin).expect("ACL LOG");
    let text = |v: &Value| match v {
        Value::Int(n) => n.to_string(),
        other => redis::from_redis_value::<String>(other).unwrap_or_default(),
    };
    entries
        .iter()
        .map(|e| match e {
            Value::Array(flat) => flat
                .chunks(2)
                .filter_map(|p| match p {
                    [k, v] => Some((text(k), text(v))),
                    _ => None,
                })
                .collect(),
            Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), text(v))).collect(),
            other => panic!("an ACL LOG entry: {other:?}"),
        })
        .collect()
}

/// A derived key the module refuses shows in `ACL LOG` as the server's own refusals
/// do: reason `key`, context `module`, the derived key as the object, the user, and
/// the command in the client info. (Redis 7.0 has no `ACLAddLogEntryByUserName`:
/// there the call is refused all the same, and the test reports itself skipped.)
#[test]
fn refused_derived_keys_are_in_the_acl_log() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(
        &mut admin,
        "audited",
        &["~rl:x", "%R~rl:x:*", "+rl.fixed", "+rl.slidecount"],
    );
    let mut u = login(&s, "audited");
    let _: () = redis::cmd("ACL")
        .arg("LOG")
        .arg("RESET")
        .query(&mut admin)
        .unwrap();
    let refusals = [
        (
            "rl.fixed",
            format!("RL.FIXED rl:x 5 10 NOW {NOW}"),
            FIXED_N.to_string(),
        ),
        (
            "rl.slidecount",
            format!("RL.SLIDECOUNT rl:x 5 10 NOW {NOW}"),
            SLIDE_N.to_string(),
        ),
        // The block key, read first, is refused before the window counter.
        (
            "rl.fixed",
            format!("RL.FIXED rl:x 5 10 BLOCK 60 NOW {NOW}"),
            "block".to_string(),
        ),
    ];
    for (_, line, derived) in &refusals {
        let e = refused(&mut u, line);
        assert!(e.contains(&format!("'rl:x:{derived}'")), "{line}: {e}");
    }
    // A read the user may make (PEEK, read-only derived keys) logs nothing.
    query(&mut u, &format!("RL.FIXED rl:x 5 10 NOW {NOW} PEEK")).expect("PEEK");
    query(
        &mut u,
        &format!("RL.FIXED rl:x 5 10 BLOCK 60 NOW {NOW} PEEK"),
    )
    .expect("PEEK");
    let log = acl_log(&mut admin);
    let info: String = redis::cmd("INFO").arg("server").query(&mut admin).unwrap();
    if info.contains("redis_version:7.0.") && !info.contains("valkey_version") {
        assert!(log.is_empty(), "{log:?}");
        skipped("Redis 7.0 has no RedisModule_ACLAddLogEntryByUserName: refusals are not in its ACL LOG");
        return;
    }
    eprintln!("ACL LOG:");
    for entry in &log {
        eprintln!("  {entry:?}");
    }
    assert_eq!(log.len(), refusals.len(), "{log:?}");
    // Newest first.
    for (entry, (command, _, derived)) in log.iter().zip(refusals.iter().rev()) {
        let field = |name: &str| entry.get(name).map(String::as_str).unwrap_or("");
        assert_eq!(field("reason"), "key", "{entry:?}");
        assert_eq!(field("context"), "module", "{entry:?}");
        assert_eq!(field("object"), format!("rl:x:{derived}"), "{entry:?}");
        assert_eq!(field("username"), "audited", "{entry:?}");
        assert_eq!(field("count"), "1", "{entry:?}");
        assert!(
            field("client-info").contains(&format!("cmd={command}")),
            "{entry:?}"
        );
    }
}

/// `ACL DRYRUN` checks a command's declared keys only: it answers OK for a call the
/// module then refuses on a derived key, as docs/operations.md says.
#[test]
fn acl_dryrun_cannot_see_derived_keys() {
    let s = Server::start();
    let mut admin = s.conn();
    populate(&mut admin);
    setuser(&mut admin, "dry", &["~rl:x", "+rl.fixed", "+rl.slidelog"]);
    let mut u = login(&s, "dry");
    for (line, derived) in [
        (format!("RL.FIXED rl:x 5 10 NOW {NOW}"), FIXED_N.to_string()),
        (
            format!("RL.SLIDELOG rl:x 5 10 BLOCK 60 NOW {NOW}"),
            "block".to_string(),
        ),
    ] {
        let mut dryrun = redis::cmd("ACL");
        dryrun.arg("DRYRUN").arg("dry");
        for w in line.split_whitespace() {
            dryrun.arg(w);
        }
        let ok: String = dryrun
            .query(&mut admin)
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(ok, "OK", "{line}");
        let before = state(&mut admin);
        let e = refused(&mut u, &line);
        assert_eq!(
            e,
            format!("NOPERM this user has no permissions to access the 'rl:x:{derived}' key"),
            "{line}"
        );
        assert!(state(&mut admin) == before, "{line} wrote");
    }
    // A base key the user may not touch: DRYRUN sees that one.
    let mut dryrun = redis::cmd("ACL");
    dryrun
        .arg("DRYRUN")
        .arg("dry")
        .arg("RL.FIXED")
        .arg("rl:y")
        .arg("5")
        .arg("10");
    let no: String = dryrun.query(&mut admin).unwrap();
    assert!(no.contains("no permissions") && no.contains("rl:y"), "{no}");
}
