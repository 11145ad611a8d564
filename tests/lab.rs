//! The boundary-burst lab of the article the Lua scripts come from ("Rate Limiting:
//! Fixed Window vs Sliding Window"), with the decision time given by NOW instead of waiting for the clock:
//! limit 8 per 10 s, 8 requests 200 ms before a window boundary, then 8 more 200 ms
//! after it. The fixed window lets both batches through (16 in about 400 ms), the
//! sliding log denies the whole second batch, and the sliding counter admits one more
//! (floor(8 × 0.98) = 7 of the previous window still count). The module's commands and
//! the reference Lua scripts (`lua/`) run the same lab; `make lab` prints the table.
mod common;
use common::*;

const LIMIT: u64 = 8;
const WINDOW_S: u64 = 10;
const WINDOW_US: u64 = WINDOW_S * 1_000_000;
/// A window boundary (T0 is a multiple of every window the tests use).
const BOUNDARY: u64 = T0 + 6 * WINDOW_US;
const BEFORE: u64 = BOUNDARY - 200_000;
const AFTER: u64 = BOUNDARY + 200_000;

const FIXED_LUA: &str = include_str!("../lua/fixed_window.lua");
const LOG_LUA: &str = include_str!("../lua/sliding_window_log.lua");
const COUNTER_LUA: &str = include_str!("../lua/sliding_window_counter.lua");

/// One limiter's run through the lab.
struct Row {
    name: &'static str,
    phase1: u64,
    phase2: u64,
    /// The module's retry_after_ms on the first denial of the second batch.
    first_retry_ms: Option<i64>,
}

/// Sends a batch of LIMIT requests, one microsecond apart from `start`, through
/// `request` (the time in µs -> `{allowed, ...}` reply); returns how many were admitted
/// and the retry_after_ms of the first denial, when the reply has one.
fn batch(start: u64, request: &mut impl FnMut(u64) -> Vec<i64>) -> (u64, Option<i64>) {
    let mut admitted = 0;
    let mut first_retry = None;
    for j in 0..LIMIT {
        let reply = request(start + j);
        match reply[0] {
            1 => admitted += 1,
            0 => {
                if first_retry.is_none() {
                    first_retry = reply.get(2).copied();
                }
            }
            other => panic!("allowed = {other}"),
        }
    }
    (admitted, first_retry)
}

fn run(name: &'static str, mut request: impl FnMut(u64) -> Vec<i64>) -> Row {
    let (phase1, _) = batch(BEFORE, &mut request);
    let (phase2, first_retry_ms) = batch(AFTER, &mut request);
    Row {
        name,
        phase1,
        phase2,
        first_retry_ms,
    }
}

fn module(c: &mut Connection, command: &str, key: &str, now: u64) -> Vec<i64> {
    let r = rl(c, &format!("{command} {key} {LIMIT} {WINDOW_S} NOW {now}"));
    vec![r.0, r.1, r.2, r.3]
}

fn load(c: &mut Connection, source: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(c)
        .unwrap()
}

fn script(c: &mut Connection, sha: &str, keys: &[&str], args: &[String]) -> Vec<i64> {
    redis::cmd("EVALSHA")
        .arg(sha)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(c)
        .unwrap()
}

/// The window index and elapsed ratio the article's PHP caller passes to the counter
/// script, from microtime(true) (a double of seconds); 14 significant digits as PHP's
/// (string) cast writes them.
fn php_window(now_us: u64) -> (u64, String) {
    let now = (now_us / 1_000_000) as f64 + (now_us % 1_000_000) as f64 / 1e6;
    let index = (now / WINDOW_S as f64).floor() as u64;
    let elapsed = (now - (index * WINDOW_S) as f64) / WINDOW_S as f64;
    (index, format!("{elapsed:.13e}"))
}

#[test]
fn boundary_burst() {
    let server = Server::start();
    let c = &mut server.conn();
    let fixed_sha = load(c, FIXED_LUA);
    let log_sha = load(c, LOG_LUA);
    let counter_sha = load(c, COUNTER_LUA);
    let mut serial = 0u32;

    let rows = [
        run("RL.FIXED (module)", |now| {
            module(c, "RL.FIXED", "lab:fixed", now)
        }),
        run("fixed_window.lua", |now| {
            let args = [
                (now / 1_000_000).to_string(),
                WINDOW_S.to_string(),
                LIMIT.to_string(),
            ];
            script(c, &fixed_sha, &["lab:lua:fixed"], &args)
        }),
        run("RL.SLIDELOG (module)", |now| {
            module(c, "RL.SLIDELOG", "lab:log", now)
        }),
        run("sliding_window_log.lua", |now| {
            serial += 1;
            let member = format!("{now}:{serial:08x}");
            let args = [
                now.to_string(),
                WINDOW_US.to_string(),
                LIMIT.to_string(),
                member,
            ];
            script(c, &log_sha, &["lab:lua:log"], &args)
        }),
        run("RL.SLIDECOUNT (module)", |now| {
            module(c, "RL.SLIDECOUNT", "lab:cnt", now)
        }),
        run("sliding_window_counter.lua", |now| {
            let (i, elapsed) = php_window(now);
            let keys = [format!("lab:lua:cnt:{i}"), format!("lab:lua:cnt:{}", i - 1)];
            let args = [LIMIT.to_string(), elapsed, WINDOW_S.to_string()];
            script(c, &counter_sha, &[&keys[0], &keys[1]], &args)
        }),
    ];

    println!();
    println!(
        "Boundary-burst lab: limit {LIMIT} per {WINDOW_S} s; {LIMIT} requests 200 ms before \
         a window boundary, {LIMIT} more 200 ms after it."
    );
    println!();
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>18} {:>16}",
        "limiter", "before", "after", "denied", "total in ~400 ms", "first retry (ms)"
    );
    for r in &rows {
        println!(
            "{:<28} {:>10} {:>10} {:>10} {:>18} {:>16}",
            r.name,
            format!("{}/{LIMIT}", r.phase1),
            format!("{}/{LIMIT}", r.phase2),
            LIMIT - r.phase2,
            r.phase1 + r.phase2,
            r.first_retry_ms.map_or("-".into(), |ms| ms.to_string()),
        );
    }
    println!();
    println!("RL.FIXED:      the counter key changes at the boundary, so both batches pass.");
    println!("RL.SLIDELOG:   the first batch is still inside the last 10 s; the oldest entry");
    println!("               leaves 9.8 s after it arrived, 9600 ms after the second batch.");
    println!("RL.SLIDECOUNT: 0 + floor(8 × 9.8 / 10) = 7 < 8, so one more fits; then 8.");
    println!();

    let expect = [
        ("RL.FIXED (module)", 8, 8, None),
        ("fixed_window.lua", 8, 8, None),
        ("RL.SLIDELOG (module)", 8, 0, Some(9_600)),
        ("sliding_window_log.lua", 8, 0, None),
        // The second request after the boundary (cur 1, prev 8) fits once
        // 1 + floor(8 * x / w) <= 7, x the part of the previous window still covered:
        // x < 7w/8, i.e. 1.25 s into the window, 1050 ms after 200.001 ms.
        ("RL.SLIDECOUNT (module)", 8, 1, Some(1_050)),
        ("sliding_window_counter.lua", 8, 1, None),
    ];
    for (r, (name, phase1, phase2, retry)) in rows.iter().zip(expect) {
        assert_eq!(r.name, name);
        assert_eq!(
            (r.phase1, r.phase2, r.first_retry_ms),
            (phase1, phase2, retry),
            "{name}"
        );
    }
    // The layouts the article shows: rl:fixed:<window start in seconds>, and a log
    // with one entry per admitted request.
    for key in ["lab:fixed", "lab:lua:fixed"] {
        for (start, count) in [(BOUNDARY - WINDOW_US, 8), (BOUNDARY, 8)] {
            let name = format!("{key}:{}", start / 1_000_000);
            let v: u64 = redis::cmd("GET").arg(&name).query(c).unwrap();
            assert_eq!(v, count, "{name}");
        }
    }
    for key in ["lab:log", "lab:lua:log"] {
        let n: u64 = redis::cmd("ZCARD").arg(key).query(c).unwrap();
        assert_eq!(n, LIMIT, "{key}");
    }
}
