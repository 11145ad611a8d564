//! A command storm: 30,000 random RL.* commands, most of them malformed (random arity,
//! huge, negative and non-numeric numbers, empty, binary and very long keys, keys of
//! every type, options in random order and case, random units), pipelined at one live
//! server, mixed with valid traffic on a few tracked limiter keys whose every decision
//! is checked against a model.
//!
//! Afterwards, and after every batch: the server is alive; every reply was a limiter
//! reply, a pseudonym or an error starting with ERR/WRONGTYPE/NOPERM/OOM; a SLIDELOG
//! log never holds more than `limit` members inside its window; every counter holds
//! exactly the units the valid replies admitted; GCRA never admits more than
//! `BURST + rate × interval`; every limiter key has a TTL; keys of a type no limiter
//! may write are untouched; and `INFO rl` counted every call.
//!
//! The seed is fixed (override with RL_STORM_SEED=<n> to explore); a failure names it
//! and the command. RL_STORM_COMMANDS=<n> changes the storm's size (tools/memcheck.sh
//! runs 5,000 under valgrind); RL_STORM_BATCH=1 sends one command at a time.
mod common;
use common::workload::Algo;
use common::*;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use redis::ConnectionLike;

/// Commands in the storm (RL_STORM_COMMANDS overrides it, e.g. smaller under valgrind).
const TOTAL: usize = 30_000;
const BATCH: usize = 1_000;
/// Share of the commands that are valid calls on the tracked keys.
const VALID_SHARE: f64 = 0.30;
/// Share that are certainly-invalid variants of those calls (they must all fail and
/// change nothing).
const INVALID_TRACKED_SHARE: f64 = 0.08;

const COMMANDS: [&str; 5] = [
    "RL.SLIDELOG",
    "RL.SLIDECOUNT",
    "RL.FIXED",
    "RL.GCRA",
    "RL.PSEUDONYM",
];

// ---------------------------------------------------------------------------------
// The tracked limiters and their model

struct Tracked {
    algo: Algo,
    key: String,
    limit: u64,
    window_us: u64,
    /// Equivalent spellings of the window (`60`, `60s`, `60S`, `60000ms`, …).
    spellings: Vec<String>,
    burst: Option<u64>,
    /// SLIDELOG: the entries in the sorted set, (score, units), oldest first.
    log: VecDeque<(u64, u64)>,
    /// FIXED / SLIDECOUNT: derived key → units admitted into it.
    counters: BTreeMap<String, u64>,
    /// GCRA: (now, cost) of every admitted request.
    admitted: Vec<(u64, u64)>,
}

impl Tracked {
    fn new(algo: Algo, n: usize, limit: u64, window: &str, burst: Option<u64>) -> Tracked {
        let (window_us, spellings) = if let Some(ms) = window.strip_suffix("ms") {
            let ms: u64 = ms.parse().unwrap();
            (ms * 1000, vec![format!("{ms}ms"), format!("{ms}MS")])
        } else {
            let s: u64 = window.parse().unwrap();
            (
                s * 1_000_000,
                vec![
                    format!("{s}"),
                    format!("{s}s"),
                    format!("{s}S"),
                    format!("{}ms", s * 1000),
                    format!("{}Ms", s * 1000),
                ],
            )
        };
        Tracked {
            algo,
            key: format!("trk:{}:{n}", algo.tag()),
            limit,
            window_us,
            spellings,
            burst,
            log: VecDeque::new(),
            counters: BTreeMap::new(),
            admitted: Vec::new(),
        }
    }

    fn counter(&self, n: u64) -> String {
        format!("{}:{n}", self.key)
    }

    /// The FIXED counter at `now`: named by the window start, in seconds for
    /// whole-second windows, else in milliseconds.
    fn fixed_counter(&self, now: u64) -> String {
        let start = now - now % self.window_us;
        if self.window_us.is_multiple_of(1_000_000) {
            self.counter(start / 1_000_000)
        } else {
            self.counter(start / 1000)
        }
    }

    /// The decision the module must take, as (allowed, remaining), updating the model
    /// when the call spends. GCRA is not modelled here (see `gcra_bound`).
    fn decide(&mut self, now: u64, cost: u64, peek: bool) -> Option<(i64, i64)> {
        let limit = self.limit;
        let answer = |used: u64, allowed: bool| {
            let after = if allowed { used + cost } else { used };
            (i64::from(allowed), limit.saturating_sub(after) as i64)
        };
        match self.algo {
            Algo::Log => {
                let cutoff = now.saturating_sub(self.window_us);
                if !peek {
                    while self.log.front().is_some_and(|&(t, _)| t <= cutoff) {
                        self.log.pop_front();
                    }
                }
                let used: u64 = self
                    .log
                    .iter()
                    .filter(|&&(t, _)| t > cutoff)
                    .map(|&(_, n)| n)
                    .sum();
                let allowed = used + cost <= limit;
                if allowed && !peek {
                    self.log.push_back((now, cost));
                }
                Some(answer(used, allowed))
            }
            Algo::Fixed => {
                let name = self.fixed_counter(now);
                let used = self.counters.get(&name).copied().unwrap_or(0);
                let allowed = used + cost <= limit;
                if allowed && !peek {
                    *self.counters.entry(name).or_default() += cost;
                }
                Some(answer(used, allowed))
            }
            Algo::Count => {
                let w = self.window_us;
                let i = now / w;
                let cur_name = self.counter(i);
                let cur = self.counters.get(&cur_name).copied().unwrap_or(0);
                let prev = self
                    .counters
                    .get(&self.counter(i - 1))
                    .copied()
                    .unwrap_or(0);
                let elapsed = now % w;
                let estimated = cur
                    + u64::try_from(u128::from(prev) * u128::from(w - elapsed) / u128::from(w))
                        .unwrap();
                let allowed = estimated + cost <= limit;
                if allowed && !peek {
                    *self.counters.entry(cur_name).or_default() += cost;
                }
                Some(answer(estimated, allowed))
            }
            Algo::Gcra => None,
        }
    }

    /// Over any interval [a, b] between two admitted requests, the units admitted are
    /// at most BURST + limit × (b − a) / window (2 µs of rounding for fractional
    /// emission intervals), as README.md promises.
    fn gcra_bound(&self) -> Result<(), String> {
        let (w, l) = (u128::from(self.window_us), u128::from(self.limit));
        let burst = u128::from(self.burst.unwrap_or(self.limit));
        let slack = if w % l == 0 { 0 } else { 2 };
        for i in 0..self.admitted.len() {
            let mut units = 0u128;
            for a in &self.admitted[i..] {
                units += u128::from(a.1);
                let span = u128::from(a.0 - self.admitted[i].0);
                if units * w > burst * w + (span + slack) * l {
                    return Err(format!(
                        "{}: {units} units admitted within {span} µs from {}",
                        self.key, self.admitted[i].0
                    ));
                }
            }
        }
        Ok(())
    }
}

fn tracked_set() -> Vec<Tracked> {
    // Windows of at least 30 s: the keys' real TTLs (window or 2 × window on the server
    // clock) outlast the test, while NOW sweeps through many windows.
    let mut v = Vec::new();
    for (n, (limit, window)) in [(5, "30"), (12, "45"), (30, "60"), (3, "31500ms")]
        .into_iter()
        .enumerate()
    {
        v.push(Tracked::new(Algo::Log, n, limit, window, None));
    }
    for (n, (limit, window)) in [(10, "30"), (25, "45"), (50, "60"), (7, "31500ms")]
        .into_iter()
        .enumerate()
    {
        v.push(Tracked::new(Algo::Count, n, limit, window, None));
        v.push(Tracked::new(Algo::Fixed, n, limit, window, None));
    }
    for (n, (limit, window, burst)) in [
        (10, "30", Some(3)),
        (20, "45", Some(1)),
        (50, "60", None),
        (7, "31500ms", Some(5)),
    ]
    .into_iter()
    .enumerate()
    {
        v.push(Tracked::new(Algo::Gcra, n, limit, window, burst));
    }
    v
}

// ---------------------------------------------------------------------------------
// Random words

fn random_case(rng: &mut StdRng, word: &str) -> Vec<u8> {
    word.bytes()
        .map(|b| {
            if rng.gen_bool(0.5) {
                b.to_ascii_lowercase()
            } else {
                b.to_ascii_uppercase()
            }
        })
        .collect()
}

fn random_bytes(rng: &mut StdRng, max_len: usize) -> Vec<u8> {
    let len = rng.gen_range(0..=max_len);
    (0..len).map(|_| rng.gen()).collect()
}

fn number(rng: &mut StdRng) -> Vec<u8> {
    let fixed: &[&str] = &[
        "0",
        "-1",
        "1",
        "2",
        "1000",
        "1001",
        "1000000",
        "1000001",
        "1000000000000000",
        "1000000000000001",
        "18446744073709551615",
        "18446744073709551616",
        "9223372036854775807",
        "-9223372036854775808",
        "99999999999999999999999999999999",
        "1.5",
        " 1",
        "1 ",
        "+1",
        "",
        "0x10",
        "1e3",
        "007",
        "-0",
        "nan",
        "inf",
    ];
    match rng.gen_range(0..10) {
        0..=4 => fixed.choose(rng).unwrap().as_bytes().to_vec(),
        5 => rng.gen::<u64>().to_string().into_bytes(),
        6 | 7 => rng.gen_range(1..100u64).to_string().into_bytes(),
        8 => rng.gen_range(1..=2_000u64).to_string().into_bytes(),
        _ => random_bytes(rng, 6),
    }
}

fn window(rng: &mut StdRng) -> Vec<u8> {
    let fixed: &[&str] = &[
        "1",
        "10s",
        "60",
        "60S",
        "1500ms",
        "1ms",
        "0",
        "0s",
        "0ms",
        "10m",
        "1h",
        "315360000s",
        "315360001s",
        "315360000000ms",
        "315360000001ms",
        "5MS",
        "s",
        "ms",
        "-1s",
        "1.5s",
        "18446744073709551615ms",
        "18446744073709551615s",
        "10 s",
        "",
    ];
    match rng.gen_range(0..6) {
        0..=3 => fixed.choose(rng).unwrap().as_bytes().to_vec(),
        4 => {
            let unit = ["", "s", "S", "ms", "mS", "us", "m"].choose(rng).unwrap();
            format!("{}{unit}", rng.gen_range(1..100_000u64)).into_bytes()
        }
        _ => number(rng),
    }
}

fn now_value(rng: &mut StdRng, now: u64) -> Vec<u8> {
    let v = match rng.gen_range(0..14) {
        0..=4 => now.to_string(),
        5 => (now / 1000).to_string(),
        6 => (now / 1_000_000).to_string(),
        7 => ((1u64 << 53) - 1).to_string(),
        8 => (1u64 << 53).to_string(),
        9 => "94694400000000".into(),
        10 => "94694399999999".into(),
        11 => T0.to_string(),
        12 => rng.gen::<u64>().to_string(),
        _ => return number(rng),
    };
    v.into_bytes()
}

/// Keys the junk traffic uses (never a tracked key). Typed keys are created in
/// `populate`; `j:*` keys collect whatever valid junk calls write.
fn junk_key(rng: &mut StdRng) -> Vec<u8> {
    match rng.gen_range(0..20) {
        0..=6 => [
            "ty:str",
            "ty:list",
            "ty:hash",
            "ty:set",
            "ty:zset",
            "ty:stream",
            "ty:abc",
            "ty:neg",
            "ty:float",
            "ty:zero7",
            "ty:tat",
            "ty:tatmax",
            "j:bad",
            "j:ovf",
        ]
        .choose(rng)
        .unwrap()
        .as_bytes()
        .to_vec(),
        7..=12 => format!("j:lim:{}", rng.gen_range(0..6)).into_bytes(),
        13 => Vec::new(),
        14 => b"j:\0\r\n\xff\xfe".to_vec(),
        15 => {
            let mut k = b"j:bin:".to_vec();
            k.extend(random_bytes(rng, 12));
            k
        }
        16 => {
            // Long keys (counter names derived from them too).
            let len = if rng.gen_bool(0.1) { 70_000 } else { 600 };
            let mut k = b"j:long:".to_vec();
            k.resize(len, b'x');
            k
        }
        17 => b"j:{tag}:x".to_vec(),
        18 => b"j:lim:0:29408000".to_vec(),
        _ => random_bytes(rng, 10),
    }
}

fn option_word(rng: &mut StdRng) -> Vec<u8> {
    let word = [
        "COST", "NOW", "PEEK", "BURST", "COST", "NOW", "PEEK", "PREFIX6", "FOO", "", "COSTS",
    ]
    .choose(rng)
    .unwrap();
    random_case(rng, word)
}

fn any_token(rng: &mut StdRng, now: u64) -> Vec<u8> {
    match rng.gen_range(0..6) {
        0 => number(rng),
        1 => window(rng),
        2 => now_value(rng, now),
        3 => option_word(rng),
        4 => junk_key(rng),
        _ => random_bytes(rng, 8),
    }
}

fn identity(rng: &mut StdRng) -> Vec<u8> {
    let fixed: &[&str] = &[
        "192.0.2.1",
        "::ffff:192.0.2.1",
        "2001:db8::1",
        "2001:DB8:0:0::1",
        "2001:db8:1:2:aaaa::1",
        "::",
        "::1",
        "0.0.0.0",
        "255.255.255.255",
        "256.1.1.1",
        "1.2.3",
        "1.2.3.4/24",
        "fe80::1%eth0",
        "[::1]",
        "api-key-123",
        "user:42",
        "",
    ];
    match rng.gen_range(0..4) {
        0 | 1 => fixed.choose(rng).unwrap().as_bytes().to_vec(),
        2 => random_bytes(rng, 40),
        _ => {
            let mut id = vec![b'a'; rng.gen_range(0..20_000)];
            id.extend(random_bytes(rng, 4));
            id
        }
    }
}

/// A random, mostly malformed RL.* command on the junk keys.
fn junk(rng: &mut StdRng, now: u64) -> Vec<Vec<u8>> {
    let mut args: Vec<Vec<u8>> = Vec::new();
    let which = rng.gen_range(0..COMMANDS.len() + 1);
    if which == COMMANDS.len() {
        // Names that are not commands at all.
        let bogus = ["RL.NOPE", "RL.", "RL.SLIDELOGX", "RL.FIXED2"];
        let name = *bogus.choose(rng).unwrap();
        args.push(random_case(rng, name));
    } else {
        args.push(random_case(rng, COMMANDS[which]));
    }
    if which == 4 {
        args.push(identity(rng));
        if rng.gen_bool(0.5) {
            let scope = *["trending", "NOW", "PREFIX6", "s"].choose(rng).unwrap();
            args.push(random_case(rng, scope));
        }
        for _ in 0..rng.gen_range(0..3) {
            match rng.gen_range(0..3) {
                0 => {
                    args.push(random_case(rng, "PREFIX6"));
                    args.push(
                        ["0", "1", "48", "64", "128", "129", "-1", "abc", "256"]
                            .choose(rng)
                            .unwrap()
                            .as_bytes()
                            .to_vec(),
                    );
                }
                1 => {
                    args.push(random_case(rng, "NOW"));
                    args.push(now_value(rng, now));
                }
                _ => args.push(any_token(rng, now)),
            }
        }
    } else {
        args.push(junk_key(rng));
        args.push(number(rng));
        args.push(window(rng));
        for _ in 0..rng.gen_range(0..5) {
            let word = option_word(rng);
            let upper = word.to_ascii_uppercase();
            args.push(word);
            match upper.as_slice() {
                b"NOW" => args.push(now_value(rng, now)),
                b"COST" | b"BURST" | b"PREFIX6" => args.push(number(rng)),
                _ => {}
            }
        }
    }
    // Mutations: mostly one or more, sometimes none (valid junk does real work).
    let mutations = match rng.gen_range(0..10) {
        0..=2 => 0,
        3..=6 => 1,
        7 | 8 => 2,
        _ => rng.gen_range(3..12),
    };
    for _ in 0..mutations {
        let len = args.len();
        match rng.gen_range(0..6) {
            0 if len > 1 => {
                args.remove(rng.gen_range(1..len));
            }
            1 => {
                let t = any_token(rng, now);
                args.insert(rng.gen_range(1..=len), t);
            }
            2 if len > 1 => {
                let t = any_token(rng, now);
                args[rng.gen_range(1..len)] = t;
            }
            3 if len > 1 => {
                let t = args[rng.gen_range(1..len)].clone();
                args.insert(rng.gen_range(1..=len), t);
            }
            4 => args.truncate(rng.gen_range(1..=len)),
            _ => {
                if len > 2 {
                    let (a, b) = (rng.gen_range(2..len), rng.gen_range(2..len));
                    args.swap(a, b);
                }
            }
        }
    }
    if which == COMMANDS.len() {
        // Redis's own "unknown command" error quotes the arguments raw, and redis-rs
        // cannot parse an error line that is not UTF-8: keep those arguments ASCII.
        for a in &mut args {
            for b in a.iter_mut().filter(|b| !b.is_ascii()) {
                *b = b'?';
            }
        }
    }
    args
}

// ---------------------------------------------------------------------------------
// Tracked calls

/// A valid call on a tracked key; returns its arguments, cost and whether it peeks.
fn valid_call(rng: &mut StdRng, t: &Tracked, now: u64) -> (Vec<Vec<u8>>, u64, bool) {
    let max_cost = t.burst.unwrap_or(t.limit).min(3);
    let cost = if rng.gen_bool(0.03) {
        // Never admissible: retry_after_ms = -1.
        t.burst.unwrap_or(t.limit) + 1
    } else {
        rng.gen_range(1..=max_cost)
    };
    let peek = rng.gen_bool(0.1);
    let mut options: Vec<Vec<Vec<u8>>> =
        vec![vec![random_case(rng, "NOW"), now.to_string().into_bytes()]];
    if cost != 1 || rng.gen_bool(0.5) {
        options.push(vec![
            random_case(rng, "COST"),
            cost.to_string().into_bytes(),
        ]);
    }
    if peek {
        options.push(vec![random_case(rng, "PEEK")]);
    }
    if let Some(b) = t.burst {
        options.push(vec![random_case(rng, "BURST"), b.to_string().into_bytes()]);
    }
    options.shuffle(rng);
    let mut args = vec![
        random_case(rng, t.algo.command()),
        t.key.clone().into_bytes(),
        t.limit.to_string().into_bytes(),
        t.spellings.choose(rng).unwrap().clone().into_bytes(),
    ];
    args.extend(options.into_iter().flatten());
    (args, cost, peek)
}

/// A call on a tracked key that must fail: a valid call with one fatal change.
fn invalid_call(rng: &mut StdRng, t: &Tracked, now: u64) -> Vec<Vec<u8>> {
    let (mut args, _, _) = valid_call(rng, t, now);
    let b = |s: &str| s.as_bytes().to_vec();
    let bad_limits = [
        "0",
        "-5",
        "1.5",
        "",
        "abc",
        "1000000000000001",
        "18446744073709551616",
    ];
    let bad_windows = ["0", "0ms", "10m", "315360001s", "-1", "1e3", "1.5s", ""];
    match rng.gen_range(0..14) {
        0 => args[2] = b(bad_limits.choose(rng).unwrap()),
        1 => args[3] = b(bad_windows.choose(rng).unwrap()),
        2 => args.extend([b("COST"), b("0")]),
        3 => args.extend([
            random_case(rng, "NOW"),
            (now / 1000).to_string().into_bytes(),
        ]),
        4 => args.extend([
            b("NOW"),
            b(["-1", "9007199254740992", "abc"].choose(rng).unwrap()),
        ]),
        5 => args.push(b("FOO")),
        6 => args.extend([b("PEEK"), b("peek")]),
        7 => args.push(b(["COST", "NOW", "BURST"].choose(rng).unwrap())),
        8 => args.truncate(rng.gen_range(2..=3)),
        9 if t.algo == Algo::Log => args[2] = b("1000001"),
        10 if t.algo == Algo::Log => args.extend([b("COST"), b("1000001")]),
        11 if t.algo == Algo::Gcra => args.extend([b("BURST"), b("0")]),
        11 => args.extend([b("BURST"), b("2")]),
        12 => {
            // A repeated option (NOW is always present once).
            let t = now.to_string().into_bytes();
            args.extend([b("now"), t]);
        }
        _ => args.extend([b("COST"), b("1000000000000001")]),
    }
    args
}

/// A command that must get WRONGTYPE: a limiter of another type on a tracked key that
/// is known to exist.
fn wrongtype_call(rng: &mut StdRng, tracked: &[Tracked], now: u64) -> Option<Vec<Vec<u8>>> {
    let n = now.to_string();
    let mut order: Vec<&Tracked> = tracked.iter().collect();
    order.shuffle(rng);
    for t in order {
        if t.algo == Algo::Fixed {
            if let Some(name) = t.counters.keys().next() {
                return Some(
                    ["RL.SLIDELOG", name, "10", "60", "NOW", &n]
                        .iter()
                        .map(|s| s.as_bytes().to_vec())
                        .collect(),
                );
            }
        }
        if t.algo == Algo::Log && !t.log.is_empty() {
            return Some(
                ["RL.GCRA", &t.key, "10", "60", "NOW", &n]
                    .iter()
                    .map(|s| s.as_bytes().to_vec())
                    .collect(),
            );
        }
    }
    None
}

// ---------------------------------------------------------------------------------
// The storm

enum Expect {
    /// Any well-formed answer; `command` is the limiter it names, if any.
    Junk { command: Option<usize> },
    /// A valid tracked call: the model's decision (None for GCRA).
    Valid {
        tracked: usize,
        now: u64,
        cost: u64,
        peek: bool,
        decision: Option<(i64, i64)>,
    },
    /// Must be an error (a code among `codes`).
    Error { codes: &'static [&'static str] },
}

fn show(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 40 {
                format!(
                    "{:?}…({} bytes)",
                    s.chars().take(30).collect::<String>(),
                    a.len()
                )
            } else {
                format!("{s:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn command_index(name: &[u8]) -> Option<usize> {
    COMMANDS
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

fn populate(c: &mut Connection) {
    let mut p = redis::pipe();
    p.cmd("SET").arg("ty:str").arg("hello").ignore();
    p.cmd("RPUSH").arg("ty:list").arg("a").arg("b").ignore();
    p.cmd("HSET").arg("ty:hash").arg("f").arg("1").ignore();
    p.cmd("SADD").arg("ty:set").arg("m").ignore();
    p.cmd("ZADD")
        .arg("ty:zset")
        .arg(1)
        .arg("one")
        .arg("+inf")
        .arg("forever")
        .arg("-inf")
        .arg("ancient")
        .ignore();
    p.cmd("XADD")
        .arg("ty:stream")
        .arg("*")
        .arg("f")
        .arg("v")
        .ignore();
    p.cmd("SET").arg("ty:abc").arg("abc").ignore();
    p.cmd("SET").arg("ty:neg").arg("-3").ignore();
    p.cmd("SET").arg("ty:float").arg("1.5").ignore();
    p.cmd("SET").arg("ty:zero7").arg("007").ignore();
    p.cmd("SET")
        .arg("ty:tat")
        .arg("9223372036854775807")
        .ignore();
    p.cmd("SET")
        .arg("ty:tatmax")
        .arg("9007199254740991")
        .ignore();
    // Derived keys at T0 for window 60: FIXED j:bad:1764480000 is a list, SLIDECOUNT
    // j:bad:29408000 holds garbage; j:ovf's counters sit at the INCRBY limit.
    p.cmd("RPUSH").arg("j:bad:1764480000").arg("x").ignore();
    p.cmd("SET").arg("j:bad:29408000").arg("abc").ignore();
    p.cmd("SET").arg("j:bad:29407999").arg("-1").ignore();
    p.cmd("SET")
        .arg("j:ovf:1764480000")
        .arg("9223372036854775807")
        .ignore();
    p.cmd("SET")
        .arg("j:ovf:29407999")
        .arg("9223372036854775807")
        .ignore();
    p.query::<()>(c).expect("populate");
}

/// Keys that no limiter command may ever change (wrong type, or a string that is not
/// a counter), with their DUMP and expiry.
fn untouchable(c: &mut Connection) -> Vec<(Vec<u8>, Option<Vec<u8>>, i64)> {
    let keys = [
        "ty:str",
        "ty:list",
        "ty:hash",
        "ty:set",
        "ty:stream",
        "ty:abc",
        "ty:neg",
        "ty:float",
        "ty:zero7",
        "j:bad:1764480000",
        "j:bad:29408000",
        "j:bad:29407999",
    ];
    keys.iter()
        .map(|k| {
            let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(*k).query(c).unwrap();
            let at: i64 = redis::cmd("PEXPIRETIME").arg(*k).query(c).unwrap();
            (k.as_bytes().to_vec(), dump, at)
        })
        .collect()
}

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    calls: u64,
    allowed: u64,
    denied: u64,
    errors: u64,
}

fn info_counts(c: &mut Connection) -> Vec<Counts> {
    let info: String = redis::cmd("INFO").arg("rl").query(c).unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("rl_{name}:")))
            .unwrap_or_else(|| panic!("no rl_{name} in INFO rl:\n{info}"))
            .trim()
            .parse()
            .unwrap()
    };
    COMMANDS
        .iter()
        .map(|cmd| {
            let n = cmd.trim_start_matches("RL.").to_ascii_lowercase();
            Counts {
                calls: field(&format!("{n}_calls")),
                allowed: field(&format!("{n}_allowed")),
                denied: field(&format!("{n}_denied")),
                errors: field(&format!("{n}_errors")),
            }
        })
        .collect()
}

/// Checks one reply against what was expected of it; returns a complaint.
#[allow(clippy::too_many_arguments)]
fn check_reply(
    args: &[Vec<u8>],
    expect: &Expect,
    reply: &Value,
    tracked: &mut [Tracked],
    counts: &mut [Counts],
    errors_seen: &mut BTreeMap<String, u64>,
) -> Result<(), String> {
    let fail = |what: String| Err(format!("{}: {what}: {reply:?}", show(args)));
    let command = match expect {
        Expect::Junk { command } => *command,
        Expect::Valid { tracked: i, .. } => command_index(tracked[*i].algo.command().as_bytes()),
        Expect::Error { .. } => command_index(&args[0]),
    };
    // Redis itself refuses a wrong number of arguments (the commands declare their
    // arity), before the module sees the call.
    let refused_by_redis = matches!(reply, Value::ServerError(e)
        if e.details().is_some_and(|d| d.starts_with("wrong number of arguments")));
    if let Some(i) = command.filter(|_| !refused_by_redis) {
        counts[i].calls += 1;
    }
    match reply {
        Value::ServerError(e) => {
            if let Some(i) = command.filter(|_| !refused_by_redis) {
                counts[i].errors += 1;
            }
            let code = e.code();
            if !["ERR", "WRONGTYPE", "NOPERM", "OOM"].contains(&code) {
                return fail(format!("error code {code:?}"));
            }
            let detail = e.details().unwrap_or("");
            if detail.contains(['\r', '\n']) {
                return fail("error text spans lines".into());
            }
            // Group by the text before any quoted argument, to report what was seen.
            let kind: String = format!("{code} {detail}")
                .split(['\'', ';', ':'])
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect();
            *errors_seen.entry(kind).or_default() += 1;
            match expect {
                Expect::Valid { .. } => fail("a valid call failed".into()),
                Expect::Error { codes } if !codes.contains(&code) => {
                    fail(format!("expected one of {codes:?}"))
                }
                _ => Ok(()),
            }
        }
        Value::Array(items) => {
            let ints: Vec<i64> = items
                .iter()
                .filter_map(|v| match v {
                    Value::Int(n) => Some(*n),
                    _ => None,
                })
                .collect();
            if ints.len() != 4 || items.len() != 4 {
                return fail("not four integers".into());
            }
            let Some(i) = command.filter(|&i| i < 4) else {
                return fail("a limiter reply from a non-limiter command".into());
            };
            let (allowed, remaining, retry, reset) = (ints[0], ints[1], ints[2], ints[3]);
            if !(allowed == 0 || allowed == 1) || remaining < 0 || reset < 0 || retry < -1 {
                return fail("fields out of range".into());
            }
            if allowed == 1 && retry != 0 {
                return fail("retry_after_ms is not 0 for an admitted call".into());
            }
            if allowed == 1 {
                counts[i].allowed += 1;
            } else {
                counts[i].denied += 1;
            }
            match expect {
                Expect::Error { .. } => fail("expected an error".into()),
                Expect::Valid {
                    tracked: t,
                    now,
                    cost,
                    peek,
                    decision,
                } => {
                    let t = &mut tracked[*t];
                    if let Some((a, r)) = decision {
                        if (allowed, remaining) != (*a, *r) {
                            return fail(format!("model says allowed {a}, remaining {r}"));
                        }
                    }
                    let never = *cost > t.burst.unwrap_or(t.limit);
                    if never && (allowed, retry) != (0, -1) {
                        return fail("a cost above the budget must get retry -1".into());
                    }
                    if t.algo == Algo::Gcra && allowed == 1 && !peek {
                        t.admitted.push((*now, *cost));
                    }
                    Ok(())
                }
                Expect::Junk { .. } => Ok(()),
            }
        }
        Value::BulkString(b) => {
            if command != Some(4) {
                return fail("a bulk string from a limiter".into());
            }
            let text = String::from_utf8_lossy(b);
            let hex = text.get(..24).unwrap_or("");
            let shape_ok = hex.len() == 24
                && hex
                    .bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
                && (b.len() == 24 || b.get(24) == Some(&b':'));
            if !shape_ok {
                return fail("not a pseudonym".into());
            }
            Ok(())
        }
        _ => fail("unexpected reply type".into()),
    }
}

/// The invariants on every tracked key, at NOW `now`.
fn check_tracked(c: &mut Connection, tracked: &[Tracked], now: u64) -> Result<(), String> {
    for t in tracked {
        match t.algo {
            Algo::Log => {
                let cutoff = now.saturating_sub(t.window_us);
                let in_window: u64 = redis::cmd("ZCOUNT")
                    .arg(&t.key)
                    .arg(format!("({cutoff}"))
                    .arg("+inf")
                    .query(c)
                    .unwrap();
                if in_window > t.limit {
                    return Err(format!(
                        "{}: {in_window} members in the window, limit {}",
                        t.key, t.limit
                    ));
                }
                let model: u64 = t.log.iter().filter(|e| e.0 > cutoff).map(|e| e.1).sum();
                if in_window != model {
                    return Err(format!(
                        "{}: {in_window} in the window, model {model}",
                        t.key
                    ));
                }
                // The whole log: the limit holds at every member's instant, and every
                // member reads `<score>:<8 hex>`.
                let members: Vec<(String, u64)> = redis::cmd("ZRANGE")
                    .arg(&t.key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(c)
                    .unwrap();
                let distinct: BTreeSet<&String> = members.iter().map(|m| &m.0).collect();
                if distinct.len() != members.len() {
                    return Err(format!("{}: duplicate members", t.key));
                }
                for (m, score) in &members {
                    let ok = m.split_once(':').is_some_and(|(ts, hex)| {
                        ts == score.to_string()
                            && hex.len() == 8
                            && hex
                                .bytes()
                                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                    });
                    if !ok {
                        return Err(format!("{}: member {m:?} at {score}", t.key));
                    }
                    let at = *score;
                    let count = members
                        .iter()
                        .filter(|(_, s)| *s <= at && *s > at.saturating_sub(t.window_us))
                        .count() as u64;
                    if count > t.limit {
                        return Err(format!(
                            "{}: {count} members in the window ending at {at}",
                            t.key
                        ));
                    }
                }
                if !members.is_empty() {
                    pttl_positive(c, t.key.as_bytes())?;
                }
            }
            Algo::Fixed | Algo::Count => {
                for (name, admitted) in &t.counters {
                    let value: Option<u64> = redis::cmd("GET").arg(name).query(c).unwrap();
                    if value != Some(*admitted) {
                        return Err(format!("{name}: holds {value:?}, admitted {admitted}"));
                    }
                    if *admitted > t.limit {
                        return Err(format!("{name}: {admitted} above limit {}", t.limit));
                    }
                    pttl_positive(c, name.as_bytes())?;
                }
            }
            Algo::Gcra => {
                let value: Option<String> = redis::cmd("GET").arg(&t.key).query(c).unwrap();
                if let Some(v) = value {
                    if v.parse::<u64>().is_err() {
                        return Err(format!("{}: holds {v:?}", t.key));
                    }
                    pttl_positive(c, t.key.as_bytes())?;
                }
                t.gcra_bound()?;
            }
        }
    }
    Ok(())
}

fn pttl_positive(c: &mut Connection, key: &[u8]) -> Result<(), String> {
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(c).unwrap();
    // -2: gone already (a short window expired); -1 would be a limiter key kept forever.
    if pttl == -1 {
        return Err(format!("{}: PTTL {pttl}", String::from_utf8_lossy(key)));
    }
    Ok(())
}

#[test]
fn storm_of_random_commands() {
    let seed: u64 = std::env::var("RL_STORM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2024);
    let total: usize = std::env::var("RL_STORM_COMMANDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(TOTAL);
    // RL_STORM_BATCH=1 sends one command at a time, to pin a failure to its command.
    let batch: usize = std::env::var("RL_STORM_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(BATCH);
    let started = Instant::now();
    let s = Server::start_with_env(&[], &[("RL_SECRET", "storm secret")]);
    let mut c = s.conn();
    populate(&mut c);
    let before = untouchable(&mut c);
    let pre_created: BTreeSet<Vec<u8>> = {
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
        keys.into_iter().collect()
    };

    let mut rng = StdRng::seed_from_u64(seed);
    let mut tracked = tracked_set();
    let mut counts = vec![Counts::default(); COMMANDS.len()];
    let mut errors_seen: BTreeMap<String, u64> = BTreeMap::new();
    let (mut valid_allowed, mut valid_denied, mut junk_answered) = (0u64, 0u64, 0u64);
    let mut now = T0 + rng.gen_range(0..1_000_000);
    let mut sent = 0;
    while sent < total {
        let batch_started = Instant::now();
        let mut commands: Vec<Vec<Vec<u8>>> = Vec::with_capacity(batch);
        let mut expects = Vec::with_capacity(batch);
        for _ in 0..batch {
            // NOW moves forward by up to 40 ms a command (sometimes not at all, so
            // that requests share a microsecond).
            if !rng.gen_bool(0.05) {
                now += rng.gen_range(1..40_000);
            }
            let roll: f64 = rng.gen();
            if roll < VALID_SHARE {
                let i = rng.gen_range(0..tracked.len());
                let (args, cost, peek) = valid_call(&mut rng, &tracked[i], now);
                let decision = tracked[i].decide(now, cost, peek);
                commands.push(args);
                expects.push(Expect::Valid {
                    tracked: i,
                    now,
                    cost,
                    peek,
                    decision,
                });
            } else if roll < VALID_SHARE + INVALID_TRACKED_SHARE {
                if rng.gen_bool(0.15) {
                    if let Some(args) = wrongtype_call(&mut rng, &tracked, now) {
                        commands.push(args);
                        expects.push(Expect::Error {
                            codes: &["WRONGTYPE"],
                        });
                        continue;
                    }
                }
                let i = rng.gen_range(0..tracked.len());
                commands.push(invalid_call(&mut rng, &tracked[i], now));
                expects.push(Expect::Error { codes: &["ERR"] });
            } else {
                let args = junk(&mut rng, now);
                let command = command_index(&args[0]);
                commands.push(args);
                expects.push(Expect::Junk { command });
            }
        }
        let mut pipe = redis::pipe();
        for args in &commands {
            let mut cmd = redis::Cmd::new();
            for a in args {
                cmd.arg(a.as_slice());
            }
            pipe.add_command(cmd);
        }
        let replies = c
            .req_packed_commands(&pipe.get_packed_pipeline(), 0, commands.len())
            .unwrap_or_else(|e| {
                let last = commands.last().map(|a| show(a)).unwrap_or_default();
                panic!(
                    "seed {seed}: batch at command {sent} (last: {last}): the connection \
                     failed: {e}\n{}",
                    s.log()
                )
            });
        assert_eq!(replies.len(), commands.len(), "seed {seed}");
        for ((args, expect), reply) in commands.iter().zip(&expects).zip(&replies) {
            if let Err(e) = check_reply(
                args,
                expect,
                reply,
                &mut tracked,
                &mut counts,
                &mut errors_seen,
            ) {
                panic!("seed {seed}: {e}");
            }
            match (expect, reply) {
                (Expect::Valid { .. }, Value::Array(v)) if v[0] == Value::Int(1) => {
                    valid_allowed += 1
                }
                (Expect::Valid { .. }, _) => valid_denied += 1,
                (Expect::Junk { .. }, Value::Array(_) | Value::BulkString(_)) => junk_answered += 1,
                _ => {}
            }
        }
        sent += commands.len();
        let pong: String = redis::cmd("PING").query(&mut c).expect("PING");
        assert_eq!(pong, "PONG");
        if let Err(e) = check_tracked(&mut c, &tracked, now) {
            panic!("seed {seed}: after command {sent}: {e}");
        }
        // Keep NOW ahead of the server clock's progress, so that a key expiring on
        // the server clock (GCRA's TTL is its TAT - now) is also expired for NOW: a
        // fixed 5 s step (so that a seed replays the same storm) unless the batch
        // took longer than that.
        let elapsed = u64::try_from(batch_started.elapsed().as_micros()).unwrap();
        now += elapsed.max(5_000_000);
    }

    // Alive, from a fresh connection too.
    let mut fresh = s.conn();
    let pong: String = redis::cmd("PING").query(&mut fresh).expect("PING");
    assert_eq!(pong, "PONG");

    // Keys that no limiter may write are untouched.
    assert_eq!(untouchable(&mut c), before, "seed {seed}");

    // Every other key (limiter state the storm created) has a TTL.
    let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    let mut limiter_keys = 0;
    for k in keys.iter().filter(|k| !pre_created.contains(*k)) {
        limiter_keys += 1;
        if let Err(e) = pttl_positive(&mut c, k) {
            panic!("seed {seed}: {e}");
        }
    }
    // Tracked keys: no counter the model does not know of (a denied call wrote one?).
    for t in tracked
        .iter()
        .filter(|t| t.algo != Algo::Log && t.algo != Algo::Gcra)
    {
        let derived: BTreeSet<String> = keys
            .iter()
            .filter_map(|k| std::str::from_utf8(k).ok())
            .filter(|k| k.starts_with(&format!("{}:", t.key)))
            .map(String::from)
            .collect();
        let model: BTreeSet<String> = t.counters.keys().cloned().collect();
        assert_eq!(derived, model, "seed {seed}: counters of {}", t.key);
    }

    // INFO rl counted every call the module received, by outcome.
    assert_eq!(info_counts(&mut c), counts, "seed {seed}");

    // The storm really exercised both sides.
    // (Thresholds for 30,000 commands, scaled to the storm's size.)
    let scaled = |n: u64| n * total as u64 / TOTAL as u64;
    assert!(valid_allowed > scaled(2_000), "{valid_allowed}");
    assert!(valid_denied > scaled(1_000), "{valid_denied}");
    assert!(junk_answered > scaled(1_000), "{junk_answered}");
    assert!(limiter_keys as u64 > scaled(100), "{limiter_keys}");
    assert!(errors_seen.values().sum::<u64>() > scaled(10_000));
    eprintln!(
        "storm: seed {seed}, {sent} commands in {:.1?}; tracked calls admitted {valid_allowed}, \
         denied {valid_denied}; junk answered {junk_answered}; {limiter_keys} limiter keys; \
         errors by kind:",
        started.elapsed()
    );
    for (kind, n) in &errors_seen {
        eprintln!("  {n:6}  {kind}");
    }
    // No call panicked (a caught panic is an error reply, so only its message on
    // stderr tells; panic_guard.rs proves this check sees one).
    let panics = s.panics();
    assert!(
        panics.is_empty(),
        "seed {seed}: panics:\n{}",
        panics.join("\n")
    );
}
