//! The scripts in `scripts/` against the module: the same replies, the same error texts
//! and the same stored state, call for call.
//!
//! Each differential test runs a seeded random sequence of calls on twin keys: the
//! module on `{uN}:m…`, the script (by EVALSHA) on `{uN}:s…`, same hash tag, same
//! arguments, NOW stepped across window boundaries, TAT instants and lease expiries.
//! Every reply pair must be equal, and every few calls both twins' keys (values,
//! members and scores, expiry instants) are compared. The mixed-fleet tests run one
//! key on the module only and its twin on a random mix of module and script, so every
//! decision on the mixed key must be the one the module alone made.
//!
//! Expiry runs on the server's real clock while the tests step NOW: every window, TTL
//! and emission interval in the random runs is at least 100 s, so that no key expires
//! in real time during a run (which could hit one twin between the two calls of a
//! pair). A call that may leave a shorter TTL (a GCRA REFUND, a lease RELEASE, any token
//! bucket call: its key expires when the bucket is full again, which a step can make
//! a millisecond away) has both twins' expiry compared and then moved to one shared far
//! instant. So does a spending
//! call with `BLOCK … STRIKES` (and no EXTEND or BACKOFF): while blocked it rewrites the
//! block key with the time left, which NOW may put just before the block's end.
//!
//! The `*_block_*` runs give every identity a penalty box (`BLOCK` of at least 100 s,
//! with EXTEND, BACKOFF and STRIKES at random, IMPOSE among the modes) and step NOW onto
//! the blocks' ends; the block keys are compared with the rest.
mod common;
use common::*;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const COMMANDS: [&str; 10] = [
    "fixed",
    "counter",
    "slidecount",
    "slidewindow",
    "slidelog",
    "gcra",
    "tokenbucket",
    "concurrency",
    "throttle",
    "all",
];

/// Random calls per command (per test), and calls between two state comparisons.
const CALLS: usize = 5_000;
const BATCH: usize = 50;
/// How far apart the twins' expiry instants may be: the module takes its instant from
/// the wall clock, the script from the time its run started; a preempted server can
/// put milliseconds between two adjacent calls on this shared machine.
const TOL_MS: i64 = 250;

/// The scripts under test: `scripts/`, or RL_SCRIPTS_DIR (a mutated copy).
fn script_text(name: &str) -> String {
    let dir = std::env::var("RL_SCRIPTS_DIR")
        .unwrap_or_else(|_| format!("{}/scripts", env!("CARGO_MANIFEST_DIR")));
    let path = format!("{dir}/{name}.lua");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

struct Shas(BTreeMap<&'static str, String>);

fn load_scripts(c: &mut Connection) -> Shas {
    Shas(
        COMMANDS
            .iter()
            .map(|&n| {
                let sha: String = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(script_text(n))
                    .query(c)
                    .unwrap_or_else(|e| panic!("SCRIPT LOAD {n}: {e}"));
                (n, sha)
            })
            .collect(),
    )
}

/// One call as words; `X` in a key word is where the side's letter goes.
#[derive(Clone, Debug)]
struct Call {
    command: &'static str,
    args: Vec<String>,
    keys: Vec<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Impl {
    Module,
    Script,
}

fn side_args(call: &Call, letter: char) -> Vec<String> {
    call.args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if call.keys.contains(&i) {
                a.replacen(":X", &format!(":{letter}"), 1)
            } else {
                a.clone()
            }
        })
        .collect()
}

fn cmd_for(shas: &Shas, call: &Call, imp: Impl, letter: char) -> redis::Cmd {
    let args = side_args(call, letter);
    match imp {
        Impl::Module => {
            let mut cmd = redis::cmd(&format!("RL.{}", call.command.to_uppercase()));
            cmd.arg(&args);
            cmd
        }
        Impl::Script => {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&shas.0[call.command]).arg(call.keys.len());
            for &k in &call.keys {
                cmd.arg(&args[k]);
            }
            cmd.arg(&args);
            cmd
        }
    }
}

/// What a key holds, for comparing twins: type, value or members and scores, expiry.
#[derive(Debug, Clone, PartialEq)]
struct KeyState {
    kind: String,
    value: Vec<String>,
    expire_at: i64,
}

/// Every key whose name has `:<letter>` right after its hash tag, by its name with
/// the letter replaced by `X`.
fn states(c: &mut Connection, letter: char) -> BTreeMap<String, KeyState> {
    let pattern = format!("{{*}}:{letter}*");
    let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query(c).expect("KEYS");
    if keys.is_empty() {
        return BTreeMap::new();
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("TYPE").arg(k).cmd("PEXPIRETIME").arg(k);
    }
    let meta: Vec<(String, i64)> = pipe.query(c).expect("TYPE, PEXPIRETIME");
    let mut pipe = redis::pipe();
    for (k, (kind, _)) in keys.iter().zip(&meta) {
        match kind.as_str() {
            "zset" => pipe.cmd("ZRANGE").arg(k).arg(0).arg(-1).arg("WITHSCORES"),
            "string" => pipe.cmd("GET").arg(k),
            _ => pipe.cmd("TYPE").arg(k),
        };
    }
    let values: Vec<Value> = pipe.query(c).expect("GET, ZRANGE");
    let mut out = BTreeMap::new();
    for ((k, (kind, expire_at)), v) in keys.iter().zip(meta).zip(values) {
        let value: Vec<String> = match v {
            Value::Array(_) => redis::from_redis_value(&v).expect("members"),
            v => vec![redis::from_redis_value(&v).unwrap_or_else(|_| format!("{v:?}"))],
        };
        let name = k.replacen(&format!("}}:{letter}"), "}:X", 1);
        out.insert(
            name,
            KeyState {
                kind,
                value,
                expire_at,
            },
        );
    }
    out
}

/// A log member `<µs>:<8 hex>` stands for its timestamp (the suffix is random).
fn log_member(m: &str) -> Option<&str> {
    let (at, hex) = m.split_once(':')?;
    let ok = hex.len() == 8
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
    (ok && !at.is_empty() && at.bytes().all(|b| b.is_ascii_digit())).then_some(at)
}

fn comparable(s: &KeyState) -> Vec<String> {
    if s.kind != "zset" {
        return s.value.clone();
    }
    let mut pairs: Vec<(String, String)> = s
        .value
        .chunks(2)
        .map(|p| {
            let m = log_member(&p[0])
                .map(|at| format!("{at}:<random>"))
                .unwrap_or_else(|| p[0].clone());
            (p[1].clone(), m)
        })
        .collect();
    pairs.sort();
    pairs.into_iter().flat_map(|(s, m)| [m, s]).collect()
}

fn assert_same_state(c: &mut Connection, a: char, b: char, context: &str) {
    same_state(c, a, b, context, false)
}

/// `lenient`: a key about to expire (in real time) may already be gone on one side.
fn same_state(c: &mut Connection, a: char, b: char, context: &str, lenient: bool) {
    let mut left = states(c, a);
    let mut right = states(c, b);
    if lenient {
        let time: Vec<String> = redis::cmd("TIME").query(c).expect("TIME");
        let ms = |i: usize, per: i64| time[i].parse::<i64>().unwrap_or(0) * per;
        let soon = ms(0, 1000) + ms(1, 1) / 1000 + 2 * TOL_MS;
        let going = |s: &KeyState| {
            s.expire_at == -2 || (0..soon).contains(&s.expire_at) || s.value == ["nil"]
        };
        let doomed: Vec<String> = left
            .iter()
            .chain(right.iter())
            .filter(|(_, s)| going(s))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            left.remove(&k);
            right.remove(&k);
        }
    }
    let names = |m: &BTreeMap<String, KeyState>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&left),
        names(&right),
        "keys differ {context}: {left:?} {right:?}"
    );
    for (name, l) in &left {
        let r = &right[name];
        assert_eq!(l.kind, r.kind, "{name}: type {context}");
        assert_eq!(comparable(l), comparable(r), "{name}: value {context}");
        if l.kind == "zset" {
            // Members no limiter wrote, exactly and in order (a log's have random suffixes).
            let foreign = |v: &[String]| -> Vec<String> {
                v.chunks(2)
                    .filter(|p| log_member(&p[0]).is_none())
                    .flatten()
                    .cloned()
                    .collect()
            };
            assert_eq!(
                foreign(&l.value),
                foreign(&r.value),
                "{name}: members {context}"
            );
        }
        let both = (l.expire_at, r.expire_at);
        assert!(
            (l.expire_at < 0 && l.expire_at == r.expire_at)
                || (l.expire_at >= 0
                    && r.expire_at >= 0
                    && (l.expire_at - r.expire_at).abs() <= TOL_MS),
            "{name}: expiry {both:?} {context}"
        );
    }
}

/// Both twins of every key that expires within the next minute (in real time) get
/// one shared far expiry, after their own expiry instants were compared.
fn push_short_expiries(c: &mut Connection, a: char, b: char) {
    let time = |c: &mut Connection| {
        let t: Vec<String> = redis::cmd("TIME").query(c).expect("TIME");
        t[0].parse::<i64>().unwrap() * 1000 + 1000
    };
    let soon = |now_ms: i64, s: Option<&KeyState>| {
        s.is_some_and(|s| s.expire_at >= 0 && s.expire_at < now_ms + 60_000)
    };
    // Most such calls left no short expiry: the regular comparisons see their keys.
    let now_ms = time(c);
    let (left, right) = (states(c, a), states(c, b));
    if !left
        .values()
        .chain(right.values())
        .any(|s| soon(now_ms, Some(s)))
    {
        return;
    }
    same_state(c, a, b, "before moving short expiries", true);
    let now_ms = time(c);
    let far = now_ms + 3_600_000;
    let (left, right) = (states(c, a), states(c, b));
    let soon = |s: Option<&KeyState>| soon(now_ms, s);
    let names: std::collections::BTreeSet<&String> = left.keys().chain(right.keys()).collect();
    for name in names {
        let (l, r) = (left.get(name), right.get(name));
        if !soon(l) && !soon(r) {
            continue;
        }
        let twins = [a, b].map(|letter| name.replacen("}:X", &format!("}}:{letter}"), 1));
        // Gone on one side already (expired in real time), or while the other was
        // moved (a key a millisecond from its end): gone on both.
        let mut moved = l.is_some() && r.is_some();
        for key in &twins {
            if moved {
                let n: i64 = redis::cmd("PEXPIREAT")
                    .arg(key)
                    .arg(far)
                    .query(c)
                    .expect("PEXPIREAT");
                moved = n == 1;
            }
        }
        if !moved {
            let _: i64 = redis::cmd("DEL").arg(&twins).query(c).expect("DEL");
        }
    }
    assert_same_state(c, a, b, "after moving short expiries");
}

/// The clock of a run: NOW, stepped by small and large amounts, onto window
/// boundaries and onto instants the state names (a TAT, a lease's expiry).
struct Clock {
    now: u64,
}

impl Clock {
    fn new(rng: &mut StdRng) -> Clock {
        Clock {
            now: T0 + rng.gen_range(0..1_000_000_000_000),
        }
    }

    fn step(&mut self, rng: &mut StdRng, window_us: u64, instants: &[u64]) -> u64 {
        let w = window_us.max(1);
        // Near 2255 (NOW's end) now and then, but mostly back in this century.
        if self.now > 8_000_000_000_000_000
            || (self.now > 3_000_000_000_000_000 && rng.gen_bool(0.1))
        {
            self.now = T0 + rng.gen_range(0..1_000_000_000_000);
        }
        match rng.gen_range(0..100) {
            0..=19 => {}
            20..=49 => self.now += rng.gen_range(0..=w / 20 + 1),
            50..=69 => {
                let next = (self.now / w + 1) * w;
                self.now = next + rng.gen_range(0..=2) - 1;
            }
            70..=79 => self.now += rng.gen_range(0..=2 * w),
            _ => {
                let later: Vec<u64> = instants
                    .iter()
                    .copied()
                    .filter(|&t| t > self.now + 1)
                    .collect();
                if let Some(&t) = later.get(
                    rng.gen_range(0..later.len().max(1))
                        .min(later.len().saturating_sub(1)),
                ) {
                    self.now = t + rng.gen_range(0..=2) - 1;
                } else {
                    self.now += rng.gen_range(0..=w / 5 + 1);
                }
            }
        }
        self.now
    }
}

/// Windows of at least 100 s (see the module comment), in every spelling.
const WINDOWS: [(&str, u64); 8] = [
    ("100", 100),
    ("120s", 120),
    ("100500ms", 100),
    ("300", 300),
    ("1000", 1000),
    ("3600", 3600),
    ("86400S", 86400),
    ("315360000", 315_360_000),
];

fn window_us(text: &str) -> u64 {
    let t = text.to_ascii_lowercase();
    if let Some(ms) = t.strip_suffix("ms") {
        ms.parse::<u64>().unwrap() * 1000
    } else {
        t.trim_end_matches('s').parse::<u64>().unwrap() * 1_000_000
    }
}

fn amount(rng: &mut StdRng, small: u64) -> u64 {
    match rng.gen_range(0..100) {
        0..=74 => rng.gen_range(1..=small),
        75..=94 => rng.gen_range(1..=small * 50),
        _ => rng.gen_range(1..=1_000_000_000_000_000),
    }
}

/// A mode, or none (a spending call); IMPOSE only in the BLOCK runs.
fn mode(rng: &mut StdRng, block: bool) -> Option<Vec<String>> {
    let word = match rng.gen_range(0..100) {
        0..=9 => "PEEK",
        10..=21 => "REFUND",
        22..=25 => "RESET",
        26..=31 if block => "IMPOSE",
        _ => return None,
    };
    Some(vec![word.into()])
}

/// Block lengths of at least 100 s (see the module comment), in every spelling.
const BLOCKS: [(&str, u64); 8] = [
    ("100", 100),
    ("150s", 150),
    ("100000ms", 100),
    ("300", 300),
    ("1000S", 1000),
    ("3600", 3600),
    ("86400", 86400),
    ("315360000", 315_360_000),
];

/// A random `BLOCK <d> [EXTEND | BACKOFF <max>] [STRIKES]`, as groups of words that
/// may come in any order among a limit's options.
fn block_clause(rng: &mut StdRng) -> Vec<Vec<String>> {
    let (d, secs) = BLOCKS[rng.gen_range(0..BLOCKS.len())];
    let word = |rng: &mut StdRng, w: &str| {
        if rng.gen_bool(0.2) {
            w.to_lowercase()
        } else {
            w.to_string()
        }
    };
    let mut groups = vec![vec![word(rng, "BLOCK"), d.to_string()]];
    match rng.gen_range(0..3) {
        0 => {}
        1 => groups.push(vec![word(rng, "EXTEND")]),
        _ => {
            let max = match rng.gen_range(0..3) {
                0 => secs,
                1 => (secs * rng.gen_range(2..=40)).min(315_360_000),
                _ => 315_360_000,
            };
            groups.push(vec![word(rng, "BACKOFF"), format!("{max}s")]);
        }
    }
    if rng.gen_bool(0.5) {
        groups.push(vec![word(rng, "STRIKES")]);
    }
    groups
}

/// One identity's settings for a run: what its calls keep (window, lease ttl, rate,
/// penalty box).
#[derive(Clone)]
struct Identity {
    window: &'static str,
    limit_cap: u64,
    block: Vec<Vec<String>>,
}

fn identities(rng: &mut StdRng, n: usize, block: bool) -> Vec<Identity> {
    (0..n)
        .map(|_| {
            let (window, secs) = WINDOWS[rng.gen_range(0..WINDOWS.len())];
            Identity {
                window,
                limit_cap: secs / 100,
                block: if block { block_clause(rng) } else { vec![] },
            }
        })
        .collect()
}

/// In a BLOCK run, a limit's options with its penalty box, shuffled: mostly the
/// identity's own clause, sometimes another, sometimes none.
fn with_block(rng: &mut StdRng, id: &Identity, mut opts: Vec<Vec<String>>) -> Vec<String> {
    if !id.block.is_empty() {
        match rng.gen_range(0..100) {
            0..=84 => opts.extend(id.block.iter().cloned()),
            85..=94 => opts.extend(block_clause(rng)),
            _ => {}
        }
        for i in 0..opts.len() {
            let j = rng.gen_range(i..opts.len());
            opts.swap(i, j);
        }
    }
    opts.concat()
}

/// The state instants worth stepping NOW onto: TATs, lease expiries and block ends
/// of the module's keys (µs; a THROTTLE TAT is in ns), and a token bucket's next
/// refill steps (its identity's window after its timer).
fn instants(states: &BTreeMap<String, KeyState>, ids: &[Identity]) -> Vec<u64> {
    let mut out = Vec::new();
    for (name, s) in states {
        let bucket = s.value[0]
            .split_once(':')
            .filter(|_| {
                s.kind == "string" && (name.contains(":Xtokenbucket") || name.ends_with(":X"))
            })
            .and_then(|(tokens, timer)| {
                Some((tokens.parse::<u64>().ok()?, timer.parse::<u64>().ok()?))
            })
            .filter(|&(tokens, _)| tokens <= 1_000_000_000_000_000);
        let id = name
            .strip_prefix("{u")
            .and_then(|r| r.split_once('}'))
            .and_then(|(n, _)| n.parse::<usize>().ok())
            .and_then(|n| ids.get(n));
        if let (Some((_, timer)), Some(id)) = (bucket, id) {
            let w = window_us(id.window);
            out.extend((1..=3).map(|k| timer + k * w));
            continue;
        }
        match s.kind.as_str() {
            "string" => {
                // A block's value is `<end>` or `<end>:<strikes>`.
                let end = s.value[0].split(':').next().unwrap_or("");
                if let Ok(v) = end.parse::<u64>() {
                    out.push(if v > 1u64 << 53 { v / 1000 } else { v });
                }
            }
            "zset" => out.extend(
                s.value
                    .iter()
                    .skip(1)
                    .step_by(2)
                    .filter_map(|v| v.parse::<u64>().ok()),
            ),
            _ => {}
        }
    }
    out
}

/// A random call of `command` on identity `id` at `now`.
fn random_call(
    rng: &mut StdRng,
    command: &'static str,
    ids: &[Identity],
    n: usize,
    now: u64,
) -> (Call, u64) {
    let id = &ids[n];
    let key = format!("{{u{n}}}:X");
    let mut args = vec![key];
    let w = window_us(id.window);
    let block = !id.block.is_empty();
    let mut opts: Vec<Vec<String>> = vec![];
    match command {
        "fixed" | "slidecount" | "slidewindow" => {
            args.push(amount(rng, 12).to_string());
            args.push(id.window.into());
            if rng.gen_bool(0.6) {
                opts.push(vec!["COST".into(), amount(rng, 3).to_string()]);
            }
            opts.extend(mode(rng, block));
        }
        "slidelog" => {
            args.push(rng.gen_range(1..=12u64).to_string());
            args.push(id.window.into());
            if rng.gen_bool(0.6) {
                opts.push(vec!["cost".into(), rng.gen_range(1..=4u64).to_string()]);
            }
            opts.extend(mode(rng, block));
        }
        "gcra" => {
            let limit = rng.gen_range(1..=id.limit_cap.clamp(1, 40));
            args.push(limit.to_string());
            args.push(id.window.into());
            match rng.gen_range(0..10) {
                0..=3 => {}
                4..=8 => opts.push(vec![
                    "BURST".into(),
                    rng.gen_range(1..=2 * limit + 1).to_string(),
                ]),
                _ => opts.push(vec!["BURST".into(), amount(rng, 1000).to_string()]),
            }
            if rng.gen_bool(0.5) {
                opts.push(vec!["COST".into(), rng.gen_range(1..=3u64).to_string()]);
            }
            opts.extend(mode(rng, block));
        }
        "tokenbucket" => {
            let capacity = amount(rng, 12);
            args.push(capacity.to_string());
            args.push(id.window.into());
            if rng.gen_bool(0.6) {
                opts.push(vec!["REFILL".into(), amount(rng, 4).to_string()]);
            }
            if rng.gen_bool(0.6) {
                opts.push(vec!["COST".into(), amount(rng, 3).to_string()]);
            }
            opts.extend(mode(rng, block));
        }
        "throttle" => {
            let count = rng.gen_range(1..=id.limit_cap.clamp(1, 40));
            let period = w / 1_000_000;
            let burst = if rng.gen_bool(0.9) {
                rng.gen_range(0..=3u64)
            } else {
                amount(rng, 1000)
            };
            args.extend([burst.to_string(), count.to_string(), period.to_string()]);
            if rng.gen_bool(0.7) {
                args.push(rng.gen_range(0..=5u64).to_string());
            }
        }
        "concurrency" => {
            args.push(rng.gen_range(1..=4u64).to_string());
            args.push(id.window.into());
            let lease = format!("req-{}", rng.gen_range(0..6));
            match rng.gen_range(0..100) {
                0..=49 => args.extend(["ACQUIRE".into(), lease]),
                50..=74 => args.extend(["RELEASE".into(), lease]),
                75..=89 => args.extend(["heartbeat".into(), lease]),
                90..=96 => args.push("PEEK".into()),
                _ => args.push("RESET".into()),
            }
        }
        _ => unreachable!(),
    }
    args.extend(with_block(rng, id, opts));
    args.extend(["NOW".into(), now.to_string()]);
    (
        Call {
            command,
            args,
            keys: vec![0],
        },
        w,
    )
}

const ALL_ALGOS: [&str; 7] = [
    "fixed",
    "slidecount",
    "slidewindow",
    "slidelog",
    "gcra",
    "concurrency",
    "tokenbucket",
];

/// A random RL.ALL over a random mix of limits on one identity (each algorithm on a key
/// of its own: `{uN}:X<algo>`).
fn random_all(rng: &mut StdRng, ids: &[Identity], n: usize, now: u64) -> (Call, u64) {
    let id = &ids[n];
    let count = rng.gen_range(1..=4);
    let mut picked: Vec<usize> = (0..ALL_ALGOS.len()).collect();
    for i in 0..picked.len() {
        let j = rng.gen_range(i..picked.len());
        picked.swap(i, j);
    }
    picked.truncate(count);
    let mut args = vec![count.to_string()];
    let mut keys = Vec::new();
    let mut leased = false;
    let block = !id.block.is_empty();
    for &a in &picked {
        let algo = ALL_ALGOS[a];
        args.push(algo.to_uppercase());
        keys.push(args.len());
        args.push(format!("{{u{n}}}:X{algo}"));
        let mut opts: Vec<Vec<String>> = vec![];
        match algo {
            "gcra" => {
                let limit = rng.gen_range(1..=id.limit_cap.clamp(1, 40));
                args.extend([limit.to_string(), id.window.into()]);
                if rng.gen_bool(0.6) {
                    opts.push(vec![
                        "BURST".into(),
                        rng.gen_range(1..=2 * limit + 1).to_string(),
                    ]);
                }
            }
            "concurrency" => {
                leased = true;
                args.extend([rng.gen_range(1..=4u64).to_string(), id.window.into()]);
            }
            "tokenbucket" => {
                args.extend([amount(rng, 12).to_string(), id.window.into()]);
                if rng.gen_bool(0.6) {
                    opts.push(vec!["REFILL".into(), amount(rng, 4).to_string()]);
                }
            }
            "slidelog" => args.extend([rng.gen_range(1..=12u64).to_string(), id.window.into()]),
            _ => args.extend([amount(rng, 12).to_string(), id.window.into()]),
        }
        if algo != "concurrency" && rng.gen_bool(0.4) {
            opts.push(vec!["COST".into(), rng.gen_range(1..=3u64).to_string()]);
        }
        // In a BLOCK run, about half the rate limits have a penalty box.
        if block && algo != "concurrency" && rng.gen_bool(0.5) {
            args.extend(with_block(rng, id, opts));
        } else {
            args.extend(opts.concat());
        }
    }
    args.extend(["NOW".into(), now.to_string()]);
    let m = rng.gen_range(0..100);
    if leased && (m >= 30 || rng.gen_bool(0.5)) {
        args.extend(["LEASE".into(), format!("req-{}", rng.gen_range(0..6))]);
    }
    match m {
        0..=9 => args.push("PEEK".into()),
        10..=21 => args.push("REFUND".into()),
        22..=24 => args.push("RESET".into()),
        // IMPOSE on limits without BLOCK is refused: compared too.
        25..=30 if block => args.push("IMPOSE".into()),
        _ => {}
    }
    (
        Call {
            command: "all",
            args,
            keys,
        },
        window_us(id.window),
    )
}

/// Words a caller may get wrong.
const GARBAGE: [&str; 16] = [
    "",
    "0",
    "-1",
    "abc",
    "1.5",
    "99999999999999999999",
    "18446744073709551616",
    "NOW",
    "COST",
    "PEEK",
    "BURST",
    "LEASE",
    "refund",
    "x",
    "1000000000000001",
    "1764480000",
];

/// The penalty box's words, wrong where they stand.
const BLOCK_GARBAGE: [&str; 8] = [
    "BLOCK",
    "EXTEND",
    "BACKOFF",
    "STRIKES",
    "IMPOSE",
    "0ms",
    "315360001",
    "999ms",
];

/// One argument replaced by a bad word, dropped or repeated (never a key).
fn mutate(rng: &mut StdRng, mut call: Call, block: bool) -> Call {
    let candidates: Vec<usize> = (0..call.args.len())
        .filter(|i| !call.keys.contains(i))
        .collect();
    let at = candidates[rng.gen_range(0..candidates.len())];
    // RL.ALL's keys are found by position: only replacements keep them in place.
    match if call.command == "all" {
        0
    } else {
        rng.gen_range(0..3)
    } {
        0 if block && rng.gen_bool(0.5) => {
            call.args[at] = BLOCK_GARBAGE[rng.gen_range(0..BLOCK_GARBAGE.len())].to_string()
        }
        0 => call.args[at] = GARBAGE[rng.gen_range(0..GARBAGE.len())].to_string(),
        1 => {
            call.args.remove(at);
        }
        _ => {
            let word = call.args[at].clone();
            call.args.insert(at, word);
        }
    }
    call
}

/// Whether a call may leave an expiry shorter than its window (see the module comment).
fn may_shorten_ttl(call: &Call) -> bool {
    let has = |w: &str| call.args.iter().any(|a| a.eq_ignore_ascii_case(w));
    // A strike counted in a block that does not grow keeps its end: the time left.
    let strikes = has("STRIKES") && (call.command == "all" || !(has("EXTEND") || has("BACKOFF")));
    (call.command == "gcra" && has("REFUND"))
        || call.command == "tokenbucket"
        || has("TOKENBUCKET")
        || (call.command == "concurrency" && has("RELEASE"))
        || (call.command == "all" && has("REFUND"))
        || strikes
}

struct Outcome {
    calls: usize,
    errors: usize,
    admitted: usize,
    /// Calls with a BLOCK clause, and block keys seen in the state comparisons (those
    /// with two strikes or more apart).
    block_calls: usize,
    block_keys: usize,
    struck: usize,
}

/// A reply as text: the value, or the error line.
fn reply_text(v: &Value) -> String {
    match v {
        Value::ServerError(e) => format!("ERR {} {}", e.code(), e.details().unwrap_or("")),
        v => format!("{v:?}"),
    }
}

/// Runs the commands in one pipeline, each reply kept (an error does not stop the rest).
fn pipeline(c: &mut Connection, cmds: &[redis::Cmd]) -> Vec<String> {
    use redis::ConnectionLike;
    let mut pipe = redis::pipe();
    for cmd in cmds {
        pipe.add_command(cmd.clone());
    }
    let replies = c
        .req_packed_commands(&pipe.get_packed_pipeline(), 0, cmds.len())
        .expect("pipeline");
    // Error texts name keys: the twins' names are one letter apart.
    replies
        .iter()
        .map(|r| reply_text(r).replace("}:m", "}:X").replace("}:s", "}:X"))
        .collect()
}

/// `calls` random calls of `command`: the module on the `m` twin; on the `s` twin the
/// script (`right`), or a random mix of module and script per call (None).
/// With `block`, every identity has a penalty box (see the module comment).
fn differential(
    command: &'static str,
    seed: u64,
    calls: usize,
    right: Option<Impl>,
    block: bool,
) -> Outcome {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let mut rng = StdRng::seed_from_u64(seed);
    let ids = identities(&mut rng, 4, block);
    let mut clock = Clock::new(&mut rng);
    let mut known = Vec::new();
    let mut out = Outcome {
        calls: 0,
        errors: 0,
        admitted: 0,
        block_calls: 0,
        block_keys: 0,
        struck: 0,
    };
    let (a, b) = ('m', 's');
    let mut batch: Vec<(Call, Impl)> = Vec::new();
    let mut since_check = 0;
    for i in 0..calls {
        let n = rng.gen_range(0..ids.len());
        // Steps of the identity's own window; for THROTTLE, of its emission interval.
        let mut w = window_us(ids[n].window);
        if command == "throttle" {
            w /= ids[n].limit_cap.clamp(1, 40);
        }
        let now = clock.step(&mut rng, w, &known);
        let (call, _) = if command == "all" {
            random_all(&mut rng, &ids, n, now)
        } else {
            random_call(&mut rng, command, &ids, n, now)
        };
        let call = if rng.gen_bool(0.06) {
            mutate(&mut rng, call, block)
        } else {
            call
        };
        let imp = right.unwrap_or(if rng.gen_bool(0.5) {
            Impl::Module
        } else {
            Impl::Script
        });
        let shortens = may_shorten_ttl(&call);
        batch.push((call, imp));
        if batch.len() < BATCH && !shortens && i + 1 < calls {
            continue;
        }
        // Twin calls adjacent in one pipeline.
        let cmds: Vec<redis::Cmd> = batch
            .iter()
            .flat_map(|(call, imp)| {
                [
                    cmd_for(&shas, call, Impl::Module, a),
                    cmd_for(&shas, call, *imp, b),
                ]
            })
            .collect();
        let replies = pipeline(&mut c, &cmds);
        for ((call, imp), pair) in batch.iter().zip(replies.chunks(2)) {
            assert_eq!(
                pair[0], pair[1],
                "seed {seed} near call {i} ({imp:?} on the right): {:?}",
                call.args
            );
            out.calls += 1;
            if call.args.iter().any(|a| a.eq_ignore_ascii_case("BLOCK")) {
                out.block_calls += 1;
            }
            if pair[0].starts_with("ERR") && std::env::var_os("RL_SCRIPTS_SHOW").is_some() {
                eprintln!("{:?} -> {}", call.args, pair[0]);
            }
            if pair[0].starts_with("ERR") {
                out.errors += 1;
            } else if pair[0].starts_with(if command == "throttle" {
                "array([int(0)"
            } else {
                "array([int(1)"
            }) {
                out.admitted += 1;
            }
        }
        since_check += batch.len();
        batch.clear();
        if shortens {
            push_short_expiries(&mut c, a, b);
        }
        if since_check >= BATCH {
            since_check = 0;
            assert_same_state(&mut c, a, b, &format!("seed {seed} after call {i}"));
            let state = states(&mut c, a);
            for (name, s) in &state {
                if name.ends_with(":block") {
                    out.block_keys += 1;
                    let strikes = s.value[0].split(':').nth(1).map(|n| n.parse::<u64>());
                    if strikes.is_some_and(|n| n.is_ok_and(|n| n >= 2)) {
                        out.struck += 1;
                    }
                }
            }
            known = instants(&state, &ids);
        }
    }
    assert_same_state(&mut c, a, b, &format!("seed {seed} at the end"));
    out
}

fn seed(command: &str) -> u64 {
    std::env::var("RL_SCRIPTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5c41_7000 + command.len() as u64 * 7919 + command.as_bytes()[0] as u64)
}

fn check_counts(command: &str, o: &Outcome) {
    eprintln!(
        "{command}: {} calls, {} admitted, {} errors, {} with BLOCK, {} block keys compared \
         ({} with two strikes or more)",
        o.calls, o.admitted, o.errors, o.block_calls, o.block_keys, o.struck
    );
    // A run that admitted or denied almost nothing compared little.
    assert!(
        o.admitted > o.calls / 20,
        "{command}: only {} admitted",
        o.admitted
    );
    assert!(
        o.admitted < o.calls - o.calls / 20,
        "{command}: almost all admitted"
    );
}

macro_rules! differential_tests {
    ($($name:ident, $mixed:ident: $command:literal;)*) => {$(
        #[test]
        fn $name() {
            let o = differential($command, seed($command), CALLS, Some(Impl::Script), false);
            check_counts($command, &o);
        }

        /// The mixed fleet: the module alone on one key, module and script at random on
        /// its twin: the same decisions.
        #[test]
        fn $mixed() {
            let o = differential($command, seed($command) ^ 0xf1ee7, CALLS / 5, None, false);
            check_counts($command, &o);
        }
    )*};
}

/// The random runs with a penalty box on every identity.
macro_rules! block_differential_tests {
    ($($name:ident, $mixed:ident: $command:literal;)*) => {$(
        #[test]
        fn $name() {
            let seed = seed($command) ^ 0xb10c;
            let o = differential($command, seed, BLOCK_CALLS, Some(Impl::Script), true);
            check_block_counts($command, &o);
        }

        /// The mixed fleet with BLOCK: module and script at random on one twin.
        #[test]
        fn $mixed() {
            let seed = seed($command) ^ 0xb10c_f1ee7;
            let o = differential($command, seed, BLOCK_CALLS / 5, None, true);
            check_block_counts($command, &o);
        }
    )*};
}

/// Random calls per command in a BLOCK run.
const BLOCK_CALLS: usize = 4_000;

/// A BLOCK run that started, counted and crossed few blocks compared little.
fn check_block_counts(command: &str, o: &Outcome) {
    check_counts(command, o);
    assert!(
        o.block_calls > o.calls / 2,
        "{command}: few calls with BLOCK"
    );
    assert!(
        o.block_keys > o.calls / 50,
        "{command}: few block keys compared"
    );
    assert!(o.struck > 0, "{command}: no block counted two strikes");
}

block_differential_tests! {
    fixed_block_matches_the_module, fixed_block_mixed_fleet: "fixed";
    slidecount_block_matches_the_module, slidecount_block_mixed_fleet: "slidecount";
    slidewindow_block_matches_the_module, slidewindow_block_mixed_fleet: "slidewindow";
    slidelog_block_matches_the_module, slidelog_block_mixed_fleet: "slidelog";
    gcra_block_matches_the_module, gcra_block_mixed_fleet: "gcra";
    tokenbucket_block_matches_the_module, tokenbucket_block_mixed_fleet: "tokenbucket";
    all_block_matches_the_module, all_block_mixed_fleet: "all";
}

differential_tests! {
    fixed_matches_the_module, fixed_mixed_fleet: "fixed";
    slidecount_matches_the_module, slidecount_mixed_fleet: "slidecount";
    slidewindow_matches_the_module, slidewindow_mixed_fleet: "slidewindow";
    slidelog_matches_the_module, slidelog_mixed_fleet: "slidelog";
    gcra_matches_the_module, gcra_mixed_fleet: "gcra";
    tokenbucket_matches_the_module, tokenbucket_mixed_fleet: "tokenbucket";
    concurrency_matches_the_module, concurrency_mixed_fleet: "concurrency";
    throttle_matches_the_module, throttle_mixed_fleet: "throttle";
    all_matches_the_module, all_mixed_fleet: "all";
}

/// RL.COUNTER's window ends at its key's expiry instant, which the call sets from the
/// server's clock: twins created a millisecond apart would answer a millisecond apart
/// ever after. So its differential run steps NOW from the module's key expiry (inside
/// the window, 1 µs before its end, at it, after it), compares both twins' values and
/// expiry instants after every call (within TOL_MS), then gives the script's twin the
/// module's instant. Costs above the limit, PEEK, REFUND, RESET, and counters left
/// without a TTL by a foreign INCR are in the mix, and RL.ALL with the COUNTER limit
/// among one or two others. (The same real-time end keeps COUNTER out of ALL_ALGOS:
/// the random runs' NOW is far from the server's clock.)
#[test]
fn counter_matches_the_module() {
    let o = counter_run(seed("counter"), CALLS, Some(Impl::Script), false);
    check_counter_counts(&o, false);
}

/// The mixed fleet: the module alone on one key, module and script at random on its
/// twin: the same decisions.
#[test]
fn counter_mixed_fleet() {
    let o = counter_run(seed("counter") ^ 0xf1ee7, CALLS / 5, None, false);
    check_counter_counts(&o, false);
}

/// The same with a penalty box on three identities of four (EXTEND, BACKOFF, STRIKES at
/// random, IMPOSE among the modes), on RL.COUNTER and on RL.ALL's COUNTER limit, with
/// NOW stepped onto the blocks' ends too.
#[test]
fn counter_block_matches_the_module() {
    let o = counter_run(
        seed("counter") ^ 0xb10c,
        BLOCK_CALLS,
        Some(Impl::Script),
        true,
    );
    check_counter_counts(&o, true);
}

/// The mixed fleet with BLOCK.
#[test]
fn counter_block_mixed_fleet() {
    let o = counter_run(seed("counter") ^ 0xb10c_f1ee7, BLOCK_CALLS / 5, None, true);
    check_counter_counts(&o, true);
}

/// A counter run that admitted, denied, renewed or blocked little compared little.
fn check_counter_counts(o: &CounterOutcome, block: bool) {
    let n = o.admitted + o.denied;
    assert!(
        o.admitted > n / 10 && o.denied > n / 10,
        "{} admitted, {} denied",
        o.admitted,
        o.denied
    );
    assert!(o.renewed > n / 100, "{} windows renewed", o.renewed);
    assert!(o.untimed > n / 200, "{} untimed", o.untimed);
    assert!(o.all > n / 5, "{} calls of RL.ALL", o.all);
    // With BLOCK most denials start a block instead (identity 0 never blocks).
    let few = n / if block { 200 } else { 100 };
    assert!(
        o.counted_denials > few,
        "{} denials counted",
        o.counted_denials
    );
    assert!(o.renewals > n / 100, "{} ends renewed", o.renewals);
    // With BLOCK only identity 0's denials stay on the counter.
    let escalated = if block { 0 } else { n / 200 };
    assert!(
        o.escalations > escalated,
        "{} ends escalated",
        o.escalations
    );
    if block {
        assert!(o.blocked > n / 10, "{} blocked calls", o.blocked);
        assert!(o.block_ends > n / 100, "{} at a block's end", o.block_ends);
    }
}

struct CounterOutcome {
    admitted: u64,
    denied: u64,
    renewed: u64,
    untimed: u64,
    /// Denied calls made while the block key was there.
    blocked: u64,
    /// Calls made at a block's last µs, its end or 1 µs after.
    block_ends: u64,
    /// Calls of RL.ALL.
    all: u64,
    /// Denied spending calls that COUNTALL counted (the stored value grew).
    counted_denials: u64,
    /// Spending calls with RENEW that moved a live window's end later.
    renewals: u64,
    /// Denied spending calls with ESCALATE that moved a live window's end later.
    escalations: u64,
}

/// `calls` calls on the `m` twin by the module, on the `s` twin by `right`, or by module
/// and script at random (None).
fn counter_run(seed: u64, calls: usize, right: Option<Impl>, block: bool) -> CounterOutcome {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let mut rng = StdRng::seed_from_u64(seed);
    // Identity 0 never blocks: its counter's windows keep ending and renewing.
    let clauses: Vec<Vec<Vec<String>>> = (0..4)
        .map(|n| {
            if block && n > 0 {
                block_clause(&mut rng)
            } else {
                vec![]
            }
        })
        .collect();
    let (mut blocked, mut block_ends) = (0, 0);
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let mut now = s * 1_000_000 + us;
    // Identity 3's window lasts 253,000 years (a µs count past 2^63 / 1000 in a u64, a
    // bignum in the scripts), its end still below 2^53 ms, where a script reads it exactly.
    let windows = ["100s", "150000ms", "120", "8000000000000000ms"];
    let (mut admitted, mut denied, mut renewed, mut untimed, mut all_calls) = (0, 0, 0, 0, 0);
    // Denied calls that COUNTALL counted; calls that RENEW moved a live window's end.
    let (mut counted_denials, mut renewals, mut escalations) = (0, 0, 0);
    for i in 0..calls {
        let n = rng.gen_range(0..4);
        let key = |l: char| format!("{{u{n}}}:{l}");
        if rng.gen_bool(0.02) {
            // Another writer's INCR: a counter without a TTL on both twins.
            let v = rng.gen_range(0..5u64);
            for l in ['m', 's'] {
                let _: () = redis::cmd("SET").arg(key(l)).arg(v).query(&mut c).unwrap();
            }
            untimed += 1;
        }
        let end: i64 = redis::cmd("PEXPIRETIME")
            .arg(key('m'))
            .query(&mut c)
            .unwrap();
        // An end past NOW's ceiling (2255: an escalated window, identity 3's) is no NOW.
        let at_end = end > 0 && (end as u64) * 1000 < (1 << 53) && rng.gen_bool(0.3);
        let block_key = format!("{{u{n}}}:m:block");
        let block_end: Option<String> = redis::cmd("GET").arg(&block_key).query(&mut c).unwrap();
        let block_end = block_end.and_then(|v| v.split(':').next()?.parse::<u64>().ok());
        if let Some(until) = block_end.filter(|_| rng.gen_bool(0.3)) {
            now = until + rng.gen_range(0..=2) - 1;
            block_ends += 1;
        } else if at_end {
            now = end as u64 * 1000 + rng.gen_range(0..=2) - 1;
        } else if block_end.is_some() && rng.gen_bool(0.5) {
            // Blocks last 100 s or more: jump past some of them.
            now += rng.gen_range(0..=400_000_000);
        } else {
            now += rng.gen_range(0..=3_000_000);
        }
        let limit = rng.gen_range(1..=6u64);
        let mut args = vec![
            "{uN}:X".replace('N', &n.to_string()),
            limit.to_string(),
            windows[n].to_string(),
        ];
        let mut opts: Vec<Vec<String>> = match rng.gen_range(0..10) {
            0..=5 => vec![],
            6..=8 => vec![vec!["COST".into(), rng.gen_range(1..=3u64).to_string()]],
            _ => vec![vec!["COST".into(), (limit + 1).to_string()]],
        };
        if !clauses[n].is_empty() && rng.gen_bool(0.9) {
            opts.extend(clauses[n].iter().cloned());
            for i in 0..opts.len() {
                let j = rng.gen_range(i..opts.len());
                opts.swap(i, j);
            }
        }
        let with_block = opts.iter().any(|g| g[0].eq_ignore_ascii_case("BLOCK"));
        let is_all = rng.gen_bool(0.25);
        // COUNTALL, RENEW and ESCALATE (RL.COUNTER's own, refused in RL.ALL), among the
        // options. ESCALATE excludes RENEW; it is left out once 30 doublings would come
        // (an end past 2^53 ms, where a script reads the expiry within 1 ms: see
        // `past_2_to_the_53_ms_a_script_answers_within_two_milliseconds`), and on the
        // 253,000-year window, whose second doubling is past it.
        let (count_all, renew) = (!is_all && rng.gen_bool(0.4), !is_all && rng.gen_bool(0.3));
        let stored: Option<u64> = redis::cmd("GET").arg(key('m')).query(&mut c).unwrap();
        let escalate = !is_all && !renew && n < 3 && stored.unwrap_or(0) < 30 && rng.gen_bool(0.4);
        for (on, word) in [
            (count_all, ["COUNTALL", "countall"]),
            (renew, ["RENEW", "Renew"]),
            (escalate, ["ESCALATE", "escalate"]),
        ] {
            if on {
                let at = rng.gen_range(0..=opts.len());
                opts.insert(at, vec![word[rng.gen_range(0..2)].into()]);
            }
        }
        args.extend(opts.concat());
        let call = if is_all {
            // RL.ALL: the COUNTER limit among one or two others, each on its own key, in
            // a random order.
            let mut limits = vec![(String::from("COUNTER"), args)];
            for algo in ["FIXED", "SLIDECOUNT", "SLIDELOG"] {
                if (limits.len() < 3 && rng.gen_bool(0.5))
                    || (limits.len() == 1 && algo == "SLIDELOG")
                {
                    let key = format!("{{u{n}}}:X{}", algo.to_lowercase());
                    let mut l = vec![key, rng.gen_range(1..=6u64).to_string(), "100".into()];
                    if rng.gen_bool(0.3) {
                        l.extend(["COST".into(), rng.gen_range(1..=3u64).to_string()]);
                    }
                    limits.push((algo.into(), l));
                }
            }
            for i in 0..limits.len() {
                let j = rng.gen_range(i..limits.len());
                limits.swap(i, j);
            }
            let mut all = vec![limits.len().to_string()];
            let mut keys = vec![];
            for (algo, l) in limits {
                all.push(algo);
                keys.push(all.len());
                all.extend(l);
            }
            all.extend(["NOW".into(), now.to_string()]);
            all.extend(mode(&mut rng, with_block).into_iter().flatten());
            all_calls += 1;
            Call {
                command: "all",
                args: all,
                keys,
            }
        } else {
            args.extend(["NOW".into(), now.to_string()]);
            args.extend(mode(&mut rng, with_block).into_iter().flatten());
            Call {
                command: "counter",
                args,
                keys: vec![0],
            }
        };
        let imp = right.unwrap_or(if rng.gen_bool(0.5) {
            Impl::Module
        } else {
            Impl::Script
        });
        let before: Option<u64> = redis::cmd("GET").arg(key('m')).query(&mut c).unwrap();
        let replies = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, imp, 's'),
            ],
        );
        assert_eq!(
            replies[0], replies[1],
            "call {i} ({imp:?}): {:?}",
            call.args
        );
        let spending = mode_of(&call).is_none();
        if replies[0].starts_with("array([int(1)") {
            admitted += 1;
        } else {
            denied += 1;
            if block_end.is_some_and(|until| now < until) {
                blocked += 1;
            }
        }
        let read = |c: &mut Connection, l: char| -> (Option<u64>, i64) {
            let v: Option<u64> = redis::cmd("GET").arg(key(l)).query(c).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(key(l)).query(c).unwrap();
            (v, at)
        };
        let (m, s) = (read(&mut c, 'm'), read(&mut c, 's'));
        assert_eq!(m.0, s.0, "call {i}: {:?}", call.args);
        let denied_now = !replies[0].starts_with("array([int(1)");
        if spending && denied_now && !with_block && count_all && m.0 > before {
            counted_denials += 1;
        }
        if spending && renew && before.is_some() && end > 0 && m.1 > end && !at_end {
            renewals += 1;
        }
        if spending && denied_now && escalate && !with_block && end > 0 && m.1 > end {
            escalations += 1;
        }
        assert!(
            (m.1 - s.1).abs() <= TOL_MS && (m.1 < 0) == (s.1 < 0),
            "call {i}: expiry {} vs {}: {:?}",
            m.1,
            s.1,
            call.args
        );
        if at_end && before.is_some() && m.1 != end {
            renewed += 1;
        }
        if m.1 > 0 && m.1 != s.1 {
            let _: () = redis::cmd("PEXPIREAT")
                .arg(key('s'))
                .arg(m.1)
                .query(&mut c)
                .unwrap();
        }
        // A strike that keeps its block's end rewrites the key with the time left, which
        // can be a millisecond of real time.
        if block && may_shorten_ttl(&call) {
            push_short_expiries(&mut c, 'm', 's');
        }
        if i % if block { 10 } else { 50 } == 0 {
            // The other limits' keys, and the block keys.
            assert_same_state(&mut c, 'm', 's', &format!("after call {i}"));
        }
    }
    assert_same_state(&mut c, 'm', 's', "at the end");
    eprintln!(
        "counter{}{}: {calls} calls ({all_calls} RL.ALL), {admitted} admitted, {denied} denied, \
         {renewed} windows renewed, {untimed} untimed, {blocked} blocked, {block_ends} at a \
         block's end, {counted_denials} denials counted (COUNTALL), {renewals} ends moved (RENEW), \
         {escalations} ends escalated (ESCALATE)",
        if block { " with BLOCK" } else { "" },
        if right.is_none() {
            " (mixed fleet)"
        } else {
            ""
        }
    );
    CounterOutcome {
        admitted,
        denied,
        renewed,
        untimed,
        blocked,
        block_ends,
        all: all_calls,
        counted_denials,
        renewals,
        escalations,
    }
}

/// The mode word of a call (PEEK, REFUND, RESET, IMPOSE), if any.
fn mode_of(call: &Call) -> Option<&'static str> {
    ["PEEK", "REFUND", "RESET", "IMPOSE"]
        .into_iter()
        .find(|m| call.args.iter().any(|a| a == m))
}

/// Keys that hold what no limiter wrote: another type, a string that is not a
/// non-negative integer, an integer near i64's top, a sorted set scored past 2^53 - 1.
/// Each command on each gets the module's reply or error text, and changes nothing the
/// module would not.
#[test]
fn foreign_values_get_the_same_answers() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let now = T0 + 1_234_567;
    // Sorted sets: the layout's ceiling is 2^53 - 1 (a live entry below the newest).
    let values: [(&str, &[&str]); 28] = [
        ("list", &["RPUSH", "1"]),
        ("hash", &["HSET", "f", "1"]),
        ("zset", &["ZADD", "5", "m"]),
        ("zset-inf", &["ZADD", "1764480001234567", "x", "+inf", "m"]),
        ("zset-2^53", &["ZADD", "9007199254740992", "m"]),
        ("zset-1e300", &["ZADD", "1e300", "m"]),
        (
            "zset-top",
            &["ZADD", "1764480001234567", "x", "9007199254740991", "m"],
        ),
        ("lease-inf", &["ZADD", "1764480001234567", "x", "+inf", "a"]),
        ("text", &["SET", "abc"]),
        ("float", &["SET", "1.5"]),
        ("negative", &["SET", "-3"]),
        ("zero-padded", &["SET", "007"]),
        ("top", &["SET", "9223372036854775806"]),
        ("over", &["SET", "9223372036854775808"]),
        ("past-2^53", &["SET", "9007199254740993"]),
        // SLIDEWINDOW's `<end>:<count>:<previous>`, at and past each field's ceiling.
        ("window", &["SET", "1764480002000000:3:4"]),
        ("window-padded", &["SET", "01764480002000000:03:0"]),
        ("window-21-digits", &["SET", "000001764480002000000:3:4"]),
        (
            "window-top",
            &["SET", "9322559254740991:1000000000000000:1000000000000000"],
        ),
        ("window-end-over", &["SET", "9322559254740992:1:0"]),
        (
            "window-count-over",
            &["SET", "1764480002000000:1000000000000001:0"],
        ),
        ("window-two", &["SET", "1764480002000000:3"]),
        ("window-four", &["SET", "1764480002000000:3:4:5"]),
        ("window-empty", &["SET", "1764480002000000::4"]),
        // TOKENBUCKET's `<tokens>:<timer>`: a live one, a negative, a late timer, a third part.
        ("pair", &["SET", "3:1764480001000000"]),
        ("pair-negative", &["SET", "-1:1764480001000000"]),
        ("pair-late", &["SET", "1:9322559254740992"]),
        ("pair-three", &["SET", "1:2:3"]),
    ];
    let mut lines = 0;
    for (name, how) in values {
        for cmd in [
            "fixed",
            "slidecount",
            "slidewindow",
            "slidelog",
            "gcra",
            "tokenbucket",
            "concurrency",
            "throttle",
        ] {
            let window = "3600";
            // The key each command reads first: the base key, or its window counter.
            let derived = match cmd {
                "fixed" => format!(":{}", (now - now % 3_600_000_000) / 1_000_000),
                "slidecount" => format!(":{}", now / 3_600_000_000),
                _ => String::new(),
            };
            let args: Vec<String> = match cmd {
                "concurrency" => vec!["5".into(), window.into(), "ACQUIRE".into(), "a".into()],
                "throttle" => vec!["3".into(), "10".into(), window.into(), "1".into()],
                // Within a log's largest limit, so that the call reads the set.
                "slidelog" | "slidewindow" | "tokenbucket" => {
                    vec!["5".into(), window.into(), "COST".into(), "3".into()]
                }
                _ => vec![
                    "9223372036854775".into(),
                    window.into(),
                    "COST".into(),
                    "3".into(),
                ],
            };
            for mode in ["", "PEEK", "REFUND", "RESET"] {
                if cmd == "throttle" && !mode.is_empty() {
                    continue;
                }
                let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
                for letter in ['m', 's'] {
                    let key = format!("{{f}}:{letter}{derived}");
                    let mut w = redis::cmd(how[0]);
                    w.arg(&key).arg(&how[1..]);
                    let _: Value = w.query(&mut c).expect("populate");
                }
                let mut words = vec!["{f}:X".to_string()];
                words.extend(args.iter().cloned());
                if !mode.is_empty() && cmd != "concurrency" {
                    words.push(mode.into());
                }
                words.extend(["NOW".into(), now.to_string()]);
                let call = Call {
                    command: cmd,
                    args: words,
                    keys: vec![0],
                };
                let m = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Module, 'm')]);
                let s = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Script, 's')]);
                assert_eq!(m, s, "{name}: {:?}", call.args);
                assert_same_state(&mut c, 'm', 's', &format!("{name}: {:?}", call.args));
                lines += 1;
            }
        }
    }
    // Seven commands in four modes, and RL.THROTTLE in one, per value.
    assert_eq!(lines, values.len() * (7 * 4 + 1));
}

/// The arguments of every command, wrong in every way the parsers know: the same
/// error text from both, and nothing written.
#[test]
fn bad_arguments_get_the_same_errors() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let now = "NOW 1764480000000000";
    let k = "{b}:X";
    let lines: Vec<String> = [
        "fixed",
        "fixed K",
        "fixed K 1",
        "fixed K 0 10",
        "fixed K 1 0",
        "fixed K 1 10x",
        "fixed K 1 1.5",
        "fixed K 1 ms",
        "fixed K 1 315360001s",
        "fixed K 1 315360000S",
        "fixed K 1000000000000001 10",
        "fixed K 1000000000000000 10 NOW",
        "fixed K 1 10 NOW 1764480000",
        "fixed K 1 10 NOW 1764480000000",
        "fixed K 1 10 NOW 9007199254740992",
        "fixed K 1 10 NOW -1",
        "fixed K 1 10 COST",
        "fixed K 1 10 COST 0",
        "fixed K 1 10 COST 1 cost 2",
        "fixed K 1 10 PEEK peek",
        "fixed K 1 10 PEEK REFUND",
        "fixed K 1 10 RESET REFUND",
        "fixed K 1 10 BURST 2",
        "fixed K 1 10 LEASE a",
        "fixed K 1 10 FOO",
        "fixed K 1 10 NOW 1764480000000000 NOW 1764480000000000",
        "fixed K 1 10 PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK",
        "fixed K 1 10 PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK PEEK",
        "slidecount K 1 00010 COST 0",
        "slidelog K 1000001 10",
        "slidelog K 10 10 COST 1000001",
        "slidelog K 10 10 COST 1000000 NOW 1764480000000000",
        "slidelog K 1000000 10 COST 1000 NOW 1764480000000000",
        "gcra K 10000001 10",
        "gcra K 1 10 BURST 0",
        "gcra K 1 10 BURST 1 BURST 1",
        "gcra K 7 315360000 BURST 1000000000000000 COST 1000000000000000 NOW 1764480000000000",
        "gcra K 7 315360000 BURST 1000000000000000 NOW 1764480000000000",
        "tokenbucket K 0 10",
        "tokenbucket K 1 10 REFILL",
        "tokenbucket K 1 10 REFILL 0",
        "tokenbucket K 1 10 REFILL 1 refill 1",
        "tokenbucket K 1 10 REFILL 1000000000000001",
        "tokenbucket K 1 10 BURST 2",
        "tokenbucket K 1 10 COUNTALL",
        "tokenbucket K 1 10 REFILL 2 COST 2 BLOCK 10 BACKOFF 20 STRIKES NOW 1764480000000000 PEEK x",
        "gcra K 1 10 REFILL 2",
        "all 1 fixed K 1 10 REFILL 2",
        "all 1 tokenbucket K 1 10 NOW 1764480000000000 REFILL 2",
        "all 1 tokenbucket K 1 10 REFILL 1 REFILL 1",
        "concurrency K 1 10",
        "concurrency K 1 10 ACQUIRE",
        "concurrency K 1 10 ACQUIRE a RELEASE a",
        "concurrency K 1 10 ACQUIRE a ACQUIRE a",
        "concurrency K 1 10 COST 2",
        "concurrency K 1000001 10 PEEK",
        "concurrency K 1 10 NOW 1764480000000000",
        "concurrency K 1 10 PEEK NOW",
        "concurrency K 1 10 acquire",
        "concurrency K 1 315360000 ACQUIRE a NOW 9007199254740000",
        "throttle K 1 2",
        "throttle K -1 2 3",
        "throttle K 1 0 3",
        "throttle K 1 2 0",
        "throttle K 1 2 315360001",
        "throttle K 1 2 3 -1",
        "throttle K 1 2 3 4 5",
        "throttle K 1 2 3 NOW",
        "throttle K 1 2 3 NOW 5",
        "throttle K 1 1000000000000000 1",
        "throttle K 1000000000000000 1 315360000",
        "throttle K 1 1 315360000 1000000000000000",
        "throttle K 1 2 3 4 NOW 1764480000000000 x",
        "all",
        "all 1",
        "all 0 fixed K 1 10",
        "all 17 fixed K 1 10",
        "all x fixed K 1 10",
        "all 2 fixed K 1 10",
        "all 1 token K 1 10",
        "all 1 throttle K 1 2",
        "all 1 fixed K 1 10 BURST 2",
        "all 1 fixed K 1 10 COST",
        "all 1 fixed K 1 10 COST 1 COST 1",
        "all 1 fixed K 1 10 NOW 1764480000000000 COST 1",
        "all 1 fixed K 1 10 PEEK REFUND",
        "all 1 fixed K 1 10 FOO",
        "all 1 fixed K 1 10 LEASE x",
        "all 1 concurrency K 1 10",
        "all 1 concurrency K 1 10 REFUND",
        "all 1 concurrency K 1 10 LEASE",
        "all 1 concurrency K 1 10 LEASE a LEASE b",
        "all 2 fixed K 1 10 gcra K 1 10",
        "all 1 concurrency K 1 10 COST 2 LEASE a",
        "all 1 fixed K 0 10",
        "all 1 slidelog K 1 10 COST 1000001",
        "all 1 gcra K 10001 10ms",
        "all 1 fixed K 1 10 NOW",
        "fixed K 1 10 BLOCK",
        "fixed K 1 10 BLOCK 0",
        "fixed K 1 10 BLOCK -1",
        "fixed K 1 10 BLOCK 1.5",
        "fixed K 1 10 BLOCK 315360001s",
        "fixed K 1 10 BLOCK 10 BACKOFF",
        "fixed K 1 10 BLOCK 10 BACKOFF 0",
        "fixed K 1 10 BLOCK 10 BACKOFF 9999ms",
        "fixed K 1 10 BLOCK 10 BLOCK 10",
        "fixed K 1 10 BLOCK 10 EXTEND extend",
        "fixed K 1 10 BLOCK 10 STRIKES STRIKES",
        "fixed K 1 10 BLOCK 10 BACKOFF 20 BACKOFF 20",
        "fixed K 1 10 BLOCK 10 EXTEND BACKOFF 20",
        "fixed K 1 10 EXTEND",
        "fixed K 1 10 BACKOFF 20",
        "fixed K 1 10 STRIKES",
        "fixed K 1 10 IMPOSE",
        "fixed K 1 10 BLOCK 10 IMPOSE IMPOSE",
        "fixed K 1 10 BLOCK 10 IMPOSE PEEK",
        "fixed K 1 10 BLOCK 10 RESET IMPOSE",
        "gcra K 1 10 BLOCK x",
        "slidecount K 1 10 BLOCK 10 BURST 2",
        "slidelog K 1 10 STRIKES BLOCK 5 EXTEND BACKOFF 5",
        "concurrency K 1 10 BLOCK 5 ACQUIRE a",
        "concurrency K 1 10 ACQUIRE a BLOCK 5",
        "throttle K 1 2 3 BLOCK 5",
        "all 1 concurrency K 1 10 BLOCK 5 LEASE a",
        "all 1 fixed K 1 10 NOW 1764480000000000 BLOCK 5",
        "all 1 fixed K 1 10 PEEK STRIKES",
        "all 1 fixed K 1 10 BLOCK 5 EXTEND BACKOFF 9",
        "all 1 fixed K 1 10 BLOCK",
        "all 1 fixed K 1 10 IMPOSE",
        "all 2 fixed K 1 10 gcra K2 1 10 IMPOSE",
        "all 2 slidelog K:block 5 60 fixed K 5 60 BLOCK 10",
        "all 2 fixed K 5 60 BLOCK 10 slidelog K:block 5 60",
        "fixed K 1 10 COUNTALL",
        "slidecount K 1 10 renew",
        "slidelog K 1 10 BLOCK 10 CountAll",
        "gcra K 1 10 RENEW",
        "concurrency K 1 10 ACQUIRE a COUNTALL",
        "concurrency K 1 10 renew",
        "throttle K 1 2 3 COUNTALL",
        "counter K 1 10 COUNTALL countall",
        "fixed K 1 10 ESCALATE",
        "gcra K 1 10 escalate",
        "concurrency K 1 10 ACQUIRE a ESCALATE",
        "throttle K 1 2 3 ESCALATE",
        "counter K 1 10 ESCALATE RENEW",
        "counter K 1 10 escalate PEEK ESCALATE",
        "counter K 1 10 ESCALATE BLOCK 10 EXTEND RENEW",
        "counter K 1 10 COUNTALL ESCALATE RENEW BLOCK 10 BACKOFF 20 STRIKES COST 1 PEEK",
        "counter K 1 10 COUNTALL ESCALATE RENEW BLOCK 10 BACKOFF 20 STRIKES COST 1 PEEK x y",
        "counter K 1 9223372036854776ms",
        "counter K 1 9223372036854776",
        "counter K 1 18446744073709551616ms",
        "counter K 1 10 BLOCK 9007201749600000ms",
        "fixed K 1 9007201749600000ms",
        "gcra K 1 9223372036854775ms",
        "all 1 counter K 1 10 ESCALATE",
        "all 1 counter K 1 10 PEEK escalate",
        "all 2 counter K 1 9223372036854776ms fixed K2 1 10",
        "all 2 counter K 1 9223372036854775ms fixed K2 1 315360001",
        "counter K 1 10 RENEW PEEK RENEW",
        "counter K 1 10 COUNTALL RENEW BLOCK 10 BACKOFF 20 STRIKES COST 1 PEEK x",
        "counter K 1 10 COUNTALL RENEW BLOCK 10 BACKOFF 20 STRIKES COST 1 PEEK",
        "all 1 counter K 1 10 COUNTALL",
        "all 2 counter K 1 10 RENEW fixed K2 1 10",
        "all 1 counter K 1 10 NOW 1764480000000000 renew",
        "all 1 fixed K 1 10 PEEK COUNTALL",
    ]
    .iter()
    .map(|l| l.replace(" K", &format!(" {k}")))
    .collect();
    let mut refused = 0;
    for line in &lines {
        let mut words: Vec<String> = line.split(' ').map(String::from).collect();
        let command: &'static str = COMMANDS
            .iter()
            .find(|c| **c == words[0])
            .copied()
            .expect("command");
        words.remove(0);
        if !line.contains("NOW") {
            words.extend(now.split(' ').map(String::from));
        }
        let keys: Vec<usize> = words
            .iter()
            .enumerate()
            .filter(|(_, w)| w.starts_with("{b}"))
            .map(|(i, _)| i)
            .collect();
        let call = Call {
            command,
            args: words,
            keys,
        };
        let m = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Module, 'm')]);
        let s = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Script, 's')]);
        assert_eq!(m, s, "{line}");
        if m[0].starts_with("ERR") {
            refused += 1;
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
            assert!(keys.is_empty(), "{line} wrote {keys:?}");
        } else {
            assert_same_state(&mut c, 'm', 's', line);
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
        }
    }
    // All but the four valid extremes among them (one a COST above its limit, denied),
    // and RL.COUNTER with every option.
    assert_eq!(refused, lines.len() - 5, "refused");
}

/// COUNTALL at the largest COST: the count stops at 10^15 on both, where it denies as
/// any larger count would, and stays within the layout (no later call is refused).
#[test]
fn countall_stops_counting_at_the_largest_limit_on_both() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let now = s * 1_000_000 + us;
    for (i, (limit, cost, extra)) in [
        ("3", "999999999999999", ""),
        ("3", "1000000000000000", ""),
        ("3", "1000000000000000", " RENEW"),
        ("1000000000000000", "1", ""),
        ("3", "2", " PEEK"),
        ("3", "2", " REFUND"),
        ("3", "1000000000000000", ""),
    ]
    .into_iter()
    .enumerate()
    {
        let line = format!("{{c}}:X {limit} 100 COST {cost} COUNTALL{extra} NOW {now}");
        let call = Call {
            command: "counter",
            args: line.split(' ').map(String::from).collect(),
            keys: vec![0],
        };
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        assert_eq!(r[0], r[1], "call {i}: {line}");
        assert!(
            r[0].starts_with("array([int(0)"),
            "call {i}: {line}: {}",
            r[0]
        );
        for l in ['m', 's'] {
            let v: String = redis::cmd("GET")
                .arg(format!("{{c}}:{l}"))
                .query(&mut c)
                .unwrap();
            let want = if extra == " REFUND" {
                "999999999999998"
            } else {
                "1000000000000000"
            };
            let want = if i == 0 { "999999999999999" } else { want };
            assert_eq!(v, want, "call {i} ({l}): {line}");
        }
        // Each twin's expiry comes from the real clock of its own write: give the
        // script's the module's instant, so that the next replies compare exactly.
        let at: i64 = redis::cmd("PEXPIRETIME")
            .arg("{c}:m")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("PEXPIREAT")
            .arg("{c}:s")
            .arg(at)
            .query(&mut c)
            .unwrap();
    }
    assert_same_state(&mut c, 'm', 's', "at the end");
}

/// `scripts/<command>.lua` is the library with its command's entry line, and every kit
/// ships the same bytes (`make scripts-sync` writes them all).
#[test]
fn scripts_are_generated_and_every_kit_has_the_same_copy() {
    let root = env!("CARGO_MANIFEST_DIR");
    let lib = std::fs::read_to_string(format!("{root}/scripts/src/lib.lua")).expect("lib.lua");
    for name in COMMANDS {
        let path = format!("{root}/scripts/{name}.lua");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let want = format!(
            "-- RL.{} as a Redis script: generated from scripts/src/lib.lua by make scripts-sync.\n{lib}\nreturn main('{name}')\n",
            name.to_uppercase()
        );
        assert!(
            text == want,
            "scripts/{name}.lua is out of date: run make scripts-sync"
        );
        for kit in [
            "clients/node/scripts",
            "clients/python/src/redis_rl/scripts",
            "clients/php/scripts",
            "clients/rust/scripts",
        ] {
            let copy = std::fs::read_to_string(format!("{root}/{kit}/{name}.lua"))
                .unwrap_or_else(|e| panic!("{kit}/{name}.lua: {e}"));
            assert!(
                copy == text,
                "{kit}/{name}.lua differs: run make scripts-sync"
            );
        }
    }
}

/// RL.PSEUDONYM has no script (Redis Lua has no SHA-256): there is none to load.
#[test]
fn pseudonym_has_no_script() {
    let root = env!("CARGO_MANIFEST_DIR");
    assert!(!std::path::Path::new(&format!("{root}/scripts/pseudonym.lua")).exists());
}

/// Without NOW both decide on the server's clock (TIME in the script): the same
/// window, so the same counter key and the same decision.
#[test]
fn server_time_without_now() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    for (command, args) in [
        ("fixed", vec!["5", "3600", "COST", "2"]),
        ("slidelog", vec!["5", "3600"]),
        ("gcra", vec!["5", "3600", "BURST", "2"]),
        ("concurrency", vec!["2", "3600", "ACQUIRE", "a"]),
    ] {
        let mut words = vec!["{t}:X".to_string()];
        words.extend(args.iter().map(|a| a.to_string()));
        let call = Call {
            command,
            args: words,
            keys: vec![0],
        };
        let replies = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        // allowed and remaining equal; the waits may be a millisecond apart.
        let head = |r: &str| r.split(", int(").take(2).collect::<Vec<_>>().join(",");
        assert_eq!(head(&replies[0]), head(&replies[1]), "{command}");
        let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
    }
}

/// Deliberate difference: a RL.THROTTLE TAT less than 1 ms ahead. The module keeps the
/// key to the end of the current millisecond (redis-cell's TTL truncated to 0 ms);
/// SET … PX refuses 0, so the script's key lives 1 ms. The replies are the same.
#[test]
fn throttle_ttl_under_one_millisecond_lives_one_millisecond() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    // One per microsecond: the TAT is 1 µs ahead.
    let call = Call {
        command: "throttle",
        args: ["{d}:X", "0", "1000000", "1", "1", "NOW", "1764480000000000"]
            .map(String::from)
            .to_vec(),
        keys: vec![0],
    };
    // TIME on both sides of the calls: where the two fall in one millisecond, the
    // module's clock and the script's are known to the millisecond. A transaction
    // would not do: Valkey answers TIME inside MULTI with the EXEC's start, while the
    // module reads the wall clock.
    let mut seen = 0;
    for _ in 0..200 {
        let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
        let mut pipe = redis::pipe();
        pipe.cmd("TIME");
        pipe.add_command(cmd_for(&shas, &call, Impl::Module, 'm'));
        pipe.add_command(cmd_for(&shas, &call, Impl::Script, 's'));
        pipe.cmd("PEXPIRETIME").arg("{d}:m");
        pipe.cmd("PEXPIRETIME").arg("{d}:s");
        pipe.cmd("TIME");
        type Reply = ((i64, i64), Vec<i64>, Vec<i64>, i64, i64, (i64, i64));
        let (before, m, s, m_at, s_at, after): Reply = pipe.query(&mut c).expect("throttle");
        assert_eq!(m, s);
        let ms = |t: (i64, i64)| t.0 * 1000 + t.1 / 1000;
        let now_ms = ms(before);
        if now_ms != ms(after) || s_at < 0 {
            continue;
        }
        // The module's key ends at its call's millisecond; Redis 8 deletes a key during
        // its expiry millisecond, so there it may already be gone.
        assert!(m_at == -2 || m_at == now_ms, "module {m_at} at {now_ms}");
        assert_eq!(s_at, now_ms + 1, "script {s_at} at {now_ms}");
        seen += 1;
        if seen == 5 {
            return;
        }
    }
    panic!("only {seen} readings inside one millisecond");
}

/// Deliberate difference: after a REFUND the module writes the counter back as a raw
/// string (the key API), the script's DECRBY stores an integer. Values, replies and
/// expiry are the same; only OBJECT ENCODING (and a few bytes) differ.
#[test]
fn refunded_counters_differ_only_in_encoding() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    for words in [
        [
            "{e}:X",
            "10",
            "3600",
            "COST",
            "3",
            "NOW",
            "1764480000000000",
        ],
        [
            "{e}:X",
            "10",
            "3600",
            "REFUND",
            "NOW",
            "1764480000000000",
            "COST",
        ],
    ] {
        let mut args: Vec<String> = words.map(String::from).to_vec();
        if args[6] == "COST" {
            args.push("1".into());
        }
        let call = Call {
            command: "fixed",
            args,
            keys: vec![0],
        };
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        assert_eq!(r[0], r[1]);
    }
    assert_same_state(&mut c, 'm', 's', "after the refund");
    let encoding = |c: &mut Connection, k: &str| -> String {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(k)
            .query(c)
            .expect("OBJECT")
    };
    let name = |l: char| format!("{{e}}:{l}:{}", 1_764_480_000u64 - 1_764_480_000 % 3600);
    assert_eq!(encoding(&mut c, &name('s')), "int");
    assert_ne!(encoding(&mut c, &name('m')), "int");
}

/// Deliberate difference: a RL.SLIDELOG member is `<µs>:<8 random hex>` on both, and
/// the random part differs, as it does between two module calls. Everything else is
/// the same: scores, the timestamp in each member, the count, the expiry.
#[test]
fn slidelog_members_differ_only_in_their_random_suffix() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    // Two twins a side (m and n by the module, s and t by the script), the same calls:
    // 13 units, 12 of them at one µs.
    for (cost, now) in [(4, T0), (4, T0), (4, T0), (1, T0 + 1)] {
        let call = Call {
            command: "slidelog",
            args: [
                "{l}:X",
                "20",
                "3600",
                "COST",
                &cost.to_string(),
                "NOW",
                &now.to_string(),
            ]
            .map(String::from)
            .to_vec(),
            keys: vec![0],
        };
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Module, 'n'),
                cmd_for(&shas, &call, Impl::Script, 's'),
                cmd_for(&shas, &call, Impl::Script, 't'),
            ],
        );
        assert!(r.iter().all(|x| x == &r[0]), "{r:?}");
    }
    assert_same_state(&mut c, 'm', 's', "after the calls");
    assert_same_state(&mut c, 'n', 't', "after the calls");
    let suffixes = |c: &mut Connection, l: char| -> std::collections::BTreeSet<String> {
        let log: Vec<(String, String)> = redis::cmd("ZRANGE")
            .arg(format!("{{l}}:{l}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(c)
            .expect("ZRANGE");
        assert_eq!(log.len(), 13, "{l}: {log:?}");
        log.iter()
            .map(|(member, score)| {
                // Exactly `<score>:<8 lowercase hex>`.
                assert_eq!(log_member(member), Some(score.as_str()), "{l}: {member}");
                member[score.len() + 1..].to_string()
            })
            .collect()
    };
    let [m, n, s, t] = ['m', 'n', 's', 't'].map(|l| suffixes(&mut c, l));
    // Random on both: no side repeats another's suffixes (a clash is 1 in ~2^25).
    for (a, b) in [(&m, &n), (&s, &t), (&m, &s), (&n, &t)] {
        assert!(a.is_disjoint(b), "{a:?} {b:?}");
    }
}

/// A COST up to the limit, as the libraries' stores take: 999,999 units on a limit of
/// 1,000,000 add 999,999 members on both (the script in batches, past Lua's `unpack`
/// limit of a few thousand values), the next unit fits once and the one after is
/// denied; a REFUND of 999,999 removes them again and RL.ALL adds them too. Replies
/// equal, and the twins' members (timestamps and scores) and whether they expire equal.
#[test]
fn slidelog_cost_up_to_the_limit_matches_the_module() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let call = |command: &'static str, words: String| Call {
        command,
        args: words.split(' ').map(String::from).collect(),
        keys: if command == "all" { vec![2] } else { vec![0] },
    };
    let log = "{h}:X 1000000 3600";
    let steps = [
        (
            call("slidelog", format!("{log} COST 999999 NOW {T0}")),
            "array([int(1), int(1), int(0), int(3600000)])",
        ),
        (
            call("slidelog", format!("{log} NOW {}", T0 + 1)),
            "array([int(1), int(0), int(0), int(3600000)])",
        ),
        (
            call("slidelog", format!("{log} NOW {}", T0 + 2)),
            "array([int(0), int(0), int(3600000), int(3600000)])",
        ),
        (
            call(
                "slidelog",
                format!("{log} COST 999999 NOW {} REFUND", T0 + 3),
            ),
            "",
        ),
        (
            call(
                "all",
                format!("1 slidelog {log} COST 999999 NOW {}", T0 + 4),
            ),
            "",
        ),
    ];
    let card = |c: &mut Connection, l: char| -> u64 {
        redis::cmd("ZCARD")
            .arg(format!("{{h}}:{l}"))
            .query(c)
            .unwrap()
    };
    for (i, (call, expected)) in steps.iter().enumerate() {
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, call, Impl::Module, 'm'),
                cmd_for(&shas, call, Impl::Script, 's'),
            ],
        );
        assert_eq!(r[0], r[1], "{call:?}");
        assert!(!r[0].starts_with("ERR"), "{call:?}: {r:?}");
        if !expected.is_empty() {
            assert_eq!(
                r[0].to_lowercase().replace(' ', ""),
                expected.replace(' ', ""),
                "{call:?}"
            );
        }
        let context = format!("after step {i}");
        assert_eq!(card(&mut c, 'm'), card(&mut c, 's'), "{context}");
        // Both have an expiry after a spending call (a REFUND sets none), from instants
        // seconds apart on a busy machine: dropped, so that the rest compares exactly.
        let persisted = ['m', 's'].map(|l| -> i64 {
            redis::cmd("PERSIST")
                .arg(format!("{{h}}:{l}"))
                .query(&mut c)
                .unwrap()
        });
        let refund = call.args.iter().any(|a| a == "REFUND");
        assert_eq!(persisted, [i64::from(!refund); 2], "expiry {context}");
        assert_same_state(&mut c, 'm', 's', &context);
    }
    // 1,000,000, less the refund's 999,999, plus RL.ALL's 999,999.
    assert_eq!(card(&mut c, 'm'), 1_000_000);
}

/// One command over a socket of its own: the reply's first line, byte for byte (the
/// client library would decode an error's text).
fn raw_reply_line(port: u16, words: &[&[u8]]) -> Vec<u8> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut request = format!("*{}\r\n", words.len()).into_bytes();
    for w in words {
        request.extend(format!("${}\r\n", w.len()).bytes());
        request.extend(*w);
        request.extend(b"\r\n");
    }
    s.write_all(&request).expect("write");
    let mut line = Vec::new();
    BufReader::new(s)
        .read_until(b'\n', &mut line)
        .expect("read");
    line
}

/// Deliberate difference: a key name in an error text. Both replace ASCII control
/// characters with `?` and cut the text at 512; the module also replaces C1 controls
/// with `?`, writes invalid UTF-8 as U+FFFD and counts the 512 in characters, the
/// script passes those bytes through and counts bytes. Everything else is the same.
#[test]
fn error_texts_with_unusual_key_names() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let long_e = "é".repeat(300);
    let long_a = "a".repeat(600);
    // A key's name after `{e}:<side>`, and how the module and the script show it.
    let cases: [(&[u8], &[u8], &[u8]); 7] = [
        (b"plain", b"plain", b"plain"),
        (b"a\x01b\x1f\x7f\t", b"a?b???", b"a?b???"),
        (
            "é\u{2028}".as_bytes(),
            "é\u{2028}".as_bytes(),
            "é\u{2028}".as_bytes(),
        ),
        (b"\xc2\x85\xc2\x9f", b"??", b"\xc2\x85\xc2\x9f"),
        (
            b"\xff\xfe\x80",
            "\u{FFFD}\u{FFFD}\u{FFFD}".as_bytes(),
            b"\xff\xfe\x80",
        ),
        (long_e.as_bytes(), long_e.as_bytes(), long_e.as_bytes()),
        (long_a.as_bytes(), long_a.as_bytes(), long_a.as_bytes()),
    ];
    for (name, module_shows, script_shows) in cases {
        let key = |l: char| [format!("{{e}}:{l}").as_bytes(), name].concat();
        let text = |l: char, shown: &[u8]| {
            [
                format!("ERR limiter key '{{e}}:{l}").as_bytes(),
                shown,
                b"' does not hold a non-negative integer",
            ]
            .concat()
        };
        // Cut at 512: characters for the module, bytes for the script.
        let mut module_text = text('m', module_shows);
        let chars: Vec<char> = String::from_utf8_lossy(&module_text).chars().collect();
        if chars.len() > 512 {
            module_text = chars[..512].iter().collect::<String>().into_bytes();
        }
        let mut script_text = text('s', script_shows);
        script_text.truncate(512);
        let (m, s) = (key('m'), key('s'));
        for k in [&m, &s] {
            let _: () = redis::cmd("SET").arg(k).arg("abc").query(&mut c).unwrap();
        }
        let sha = shas.0["counter"].as_bytes();
        let line = |t: &[u8]| [b"-", t, b"\r\n"].concat();
        let shown = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let got = raw_reply_line(server.port, &[b"RL.COUNTER", &m, b"5", b"60"]);
        assert_eq!(shown(&got), shown(&line(&module_text)), "module");
        assert_eq!(got, line(&module_text), "module, bytes");
        let got = raw_reply_line(server.port, &[b"EVALSHA", sha, b"1", &s, &s, b"5", b"60"]);
        assert_eq!(shown(&got), shown(&line(&script_text)), "script");
        assert_eq!(got, line(&script_text), "script, bytes");
    }
}

/// Extreme values, where the arithmetic leaves doubles: GCRA lattices over ten years
/// with bursts and costs near the 10^15 bound (TATs near i64's top, the overflow
/// error), THROTTLE's nanosecond TATs beyond 2^63 / 1000, SLIDECOUNT with huge
/// counters and limits. The same replies and state, call for call.
#[test]
fn extreme_values_compute_exactly() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let mut rng = StdRng::seed_from_u64(0xe7);
    let big = |rng: &mut StdRng| -> String {
        match rng.gen_range(0..4) {
            0 => "1000000000000000".into(),
            1 => rng.gen_range(1..=1_000_000_000_000_000u64).to_string(),
            2 => rng.gen_range(1..=1000u64).to_string(),
            _ => (1u64 << rng.gen_range(0..50)).to_string(),
        }
    };
    let windows = ["315360000", "1", "7", "3ms", "86400", "1000ms", "999999ms"];
    let mut now = T0;
    for i in 0..3000 {
        now += match rng.gen_range(0..4) {
            0 => 0,
            1 => rng.gen_range(0..1000),
            2 => rng.gen_range(0..10_000_000_000),
            _ => rng.gen_range(0..1_000_000_000_000_000) % (MAX_NOW - now).max(1),
        };
        if now > MAX_NOW {
            now = T0;
        }
        let window = windows[rng.gen_range(0..windows.len())];
        let command = ["gcra", "throttle", "slidecount", "fixed"][rng.gen_range(0..4)];
        let mut args = vec![format!("{{x{}}}:X", rng.gen_range(0..3))];
        match command {
            "throttle" => {
                args.extend([
                    big(&mut rng),
                    big(&mut rng),
                    ["315360000", "1", "86400"][rng.gen_range(0..3)].into(),
                ]);
                args.push(big(&mut rng));
            }
            _ => {
                args.extend([big(&mut rng), window.into()]);
                if command == "gcra" && rng.gen_bool(0.7) {
                    args.extend(["BURST".into(), big(&mut rng)]);
                }
                if rng.gen_bool(0.6) {
                    args.extend(["COST".into(), big(&mut rng)]);
                }
                if rng.gen_bool(0.2) {
                    args.push(["PEEK", "REFUND", "RESET"][rng.gen_range(0..3)].into());
                }
            }
        }
        args.extend(["NOW".into(), now.to_string()]);
        let call = Call {
            command,
            args,
            keys: vec![0],
        };
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        // Integers past 2^53 come back from Lua as the nearest double.
        let r: Vec<String> = r.iter().map(|t| as_doubles(t)).collect();
        assert_eq!(r[0], r[1], "call {i}: {:?}", call.args);
        // Short windows expire in real time: compare at once, then start afresh
        // wherever a key would expire during the next calls.
        same_state(
            &mut c,
            'm',
            's',
            &format!("call {i}: {:?}", call.args),
            true,
        );
        let short = states(&mut c, 'm')
            .values()
            .chain(states(&mut c, 's').values())
            .any(|s| s.expire_at >= 0);
        if short || i % 7 == 0 {
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
        }
    }
}

const MAX_NOW: u64 = (1 << 53) - 1;

/// Every `int(n)` of a reply with n rounded to the nearest double (as a Lua number
/// holds it), for comparing replies whose integers pass 2^53.
fn as_doubles(reply: &str) -> String {
    let mut out = String::new();
    let mut rest = reply;
    while let Some(at) = rest.find("int(") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let end = rest.find(')').unwrap_or(rest.len());
        match rest[..end].parse::<i64>() {
            Ok(n) => {
                out.push_str(&((n as f64).min(9_223_372_036_854_774_784.0) as i64).to_string())
            }
            Err(_) => out.push_str(&rest[..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A TAT near the top of i64 (the only way a reply's integers could pass 2^53, where a
/// Lua number stops being exact) is beyond a GCRA arrival time's layout: both refuse it
/// with the same words, so no reply of either passes 2^53.
#[test]
fn a_tat_past_the_layout_is_refused_by_both() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    for k in ["{h}:m", "{h}:s"] {
        let _: () = redis::cmd("SET")
            .arg(k)
            .arg("9223372036854774001")
            .query(&mut c)
            .expect("SET");
    }
    let call = Call {
        command: "gcra",
        args: ["{h}:X", "1", "1", "PEEK", "NOW", "1764480000000000"]
            .map(String::from)
            .to_vec(),
        keys: vec![0],
    };
    let r = pipeline(
        &mut c,
        &[
            cmd_for(&shas, &call, Impl::Module, 'm'),
            cmd_for(&shas, &call, Impl::Script, 's'),
        ],
    );
    assert!(
        r[0].contains("does not hold a GCRA arrival time"),
        "{}",
        r[0]
    );
    assert_eq!(
        r[0].replace("{h}:m", "{h}:X"),
        r[1].replace("{h}:s", "{h}:X")
    );
}

/// In a cluster both refuse a per-window limiter on a key without a hash tag (its
/// counters would land in other slots), and agree on a key with one.
#[test]
fn cluster_needs_a_hash_tag_on_both() {
    let cluster = common::cluster::Cluster::start();
    let on_owner = |call: &Call, imp: Impl, letter: char| -> String {
        for node in &cluster.nodes {
            let mut c = node.conn();
            let shas = load_scripts(&mut c);
            let r = pipeline(&mut c, &[cmd_for(&shas, call, imp, letter)]);
            if !r[0].contains("MOVED") {
                return r[0].clone();
            }
        }
        panic!("no node owns {:?}", call.args);
    };
    for (key, tagged) in [("plain:X", false), ("{tag}:X", true)] {
        // With BLOCK every limiter has a derived key: `<key>:block`.
        for (command, block) in [
            ("fixed", false),
            ("slidecount", false),
            ("gcra", false),
            ("gcra", true),
            ("counter", false),
            ("counter", true),
            ("slidelog", true),
        ] {
            let mut args: Vec<String> = [key, "5", "60", "NOW", "1764480000000000"]
                .map(String::from)
                .to_vec();
            if block {
                args.extend(["BLOCK".into(), "300".into()]);
            }
            let call = Call {
                command,
                args,
                keys: vec![0],
            };
            let m = on_owner(&call, Impl::Module, 'm');
            let s = on_owner(&call, Impl::Script, 's');
            let needs = m.contains("needs a {hash tag}");
            // GCRA and COUNTER keep their state at the key itself.
            let derived = (command != "gcra" && command != "counter") || block;
            assert_eq!(needs, !tagged && derived, "{command} {key}: {m}");
            // The untagged twins hash apart, so compare with the key names masked.
            let mask = |r: &str| {
                r.replace("plain:m", "plain:X")
                    .replace("plain:s", "plain:X")
            };
            assert_eq!(mask(&m), mask(&s), "{command} {key}");
        }
    }
}

/// Expiry instants to the millisecond: module and script in one transaction usually
/// run within the same millisecond, and then their instants must be equal (the TTL
/// rounded the same way); the state tests allow for a preempted server.
#[test]
fn expiry_instants_agree_to_the_millisecond() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let mut equal = [0; 4];
    let trials = 48;
    for i in 0..trials {
        let (command, args): (&'static str, Vec<&str>) = match i % 4 {
            // 7 per hour: a TAT 514,285,714.3 µs ahead, its TTL rounded up.
            0 => ("gcra", vec!["7", "3600", "COST", "2"]),
            1 => ("fixed", vec!["7", "1500ms"]),
            2 => ("slidelog", vec!["7", "2500ms"]),
            _ => ("concurrency", vec!["7", "2500ms", "ACQUIRE", "a"]),
        };
        // A pair can split when the machine preempts the server between the twin calls
        // (their expiries follow the real clock): up to three fresh pairs per trial,
        // so a busy machine does not fail the run, and a rounding bias still splits all.
        for attempt in 0..3 {
            let key = format!("{{z{i}a{attempt}}}:X");
            let mut words = vec![key.clone()];
            words.extend(args.iter().map(|a| a.to_string()));
            words.extend(["NOW".into(), (T0 + 1_234_567 + i).to_string()]);
            let call = Call {
                command,
                args: words,
                keys: vec![0],
            };
            let name = |l: char| {
                let base = key.replace(":X", &format!(":{l}"));
                match command {
                    "fixed" => format!("{base}:{}", (T0 + 1_234_567 + i) / 1_500_000 * 1_500),
                    _ => base,
                }
            };
            let mut pipe = redis::pipe();
            pipe.atomic()
                .add_command(cmd_for(&shas, &call, Impl::Module, 'm'))
                .add_command(cmd_for(&shas, &call, Impl::Script, 's'))
                .cmd("PEXPIRETIME")
                .arg(name('m'))
                .cmd("PEXPIRETIME")
                .arg(name('s'));
            let (_, _, m, s): (Value, Value, i64, i64) = pipe.query(&mut c).expect("MULTI");
            assert!(m > 0 && s > 0, "{command}: {m} {s}");
            assert!((m - s).abs() <= TOL_MS, "{command}: {m} {s}");
            if m == s {
                equal[i as usize % 4] += 1;
                break;
            }
        }
    }
    // Per command: most trials ran within one millisecond.
    assert!(equal.iter().all(|&n| n >= 6), "equal of 12 each: {equal:?}");
}

/// A block key's expiry to the millisecond: a strike that keeps the block's end leaves
/// the time left, rounded up to a whole millisecond by both (see
/// `expiry_instants_agree_to_the_millisecond` for why most trials, not all).
#[test]
fn block_expiry_instants_agree_to_the_millisecond() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let mut equal = 0;
    for i in 0..12u64 {
        for attempt in 0..3 {
            let key = format!("{{y{i}a{attempt}}}:X");
            let call = |mode: Option<&str>, at: u64| {
                let mut args: Vec<String> =
                    [key.as_str(), "1", "3600", "BLOCK", "2500ms", "STRIKES"]
                        .map(String::from)
                        .to_vec();
                args.extend(mode.map(String::from));
                args.extend(["NOW".into(), at.to_string()]);
                Call {
                    command: "gcra",
                    args,
                    keys: vec![0],
                }
            };
            // IMPOSE: a block of exactly 2500 ms; then a strike 1234.567 ms (and i µs)
            // later: 1265.433 ms left, 1266 ms of TTL.
            let impose = call(Some("IMPOSE"), T0);
            let r = pipeline(
                &mut c,
                &[
                    cmd_for(&shas, &impose, Impl::Module, 'm'),
                    cmd_for(&shas, &impose, Impl::Script, 's'),
                ],
            );
            assert_eq!(r[0], r[1]);
            let strike = call(None, T0 + 1_234_567 + i);
            let name = |l: char| format!("{}:block", key.replace(":X", &format!(":{l}")));
            let mut pipe = redis::pipe();
            pipe.atomic()
                .add_command(cmd_for(&shas, &strike, Impl::Module, 'm'))
                .add_command(cmd_for(&shas, &strike, Impl::Script, 's'))
                .cmd("PEXPIRETIME")
                .arg(name('m'))
                .cmd("PEXPIRETIME")
                .arg(name('s'));
            let (rm, rs, m, s): (Vec<i64>, Vec<i64>, i64, i64) = pipe.query(&mut c).expect("MULTI");
            assert_eq!(rm, vec![0, 0, 1266, 1266, 1]);
            assert_eq!(rm, rs);
            assert!(m > 0 && s > 0, "{m} {s}");
            assert!((m - s).abs() <= TOL_MS, "{m} {s}");
            if m == s {
                equal += 1;
                break;
            }
        }
    }
    assert!(equal >= 9, "equal in {equal} of 12");
}

/// The examples of docs/block.md, on both: the replies the page shows, the same block
/// keys (value and expiry) and the same counters.
#[test]
fn block_examples_from_the_docs_on_both() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let login = "{alice}:X 2 60 BLOCK 300 NOW";
    let api = "{k1}:X 1 10 BLOCK 10 BACKOFF 3600 STRIKES NOW";
    for (command, line, at, want) in [
        ("fixed", login, 0, vec![1, 1, 0, 60000]),
        ("fixed", login, 1, vec![1, 0, 0, 59000]),
        ("fixed", login, 2, vec![0, 0, 300000, 300000]),
        ("fixed", login, 62, vec![0, 0, 240000, 240000]),
        ("fixed", login, 302, vec![1, 1, 0, 58000]),
        ("gcra", api, 0, vec![1, 0, 0, 10000, 0]),
        ("gcra", api, 1, vec![0, 0, 10000, 10000, 1]),
        ("gcra", api, 2, vec![0, 0, 20000, 20000, 2]),
    ] {
        let mut args: Vec<String> = line.split(' ').map(String::from).collect();
        args.push((1_764_480_000_000_000u64 + at * 1_000_000).to_string());
        let call = Call {
            command,
            args,
            keys: vec![0],
        };
        for (imp, letter) in [(Impl::Module, 'm'), (Impl::Script, 's')] {
            let got: Vec<i64> = cmd_for(&shas, &call, imp, letter)
                .query(&mut c)
                .unwrap_or_else(|e| panic!("{line} {at}: {e}"));
            assert_eq!(got, want, "{imp:?}: {line} at +{at} s");
        }
        assert_same_state(&mut c, 'm', 's', &format!("{line} at +{at} s"));
        if (command, at) == ("fixed", 2) {
            let value: String = redis::cmd("GET")
                .arg("{alice}:s:block")
                .query(&mut c)
                .expect("GET");
            assert_eq!(value, "1764480302000000");
        }
    }
    let value: String = redis::cmd("GET")
        .arg("{k1}:s:block")
        .query(&mut c)
        .expect("GET");
    assert_eq!(value, "1764480022000000:2");
}

/// Every mode on every limiter while blocked, not blocked and after the block ended,
/// with each clause: the same replies and state, call for call; IMPOSE then RESET.
#[test]
fn block_modes_on_every_limiter() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let clauses = [
        "BLOCK 100",
        "BLOCK 100 STRIKES",
        "EXTEND BLOCK 100",
        "BLOCK 100 BACKOFF 1000 STRIKES",
        "STRIKES BACKOFF 100 BLOCK 100000ms",
    ];
    let mut compared = 0;
    for command in ["fixed", "slidecount", "slidelog", "gcra", "all"] {
        for (k, clause) in clauses.iter().enumerate() {
            let head = match command {
                "all" => {
                    format!("2 gcra {{a{k}}}:Xg 1 1000 {clause} fixed {{a{k}}}:Xf 3 1000 {clause}")
                }
                _ => format!("{{a{k}{command}}}:X 2 1000 {clause}"),
            };
            // Two admitted, a denial (the block starts), calls while blocked, at its
            // end and after: in every mode.
            // (Strikes that keep the end leave the time left as the key's TTL: none
            // here is under a minute, so nothing expires in real time meanwhile.)
            let steps: [(u64, &str); 14] = [
                (0, ""),
                (1, ""),
                (2, ""),
                (3, "PEEK"),
                (4, "REFUND"),
                (5, ""),
                (30, ""),
                (99, "PEEK"),
                (102, ""),
                (103, "IMPOSE"),
                (104, ""),
                (150, "RESET"),
                (151, ""),
                (5000, ""),
            ];
            for (s, mode) in steps {
                let mut args: Vec<String> = head.split(' ').map(String::from).collect();
                args.extend(["NOW".into(), (T0 + s * 1_000_000).to_string()]);
                if !mode.is_empty() {
                    args.push(mode.into());
                }
                let keys = (0..args.len())
                    .filter(|&i| args[i].starts_with("{a"))
                    .collect();
                let call = Call {
                    command,
                    args,
                    keys,
                };
                let r = pipeline(
                    &mut c,
                    &[
                        cmd_for(&shas, &call, Impl::Module, 'm'),
                        cmd_for(&shas, &call, Impl::Script, 's'),
                    ],
                );
                assert_eq!(r[0], r[1], "{:?}", call.args);
                assert!(!r[0].starts_with("ERR"), "{:?}: {}", call.args, r[0]);
                assert_same_state(&mut c, 'm', 's', &format!("{:?}", call.args));
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 5 * 5 * 14);
}

/// Block keys that hold what no block wrote (another type, text, a count of strikes
/// past 10^15, an end past 2^53 - 1 + 10 years), and limiter keys that hold garbage
/// while a block holds (a blocked call does not read them): the module's reply or
/// error, nothing written that the module would not write.
#[test]
fn foreign_block_values_get_the_same_answers() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let now = T0 + 1_234_567;
    let later = (now + 3_600_000_000).to_string();
    let values: Vec<(&str, Vec<String>)> = vec![
        ("list", vec!["RPUSH".into(), "1".into()]),
        ("text", vec!["SET".into(), "abc".into()]),
        ("empty", vec!["SET".into(), "".into()]),
        ("colon", vec!["SET".into(), "1:".into()]),
        ("two colons", vec!["SET".into(), format!("{later}:1:2")]),
        ("signed", vec!["SET".into(), format!("+{later}")]),
        (
            "past u64",
            vec!["SET".into(), "18446744073709551616".into()],
        ),
        ("passed", vec!["SET".into(), format!("{}:5", now - 1)]),
        ("zero-padded", vec!["SET".into(), format!("000{later}:007")]),
        ("no count", vec!["SET".into(), later.clone()]),
        ("imposed", vec!["SET".into(), format!("{later}:0")]),
        ("u64 end", vec!["SET".into(), "18446744073709551615".into()]),
        (
            "many strikes",
            vec!["SET".into(), format!("{later}:18446744073709551615")],
        ),
        // The layout's ceilings: an end at 2^53 - 1 + 10 years, 10^15 strikes.
        (
            "past the end",
            vec!["SET".into(), "9322559254740992".into()],
        ),
        (
            "past the strikes",
            vec!["SET".into(), format!("{later}:1000000000000001")],
        ),
        (
            "at the ceilings",
            vec!["SET".into(), "9322559254740991:1000000000000000".into()],
        ),
    ];
    let mut lines = 0;
    for (name, how) in &values {
        for command in ["fixed", "slidecount", "slidelog", "gcra", "all"] {
            for clause in [
                "BLOCK 600",
                "BLOCK 600 STRIKES",
                "BLOCK 600 BACKOFF 6000 STRIKES",
            ] {
                for mode in ["", "PEEK", "REFUND", "RESET", "IMPOSE"] {
                    let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
                    let base = |l: char| match command {
                        "all" => format!("{{f}}:{l}a"),
                        _ => format!("{{f}}:{l}"),
                    };
                    // Every other time the limiter's own keys hold garbage: a call reads
                    // them only when it is not blocked (or RESETs, or IMPOSEs).
                    let garbage = lines % 2 == 0;
                    let counter = match command {
                        "fixed" => format!(":{}", (now - now % 3_600_000_000) / 1_000_000),
                        "slidecount" => format!(":{}", now / 3_600_000_000),
                        _ => String::new(),
                    };
                    for letter in ['m', 's'] {
                        let mut w = redis::cmd(&how[0]);
                        w.arg(format!("{}:block", base(letter))).arg(&how[1..]);
                        let _: Value = w.query(&mut c).expect("populate");
                        if garbage {
                            let _: () = redis::cmd("HSET")
                                .arg(format!("{}{counter}", base(letter)))
                                .arg("f")
                                .arg("1")
                                .query(&mut c)
                                .expect("HSET");
                        }
                    }
                    let line = match command {
                        "all" => format!("1 gcra {{f}}:Xa 5 3600 {clause} NOW {now} {mode}"),
                        _ => format!("{{f}}:X 5 3600 {clause} NOW {now} {mode}"),
                    };
                    let args: Vec<String> = line.split_whitespace().map(String::from).collect();
                    let keys = (0..args.len())
                        .filter(|&i| args[i].starts_with("{f}"))
                        .collect();
                    let call = Call {
                        command,
                        args,
                        keys,
                    };
                    let m = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Module, 'm')]);
                    let s = pipeline(&mut c, &[cmd_for(&shas, &call, Impl::Script, 's')]);
                    // Integers past 2^53 come back from Lua as the nearest double.
                    assert_eq!(as_doubles(&m[0]), as_doubles(&s[0]), "{name}: {line}");
                    assert_same_state(&mut c, 'm', 's', &format!("{name}: {line}"));
                    lines += 1;
                }
            }
        }
    }
    assert_eq!(lines, values.len() * 5 * 3 * 5);
}

/// Deliberate difference: the module writes a block key as a raw string (the key API),
/// the script's SET stores it as SET does (an integer on Redis, an embedded string on
/// Valkey). Values, replies and expiry are the same; only OBJECT ENCODING (and a few
/// bytes) differ.
#[test]
fn block_keys_differ_only_in_encoding() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    for at in [0, 1] {
        let call = Call {
            command: "fixed",
            args: ["{e}:X", "1", "3600", "BLOCK", "600"]
                .map(String::from)
                .into_iter()
                .chain(["NOW".into(), (T0 + at).to_string()])
                .collect(),
            keys: vec![0],
        };
        let r = pipeline(
            &mut c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        assert_eq!(r[0], r[1]);
    }
    assert_same_state(&mut c, 'm', 's', "after the block started");
    let encoding = |c: &mut Connection, k: &str| -> String {
        redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(k)
            .query(c)
            .expect("OBJECT")
    };
    // The script's SET: an integer on Redis, an embedded string on Valkey.
    assert_ne!(encoding(&mut c, "{e}:s:block"), "raw");
    assert_eq!(encoding(&mut c, "{e}:m:block"), "raw");
}

/// Deliberate difference: under `maxmemory` the module refuses every spending call and
/// IMPOSE; Redis refuses only a script's first write that needs memory. So the script
/// answers a call while blocked (it writes nothing), and a block it starts, whose first
/// write is a DEL, goes on to its SET. PEEK gets the same answer from both.
#[test]
fn under_maxmemory_the_scripts_answer_calls_that_start_no_write_needing_memory() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let call = |key: &str, extra: &[&str], at: u64| {
        let mut args: Vec<String> = [key, "1", "600", "BLOCK", "300"].map(String::from).to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(["NOW".into(), (T0 + at).to_string()]);
        Call {
            command: "fixed",
            args,
            keys: vec![0],
        }
    };
    let both = |c: &mut Connection, call: &Call| {
        pipeline(
            c,
            &[
                cmd_for(&shas, call, Impl::Module, 'm'),
                cmd_for(&shas, call, Impl::Script, 's'),
            ],
        )
    };
    let plain = |at: u64| Call {
        command: "fixed",
        args: ["{r}:X", "1", "600", "NOW", &(T0 + at).to_string()]
            .map(String::from)
            .to_vec(),
        keys: vec![0],
    };
    // {o} blocked, {p} and {r} (without BLOCK) at their limit.
    for r in [
        both(&mut c, &call("{o}:X", &[], 0)),
        both(&mut c, &call("{o}:X", &[], 0)),
        both(&mut c, &call("{p}:X", &[], 0)),
        both(&mut c, &plain(0)),
    ] {
        assert_eq!(r[0], r[1]);
    }
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(1)
        .query(&mut c)
        .expect("CONFIG");
    let oom = "ERR OOM command not allowed when used memory > 'maxmemory'.";
    let blocked = "array([int(0), int(0), int(300000), int(300000)])";
    for (what, call) in [
        ("a spend while blocked", call("{o}:X", &[], 1)),
        ("a denial that starts a block", call("{p}:X", &[], 1)),
        ("IMPOSE", call("{q}:X", &["IMPOSE"], 1)),
    ] {
        let r = both(&mut c, &call);
        assert_eq!(r[0].trim(), oom, "module: {what}");
        assert_eq!(r[1], blocked, "script: {what}");
    }
    // A denial without BLOCK writes nothing either.
    let r = both(&mut c, &plain(1_000_000));
    assert_eq!(r[0].trim(), oom);
    assert_eq!(r[1], "array([int(0), int(0), int(599000), int(599000)])");
    let r = both(&mut c, &call("{o}:X", &["PEEK"], 1));
    assert_eq!((r[0].as_str(), r[1].as_str()), (blocked, blocked));
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(0)
        .query(&mut c)
        .expect("CONFIG");
    let exists = |c: &mut Connection, k: &str| -> bool {
        redis::cmd("EXISTS").arg(k).query(c).expect("EXISTS")
    };
    assert!(exists(&mut c, "{p}:s:block") && exists(&mut c, "{q}:s:block"));
    assert!(!exists(&mut c, "{p}:m:block") && !exists(&mut c, "{q}:m:block"));
}

/// The one deliberate difference of RL.COUNTER's long windows: Redis hands a script an
/// integer reply as a double, and takes a script's integer reply from one, so past
/// 2^53 ms (an expiry after the year 287,000; a reply of more than 2^53 ms) a script
/// reads and answers the nearest double: doubles there are 2 apart, so the read and the
/// reply are each at most 1 ms off, and a reply is within 2 ms of the module's. Below it, and for
/// what a script computes itself (ESCALATE's 2^53 - 1 ms), both agree exactly.
#[test]
fn past_2_to_the_53_ms_a_script_answers_within_two_milliseconds() {
    let server = Server::start();
    let mut c = server.conn();
    let shas = load_scripts(&mut c);
    let ints = |reply: &str| -> Vec<i64> {
        reply
            .split("int(")
            .skip(1)
            .filter_map(|p| p.split(')').next()?.parse().ok())
            .collect()
    };
    let both = |c: &mut Connection, args: &[&str]| -> (Vec<i64>, Vec<i64>) {
        let call = Call {
            command: "counter",
            args: args.iter().map(|a| a.to_string()).collect(),
            keys: vec![0],
        };
        let r = pipeline(
            c,
            &[
                cmd_for(&shas, &call, Impl::Module, 'm'),
                cmd_for(&shas, &call, Impl::Script, 's'),
            ],
        );
        (ints(&r[0]), ints(&r[1]))
    };
    // The longest window's reset, 2^63 / 1000 - 1 ms: the script replies the double.
    let (m, s) = both(&mut c, &["{l}:X", "1", "9223372036854775ms"]);
    assert_eq!(m, [1, 0, 0, 9_223_372_036_854_775]);
    assert_eq!(s, [1, 0, 0, 9_223_372_036_854_776]);
    assert_same_state(&mut c, 'm', 's', "the longest window");

    // @fastify/rate-limit's 285,421 years with ESCALATE, on twins expiring at the same
    // odd instant past 2^53 ms, which a double cannot hold.
    let (secs, us): (u64, u64) = redis::cmd("TIME").query(&mut c).unwrap();
    let now = (secs * 1_000_000 + us).to_string();
    let years = ["{y}:X", "2", "9007201749600000ms", "ESCALATE", "NOW", &now];
    let (m, s) = both(&mut c, &years);
    assert_eq!((m.clone(), s), (vec![1, 1, 0, 9_007_201_749_600_000], m));
    let end: i64 = 9_007_201_749_600_001 + (secs as i64) * 1000;
    for l in ['m', 's'] {
        let _: () = redis::cmd("PEXPIREAT")
            .arg(format!("{{y}}:{l}"))
            .arg(end)
            .query(&mut c)
            .unwrap();
    }
    let (m, s) = both(&mut c, &years);
    assert_eq!(
        (m[..3].to_vec(), s[..3].to_vec()),
        (vec![1, 0, 0], vec![1, 0, 0])
    );
    // Read as the nearest double and answered as one: two roundings of at most 1 ms.
    assert!((m[3] - s[3]).abs() <= 2, "{m:?} {s:?}");
    // The denial's TTL is the script's own number: exact on both.
    let (m, s) = both(&mut c, &years);
    assert_eq!(m, [0, 0, (1 << 53) - 1, (1 << 53) - 1]);
    assert_eq!(s, m);
    assert_same_state(&mut c, 'm', 's', "285,421 years");
}
