//! Over `maxmemory` with `noeviction`: the limiter commands are not flagged deny-oom
//! (so that PEEK can still answer), and the module refuses every call that may write
//! with Redis's standard OOM error, writing nothing (DUMP and expiry of every key and
//! the dirty counter compared before and after). PEEK still answers with a decision
//! on the existing state. Once memory is available again, calls work and count from
//! where they were (the refused calls spent nothing).
mod common;
use common::*;

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
const NOW: u64 = T0 + 1_500_000;
/// Each limiter on its key, 10 per 600 s (long enough that no state expires on the
/// server clock while the test runs).
const LIMITERS: [(&str, &str); 4] = [
    ("RL.SLIDELOG", "rl:log"),
    ("RL.SLIDECOUNT", "rl:cnt"),
    ("RL.FIXED", "rl:fixed"),
    ("RL.GCRA", "rl:gcra"),
];

fn error_line(e: &redis::RedisError) -> String {
    match e.detail() {
        Some(d) => format!("{} {d}", e.code().unwrap_or("?")),
        None => e.code().unwrap_or("?").to_string(),
    }
}

fn info_int(c: &mut Connection, section: &str, field: &str) -> i64 {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

fn set_maxmemory(c: &mut Connection, bytes: i64) {
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(bytes)
        .query::<()>(c)
        .unwrap();
}

type State = (Vec<(Vec<u8>, Option<Vec<u8>>, i64)>, i64);

fn state(c: &mut Connection) -> State {
    (
        snapshot(c),
        info_int(c, "persistence", "rdb_changes_since_last_save"),
    )
}

/// One admitted unit on each limiter, and a few other keys.
fn populate(c: &mut Connection) {
    for (cmd, key) in LIMITERS {
        assert_eq!(rl(c, &format!("{cmd} {key} 10 600 NOW {NOW}")).0, 1);
    }
    redis::cmd("SET")
        .arg("plain")
        .arg("x")
        .query::<()>(c)
        .unwrap();
}

/// Every kind of call that may write: admitted ones, denied ones (RL.SLIDELOG's
/// denials refresh the TTL), on existing and on new keys, and the largest costs.
fn spending_calls() -> Vec<String> {
    let mut v = Vec::new();
    for (cmd, key) in LIMITERS {
        v.push(format!("{cmd} {key} 10 600 NOW {NOW}"));
        v.push(format!("{cmd} {key} 10 600 NOW {NOW} COST 5"));
        v.push(format!("{cmd} {key} 10 600 NOW {NOW} COST 11"));
        v.push(format!("{cmd} {key}:new 10 600 NOW {NOW}"));
        v.push(format!("{cmd} {key} 10 600"));
        // The next window (a new counter, a trim of the log).
        v.push(format!("{cmd} {key} 10 600 NOW {}", NOW + 60_000_000));
    }
    v.push(format!(
        "RL.SLIDELOG rl:log 1000000 600 COST 1000 NOW {NOW}"
    ));
    v.push(format!("RL.GCRA rl:gcra 10 600 BURST 20 COST 15 NOW {NOW}"));
    v
}

#[test]
fn over_maxmemory_spending_calls_get_oom_and_peek_answers() {
    let s = Server::start_with_env(
        &["--maxmemory-policy", "noeviction"],
        &[("RL_SECRET", "oom test secret")],
    );
    let mut c = s.conn();
    populate(&mut c);
    set_maxmemory(&mut c, 1);
    // The server really is out of memory: core writes are refused too.
    assert_eq!(err_line(&mut c, "SET other y"), OOM);

    let before = state(&mut c);
    for line in spending_calls() {
        assert_eq!(err_line(&mut c, &line), OOM, "{line}");
        assert_eq!(state(&mut c), before, "{line} changed something");
    }
    // Arguments are still validated first: a bad call gets its own error.
    assert!(err_line(&mut c, "RL.FIXED rl:fixed 0 60").starts_with("ERR limit"));
    assert!(err_line(&mut c, "RL.FIXED rl:fixed 10 600 BURST 2").starts_with("ERR syntax"));

    // PEEK answers on the existing state: one unit of ten spent on each limiter.
    for (cmd, key) in LIMITERS {
        let r = rl(&mut c, &format!("{cmd} {key} 10 600 NOW {NOW} PEEK"));
        assert_eq!((r.0, r.1), (1, 8), "{cmd} PEEK");
        let r = rl(
            &mut c,
            &format!("{cmd} {key} 10 600 NOW {NOW} PEEK COST 10"),
        );
        assert_eq!((r.0, r.1), (0, 9), "{cmd} PEEK COST 10");
        assert!(r.2 > 0, "{cmd}: {r:?}");
        let r = rl(&mut c, &format!("{cmd} {key}:new 10 600 NOW {NOW} PEEK"));
        assert_eq!((r.0, r.1), (1, 9), "{cmd} PEEK on a new key");
    }
    // RL.PSEUDONYM writes nothing, so it answers too.
    let p: String = redis::cmd("RL.PSEUDONYM")
        .arg("192.0.2.1")
        .query(&mut c)
        .unwrap();
    assert_eq!(p.len(), 24);
    assert_eq!(state(&mut c), before);

    // INFO rl counted the refusals as errors and the PEEKs as decisions.
    let info: String = redis::cmd("INFO").arg("rl").query(&mut c).unwrap();
    for field in [
        "rl_slidelog_errors:7",
        "rl_slidecount_errors:6",
        "rl_fixed_errors:8",
        "rl_gcra_errors:7",
        "rl_fixed_allowed:3",
    ] {
        assert!(info.lines().any(|l| l.trim() == field), "{field}: {info}");
    }

    // Memory again: the calls work, and count on from the one unit spent before.
    set_maxmemory(&mut c, 0);
    for (cmd, key) in LIMITERS {
        let r = rl(&mut c, &format!("{cmd} {key} 10 600 NOW {NOW}"));
        assert_eq!((r.0, r.1), (1, 8), "{cmd} after raising maxmemory");
    }
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.SLIDELOG rl:log 1000000 600 COST 1000 NOW {NOW}")
        )
        .0,
        1
    );
    let members: i64 = redis::cmd("ZCARD").arg("rl:log").query(&mut c).unwrap();
    assert_eq!(members, 1002);
}

/// With `maxmemory` a little above the current usage, admitted RL.SLIDELOG calls fill
/// memory until the limit is crossed; from then on every spending call is refused
/// with the OOM error (checked before anything is written, so memory stops growing
/// there) while PEEK keeps answering.
#[test]
fn filling_up_to_maxmemory() {
    let s = Server::start_with(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    populate(&mut c);
    let used = info_int(&mut c, "memory", "used_memory");
    let limit = used + 2 * 1024 * 1024;
    set_maxmemory(&mut c, limit);

    let mut admitted: i64 = 0;
    let mut refused_at = None;
    for k in 0..1_000u64 {
        let line = format!("RL.SLIDELOG rl:fill 1000000 600 COST 1000 NOW {}", NOW + k);
        match query_line(&mut c, &line) {
            Ok(v) => {
                let r: Reply = redis::from_redis_value(&v).unwrap();
                assert_eq!(r.0, 1, "{line}");
                admitted += 1;
            }
            Err(e) => {
                assert_eq!(error_line(&e), OOM, "{line}");
                refused_at = Some(k);
                break;
            }
        }
    }
    let refused_at = refused_at.expect("never ran out of memory");
    assert!(admitted > 0, "refused before anything was admitted");
    let used = info_int(&mut c, "memory", "used_memory");
    assert!(used > limit, "refused at {used} of {limit}");
    // Memory stopped growing near the limit: at most one call's worth above it.
    assert!(used < limit + 1024 * 1024, "{used} is far above {limit}");
    let members: i64 = redis::cmd("ZCARD").arg("rl:fill").query(&mut c).unwrap();
    assert_eq!(members, admitted * 1000, "refused at call {refused_at}");

    // From here on, pin the server over the limit (memory use drifts a little with
    // client buffers), and check every limiter.
    set_maxmemory(&mut c, 1);
    let before = state(&mut c);
    for line in spending_calls() {
        assert_eq!(err_line(&mut c, &line), OOM, "{line}");
    }
    assert_eq!(state(&mut c), before);
    let r = rl(
        &mut c,
        &format!("RL.SLIDELOG rl:fill 1000000 600 NOW {NOW} PEEK"),
    );
    assert_eq!((r.0, r.1), (1, 1_000_000 - admitted * 1000 - 1));
    set_maxmemory(&mut c, 0);
    let r = rl(
        &mut c,
        &format!("RL.SLIDELOG rl:fill 1000000 600 NOW {NOW}"),
    );
    assert_eq!((r.0, r.1), (1, 1_000_000 - admitted * 1000 - 1));
}

/// RL.THROTTLE over `maxmemory` (noeviction): a spending call gets the OOM error and
/// writes nothing, on an existing key and on a new one, where redis-cell's
/// CL.THROTTLE keeps creating keys; quantity 0 still answers, from the stored TAT.
#[test]
fn rl_throttle_gets_oom_where_redis_cell_keeps_writing_and_quantity_zero_answers() {
    // Without redis-cell this says SKIPPED for its half now, and checks RL.THROTTLE alone.
    let cell = redis_cell();
    let mut extra = vec!["--maxmemory-policy", "noeviction"];
    let cell_arg = cell
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    if cell.is_some() {
        extra.extend(["--loadmodule", cell_arg.as_str()]);
    }
    let s = Server::start_with(&extra);
    let mut c = s.conn();
    let throttle = |c: &mut Connection, line: &str| -> (i64, i64, i64, i64, i64) {
        redis::from_redis_value(&query_line(c, line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .unwrap()
    };
    assert_eq!(
        throttle(&mut c, &format!("RL.THROTTLE t 4 1 60 NOW {NOW}")).2,
        4
    );
    set_maxmemory(&mut c, 1);
    let before = state(&mut c);
    for line in [
        format!("RL.THROTTLE t 4 1 60 NOW {NOW}"),
        format!("RL.THROTTLE t 4 1 60 2 NOW {NOW}"),
        "RL.THROTTLE t 4 1 60".to_string(),
        format!("RL.THROTTLE new 4 1 60 NOW {NOW}"),
    ] {
        assert_eq!(err_line(&mut c, &line), OOM, "{line}");
        assert_eq!(state(&mut c), before, "{line} changed something");
    }
    assert_eq!(
        throttle(&mut c, &format!("RL.THROTTLE t 4 1 60 0 NOW {NOW}")),
        (0, 5, 4, -1, 60)
    );
    assert_eq!(
        throttle(&mut c, &format!("RL.THROTTLE new 4 1 60 0 NOW {NOW}")),
        (0, 5, 5, -1, 0)
    );
    assert_eq!(state(&mut c), before);
    if cell.is_none() {
        return;
    }
    // redis-cell is not refused: it creates a key over maxmemory.
    throttle(&mut c, "CL.THROTTLE cell:new 4 1 60");
    let exists: i64 = redis::cmd("EXISTS").arg("cell:new").query(&mut c).unwrap();
    assert_eq!(exists, 1, "CL.THROTTLE wrote nothing over maxmemory");
}
