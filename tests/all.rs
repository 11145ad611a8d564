//! RL.ALL: several limits, all or nothing.
//!
//! - A randomized differential test: RL.ALL on one set of keys against, on a mirror
//!   set, "PEEK every limit with its single command; if all admit, run each single
//!   command for real" (and, for PEEK/REFUND/RESET, each single command in that mode).
//!   Decisions, the aggregate (as the spec defines it) and the stored state must be
//!   identical at every step.
//! - The Lua scripts and RL.ALL share budgets on the same keys.
//! - Every malformed part of the syntax gets a clear error and writes nothing (an
//!   error in limit 2 does not let limit 1 write).
//! - Cluster routing (MOVED, CROSSSLOT), ACL key permissions (NOPERM, nothing
//!   written), replication (byte-identical replicas) and `COMMAND GETKEYS`.
mod common;
use common::cluster::{key_slot, Cluster};
use common::workload::{assert_same_data, server_time_ms};
use common::*;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{from_redis_value, ErrorKind, RedisResult};

const LOG_LUA: &str = include_str!("../lua/sliding_window_log.lua");
const COUNTER_LUA: &str = include_str!("../lua/sliding_window_counter.lua");
const FIXED_LUA: &str = include_str!("../lua/fixed_window.lua");

// ---------------------------------------------------------------------------------
// Replies

/// RL.ALL's reply: the aggregate and one reply per limit.
type AllReply = (Reply, Vec<Reply>);

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("not an integer: {other:?}"),
    }
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Int(n) => n.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

fn four(v: &Value) -> Reply {
    let a = items(v);
    assert_eq!(a.len(), 4, "{v:?}");
    (int(&a[0]), int(&a[1]), int(&a[2]), int(&a[3]))
}

fn all_reply(v: &Value) -> AllReply {
    let a = items(v);
    assert_eq!(a.len(), 5, "RL.ALL reply {v:?}");
    let total = (int(&a[0]), int(&a[1]), int(&a[2]), int(&a[3]));
    (total, items(&a[4]).iter().map(four).collect())
}

fn run_all(c: &mut Connection, line: &str) -> AllReply {
    let v = query_line(c, line).unwrap_or_else(|e| panic!("{line}: {e}"));
    all_reply(&v)
}

/// The aggregate the spec defines: allowed = all allowed; remaining = the smallest;
/// retry = 0 when allowed, else the largest retry among the denying limits (-1 if
/// any is -1); reset = the largest.
fn aggregate(per: &[Reply]) -> Reply {
    let allowed = per.iter().all(|r| r.0 == 1);
    let retry = if allowed {
        0
    } else {
        let denying: Vec<i64> = per.iter().filter(|r| r.0 == 0).map(|r| r.2).collect();
        if denying.contains(&-1) {
            -1
        } else {
            denying.into_iter().max().unwrap()
        }
    };
    (
        i64::from(allowed),
        per.iter().map(|r| r.1).min().unwrap(),
        retry,
        per.iter().map(|r| r.3).max().unwrap(),
    )
}

// ---------------------------------------------------------------------------------
// The differential test

/// One step, run as a single script so that the server clock stands still for all of
/// it (Redis freezes key expiry at a script's start): RL.ALL on the `a` keys, the
/// mirror on the `b` keys, then the state of both sides. Without that, a key whose TTL
/// (on the server clock) ends between the two sides' calls would expire on one side
/// only. For the same reason the script finally gives each `b` key the exact expiry
/// instant of its `a` twin (they were set microseconds apart), after reporting both.
///
/// ARGV: a-prefix, b-prefix, then RL.ALL's words (count, words), the mode (SPEND,
/// PEEK, REFUND or RESET), the number of limits, and each limit's single command
/// (count, words, without the mode).
const STEP_LUA: &str = r#"
local aprefix, bprefix = ARGV[1], ARGV[2]
local pos = 3
local function take()
  local m = tonumber(ARGV[pos])
  local t = {}
  for j = 1, m do t[j] = ARGV[pos + j] end
  pos = pos + m + 1
  return t
end
local all = take()
local mode = ARGV[pos]
local n = tonumber(ARGV[pos + 1])
pos = pos + 2
local singles = {}
for j = 1, n do singles[j] = take() end
local function with(t, word)
  local c = {}
  for j = 1, #t do c[j] = t[j] end
  table.insert(c, word)
  return c
end

local all_reply = redis.call(unpack(all))
local mirror, real = {}, {}
if mode == 'SPEND' then
  local ok = true
  for j = 1, n do
    mirror[j] = redis.call(unpack(with(singles[j], 'PEEK')))
    if mirror[j][1] ~= 1 then ok = false end
  end
  if ok then
    for j = 1, n do real[j] = redis.call(unpack(singles[j])) end
  end
else
  for j = 1, n do mirror[j] = redis.call(unpack(with(singles[j], mode))) end
end

local dump, expiry = {}, {}
for _, prefix in ipairs({aprefix, bprefix}) do
  for _, k in ipairs(redis.call('KEYS', prefix .. '*')) do
    local t = redis.call('TYPE', k)['ok']
    local at = redis.call('PEXPIRETIME', k)
    local v = {}
    if t == 'string' then
      v = {redis.call('GET', k)}
    elseif t == 'zset' then
      v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
    end
    table.insert(dump, {k, t, v, at})
    expiry[k] = at
  end
end
for k, at in pairs(expiry) do
  if string.sub(k, 1, #aprefix) == aprefix and at > 0 then
    local b = bprefix .. string.sub(k, #aprefix + 1)
    if expiry[b] and expiry[b] > 0 then redis.call('PEXPIREAT', b, at) end
  end
end
return {all_reply, mirror, real, dump}
"#;

#[derive(Debug, Clone)]
struct LimitDef {
    algo: &'static str,
    /// The key without the side's prefix.
    name: String,
    limit: u64,
    window: &'static str,
    window_us: u64,
    burst: Option<u64>,
}

const ALGOS: [&str; 4] = ["SLIDELOG", "SLIDECOUNT", "FIXED", "GCRA"];
const WINDOWS: [(&str, u64); 7] = [
    ("1", 1_000_000),
    ("2", 2_000_000),
    ("3s", 3_000_000),
    ("1500ms", 1_500_000),
    ("2500ms", 2_500_000),
    ("5", 5_000_000),
    ("10", 10_000_000),
];
const LIMITS: [u64; 7] = [1, 2, 3, 4, 6, 10, 25];

fn random_pool(rng: &mut StdRng, size: usize) -> Vec<LimitDef> {
    (0..size)
        .map(|i| {
            let algo = ALGOS[rng.gen_range(0..ALGOS.len())];
            let (window, window_us) = WINDOWS[rng.gen_range(0..WINDOWS.len())];
            let limit = LIMITS[rng.gen_range(0..LIMITS.len())];
            let burst = (algo == "GCRA" && rng.gen_bool(0.5)).then(|| rng.gen_range(1..=limit + 2));
            LimitDef {
                algo,
                name: format!("L{i}"),
                limit,
                window,
                window_us,
                burst,
            }
        })
        .collect()
}

fn random_cost(rng: &mut StdRng, def: &LimitDef) -> u64 {
    let cap = def.burst.unwrap_or(def.limit);
    match rng.gen_range(0..10) {
        0..=5 => 1,
        6..=8 => rng.gen_range(1..=cap.max(def.limit)),
        _ => cap.max(def.limit) + rng.gen_range(1..=2),
    }
}

/// The next NOW: often the same instant or a few µs/ms on, sometimes across windows,
/// sometimes a jump of many windows.
fn advance(rng: &mut StdRng, now: u64, max_window: u64) -> u64 {
    let step = match rng.gen_range(0..100) {
        0..=11 => 0,
        12..=39 => rng.gen_range(1..1_000),
        40..=69 => rng.gen_range(1_000..300_000),
        70..=84 => rng.gen_range(300_000..2_000_000),
        85..=95 => rng.gen_range(max_window / 2..=max_window * 2),
        _ => rng.gen_range(10 * max_window..=100 * max_window),
    };
    now + step
}

fn random_case(rng: &mut StdRng, word: &str) -> String {
    match rng.gen_range(0..3) {
        0 => word.to_ascii_lowercase(),
        1 => word.to_string(),
        _ => word
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i % 2 == 0 {
                    c.to_ascii_lowercase()
                } else {
                    c
                }
            })
            .collect(),
    }
}

/// A stored key as the step script reports it.
#[derive(Debug, Clone, PartialEq)]
struct Stored {
    kind: String,
    /// GET's value, or the sorted scores of a log.
    value: Vec<String>,
    expires_at: i64,
}

fn parse_dump(dump: &Value, prefix: &str, ctx: &str) -> BTreeMap<String, Stored> {
    let mut out = BTreeMap::new();
    for entry in items(dump) {
        let e = items(entry);
        let key = text(&e[0]);
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let kind = text(&e[1]);
        let expires_at = int(&e[3]);
        let value = match kind.as_str() {
            "string" => items(&e[2]).iter().map(text).collect(),
            "zset" => {
                let flat = items(&e[2]);
                let mut scores: Vec<u64> = flat
                    .chunks(2)
                    .map(|p| {
                        let (member, score) = (text(&p[0]), text(&p[1]));
                        let score: u64 = score.parse().unwrap_or_else(|_| {
                            panic!("{ctx}: {key} score {score:?} is not whole µs")
                        });
                        let (micros, hex) = member
                            .split_once(':')
                            .unwrap_or_else(|| panic!("{ctx}: {key} member {member:?}"));
                        assert!(
                            micros == score.to_string()
                                && hex.len() == 8
                                && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
                            "{ctx}: {key} member {member:?} with score {score}"
                        );
                        score
                    })
                    .collect();
                scores.sort_unstable();
                scores.into_iter().map(|s| s.to_string()).collect()
            }
            other => panic!("{ctx}: {key} is a {other}"),
        };
        out.insert(
            rest.to_string(),
            Stored {
                kind,
                value,
                expires_at,
            },
        );
    }
    out
}

#[derive(Debug, Default)]
struct DiffStats {
    spends_allowed: u64,
    spends_denied: u64,
    /// Denied calls where at least one limit alone would have admitted.
    partial_denials: u64,
    peeks: u64,
    refunds: u64,
    resets: u64,
    /// Calls of each size.
    sizes: [u64; 6],
    algos: BTreeMap<&'static str, u64>,
    max_keys: usize,
}

#[test]
fn rl_all_matches_peek_then_spend_with_single_commands() {
    let server = Server::start();
    let c = &mut server.conn();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(STEP_LUA)
        .query(c)
        .unwrap();
    let mut rng = StdRng::seed_from_u64(0xa110f1e55);
    let mut stats = DiffStats::default();
    let started = Instant::now();
    const SCENARIOS: u64 = 8;
    const STEPS: u64 = 250;
    for scenario in 0..SCENARIOS {
        let pool = random_pool(&mut rng, 7);
        let max_window = pool.iter().map(|d| d.window_us).max().unwrap();
        let (aprefix, bprefix) = (format!("a:{scenario}:"), format!("b:{scenario}:"));
        let mut now = T0 + scenario * 1_000_000_000_000 + rng.gen_range(0..10_000_000);
        for step in 0..STEPS {
            now = advance(&mut rng, now, max_window);
            let n = rng.gen_range(1..=5);
            let mut chosen: Vec<usize> = (0..pool.len()).collect();
            for i in 0..n {
                let j = rng.gen_range(i..chosen.len());
                chosen.swap(i, j);
            }
            chosen.truncate(n);
            let mode = match rng.gen_range(0..100) {
                0..=79 => "SPEND",
                80..=86 => "PEEK",
                87..=94 => "REFUND",
                _ => "RESET",
            };
            let mut all_words = vec!["RL.ALL".to_string(), n.to_string()];
            let mut singles: Vec<Vec<String>> = Vec::new();
            for &i in &chosen {
                let d = &pool[i];
                *stats.algos.entry(d.algo).or_default() += 1;
                let cost = random_cost(&mut rng, d);
                let a_key = format!("{aprefix}{}", d.name);
                let b_key = format!("{bprefix}{}", d.name);
                all_words.extend([
                    random_case(&mut rng, d.algo),
                    a_key,
                    d.limit.to_string(),
                    d.window.to_string(),
                ]);
                let mut single = vec![
                    format!("RL.{}", d.algo),
                    b_key,
                    d.limit.to_string(),
                    d.window.to_string(),
                ];
                let mut options: Vec<[String; 2]> = Vec::new();
                if cost != 1 || rng.gen_bool(0.5) {
                    options.push([random_case(&mut rng, "COST"), cost.to_string()]);
                }
                if let Some(b) = d.burst {
                    options.push(["BURST".into(), b.to_string()]);
                }
                if rng.gen_bool(0.5) {
                    options.reverse();
                }
                for [o, v] in &options {
                    all_words.extend([o.clone(), v.clone()]);
                }
                if let Some(b) = d.burst {
                    single.extend(["BURST".into(), b.to_string()]);
                }
                single.extend([
                    "COST".into(),
                    cost.to_string(),
                    "NOW".into(),
                    now.to_string(),
                ]);
                singles.push(single);
            }
            all_words.extend(["NOW".to_string(), now.to_string()]);
            if mode != "SPEND" {
                all_words.push(random_case(&mut rng, mode));
            }
            stats.sizes[n] += 1;

            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&sha).arg(0).arg(&aprefix).arg(&bprefix);
            cmd.arg(all_words.len()).arg(&all_words);
            cmd.arg(mode).arg(n);
            for s in &singles {
                cmd.arg(s.len()).arg(s);
            }
            let ctx = format!("scenario {scenario} step {step}: {}", all_words.join(" "));
            let v: Value = cmd.query(c).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let parts = items(&v);
            let (total, per) = all_reply(&parts[0]);
            let mirror: Vec<Reply> = items(&parts[1]).iter().map(four).collect();
            let real: Vec<Reply> = items(&parts[2]).iter().map(four).collect();

            assert_eq!(per.len(), n, "{ctx}");
            // A spending entry's reset counts its own units, a PEEK's does not: in SPEND
            // mode the PEEKs predict the rest, and the real calls the reset.
            let decided = |r: &[Reply]| r.iter().map(|r| (r.0, r.1, r.2)).collect::<Vec<_>>();
            if mode == "SPEND" {
                assert_eq!(decided(&per), decided(&mirror), "{ctx}: per-limit vs PEEKs");
                for (p, m) in per.iter().zip(&mirror).filter(|(p, _)| p.0 == 0) {
                    assert_eq!(p, m, "{ctx}: a denying entry vs its PEEK");
                }
            } else {
                assert_eq!(per, mirror, "{ctx}: per-limit entries vs single commands");
            }
            assert_eq!(total, aggregate(&per), "{ctx}: aggregate of {per:?}");
            match mode {
                "SPEND" => {
                    if total.0 == 1 {
                        stats.spends_allowed += 1;
                        assert_eq!(real, per, "{ctx}: the real calls vs the entries");
                    } else {
                        stats.spends_denied += 1;
                        assert!(real.is_empty(), "{ctx}");
                        if per.iter().any(|r| r.0 == 1) {
                            stats.partial_denials += 1;
                        }
                    }
                }
                "PEEK" => stats.peeks += 1,
                "REFUND" => stats.refunds += 1,
                _ => stats.resets += 1,
            }

            let a = parse_dump(&parts[3], &aprefix, &ctx);
            let b = parse_dump(&parts[3], &bprefix, &ctx);
            stats.max_keys = stats.max_keys.max(a.len());
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "{ctx}: key sets"
            );
            for (name, sa) in &a {
                let sb = &b[name];
                assert_eq!(
                    (&sa.kind, &sa.value),
                    (&sb.kind, &sb.value),
                    "{ctx}: {name}"
                );
                assert!(
                    sa.expires_at > 0 && sb.expires_at > 0,
                    "{ctx}: {name} without TTL: {sa:?} {sb:?}"
                );
                // The two sides read the wall clock microseconds apart, unless this
                // shared machine preempts the script between them: 250 ms allows for
                // that and is still a quarter of the shortest window.
                assert!(
                    (sa.expires_at - sb.expires_at).abs() <= 250,
                    "{ctx}: {name} expires at {} vs {}",
                    sa.expires_at,
                    sb.expires_at
                );
            }
        }
    }
    let took = started.elapsed();
    println!("{stats:?} in {took:?}");
    let steps = SCENARIOS * STEPS;
    assert!(stats.spends_allowed * 10 > steps, "{stats:?}");
    assert!(stats.spends_denied * 10 > steps, "{stats:?}");
    assert!(stats.partial_denials * 20 > steps, "{stats:?}");
    assert!(
        stats.peeks > 50 && stats.refunds > 50 && stats.resets > 30,
        "{stats:?}"
    );
    assert!(stats.sizes[1..].iter().all(|&k| k > 100), "{stats:?}");
    assert!(stats.algos.len() == 4 && stats.algos.values().all(|&k| k > 500));
}

// ---------------------------------------------------------------------------------
// The Lua scripts and RL.ALL on the same keys

fn eval_sha(c: &mut Connection, sha: &str, keys: &[&str], args: &[String]) -> (i64, i64) {
    let r: Vec<i64> = redis::cmd("EVALSHA")
        .arg(sha)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(c)
        .unwrap_or_else(|e| panic!("EVALSHA {keys:?} {args:?}: {e}"));
    (r[0], r[1])
}

fn load(c: &mut Connection, source: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(source)
        .query(c)
        .unwrap()
}

#[test]
fn lua_scripts_and_rl_all_share_budgets() {
    let server = Server::start();
    let c = &mut server.conn();
    let (log_sha, fixed_sha, count_sha) =
        (load(c, LOG_LUA), load(c, FIXED_LUA), load(c, COUNTER_LUA));
    let mut rng = StdRng::seed_from_u64(0x10a);
    const W_S: u64 = 10;
    const W_US: u64 = W_S * 1_000_000;
    let (log_limit, fixed_limit, count_limit) = (4u64, 6u64, 5u64);
    let (log, fix, cnt) = ("rl:{i}:log", "rl:{i}:fix", "rl:{i}:cnt");
    // The models: the log's admitted instants, the fixed counters by window start
    // (seconds) and the sliding counters by window index.
    let mut entries: Vec<u64> = Vec::new();
    let mut fixed: BTreeMap<u64, u64> = BTreeMap::new();
    let mut counters: BTreeMap<u64, u64> = BTreeMap::new();
    let mut now = T0 + 123_457;
    let (mut by_script, mut by_all, mut all_admitted, mut all_partial) = (0, 0, 0, 0);
    for step in 0..600 {
        now += match rng.gen_range(0..10) {
            0..=1 => 0,
            2..=7 => rng.gen_range(1..1_500_000),
            _ => rng.gen_range(1_500_000..12_000_000),
        };
        let ctx = format!("step {step} at NOW {now}");
        entries.retain(|&t| t + W_US > now);
        let start = now / 1_000_000 - (now / 1_000_000) % W_S;
        let i = now / W_US;
        let fixed_count = fixed.get(&start).copied().unwrap_or(0);
        let (cur, prev) = (
            counters.get(&i).copied().unwrap_or(0),
            counters.get(&(i - 1)).copied().unwrap_or(0),
        );
        match rng.gen_range(0..5) {
            0 => {
                let member = format!("{now}:{:08x}", rng.gen::<u32>());
                let args = [
                    now.to_string(),
                    W_US.to_string(),
                    log_limit.to_string(),
                    member,
                ];
                let got = eval_sha(c, &log_sha, &[log], &args);
                let n = entries.len() as u64;
                let want = if n < log_limit {
                    entries.push(now);
                    (1, (log_limit - n - 1) as i64)
                } else {
                    (0, 0)
                };
                assert_eq!(got, want, "{ctx}: sliding_window_log.lua");
                by_script += 1;
            }
            1 => {
                let args = [
                    (now / 1_000_000).to_string(),
                    W_S.to_string(),
                    fixed_limit.to_string(),
                ];
                let got = eval_sha(c, &fixed_sha, &[fix], &args);
                let count = fixed_count + 1; // the script counts denials too
                fixed.insert(start, count);
                let want = (
                    i64::from(count <= fixed_limit),
                    fixed_limit.saturating_sub(count) as i64,
                );
                assert_eq!(got, want, "{ctx}: fixed_window.lua");
                by_script += 1;
            }
            2 => {
                // The elapsed ratio as a float the script parses back exactly.
                let elapsed = (now % W_US) as f64 / W_US as f64;
                let args = [
                    count_limit.to_string(),
                    format!("{elapsed}"),
                    W_S.to_string(),
                ];
                let keys = [format!("{cnt}:{i}"), format!("{cnt}:{}", i - 1)];
                let got = eval_sha(c, &count_sha, &[&keys[0], &keys[1]], &args);
                let est = cur + (prev as f64 * (1.0 - elapsed)).floor() as u64;
                let want = if est < count_limit {
                    counters.insert(i, cur + 1);
                    (1, (count_limit - est - 1) as i64)
                } else {
                    (0, 0)
                };
                assert_eq!(got, want, "{ctx}: sliding_window_counter.lua");
                by_script += 1;
            }
            _ => {
                // RL.ALL over a random non-empty subset of the three, in random order.
                let mut which: Vec<usize> = vec![0, 1, 2];
                for k in 0..3 {
                    let j = rng.gen_range(k..3);
                    which.swap(k, j);
                }
                which.truncate(rng.gen_range(1..=3));
                let mut line = format!("RL.ALL {}", which.len());
                let mut want_per = Vec::new();
                for &w in &which {
                    let (spec, used, limit) = match w {
                        0 => (
                            format!("SLIDELOG {log} {log_limit} {W_S}"),
                            entries.len() as u64,
                            log_limit,
                        ),
                        1 => (
                            format!("FIXED {fix} {fixed_limit} {W_S}"),
                            fixed_count,
                            fixed_limit,
                        ),
                        _ => (
                            format!("SLIDECOUNT {cnt} {count_limit} {W_S}"),
                            cur + prev * (W_US - now % W_US) / W_US,
                            count_limit,
                        ),
                    };
                    line.push(' ');
                    line.push_str(&spec);
                    let ok = used < limit;
                    want_per.push((
                        i64::from(ok),
                        limit.saturating_sub(used + u64::from(ok)) as i64,
                    ));
                }
                line.push_str(&format!(" NOW {now}"));
                let (total, per) = run_all(c, &line);
                let got_per: Vec<(i64, i64)> = per.iter().map(|r| (r.0, r.1)).collect();
                assert_eq!(got_per, want_per, "{ctx}: {line}");
                assert_eq!(total, aggregate(&per), "{ctx}: {line}");
                let admitted = want_per.iter().all(|p| p.0 == 1);
                assert_eq!(total.0, i64::from(admitted), "{ctx}: {line}");
                if admitted {
                    all_admitted += 1;
                    for &w in &which {
                        match w {
                            0 => entries.push(now),
                            1 => {
                                fixed.insert(start, fixed_count + 1);
                            }
                            _ => {
                                counters.insert(i, cur + 1);
                            }
                        }
                    }
                } else if want_per.iter().any(|p| p.0 == 1) {
                    all_partial += 1;
                }
                by_all += 1;
            }
        }
        // The data both sides read: the log's live entries and both counters.
        let live: u64 = redis::cmd("ZCOUNT")
            .arg(log)
            .arg(format!("({}", now.saturating_sub(W_US)))
            .arg("+inf")
            .query(c)
            .unwrap();
        assert_eq!(live, entries.len() as u64, "{ctx}: live log entries");
        let f: Option<u64> = redis::cmd("GET")
            .arg(format!("{fix}:{start}"))
            .query(c)
            .unwrap();
        assert_eq!(
            f.unwrap_or(0),
            fixed.get(&start).copied().unwrap_or(0),
            "{ctx}"
        );
        let k: Option<u64> = redis::cmd("GET")
            .arg(format!("{cnt}:{i}"))
            .query(c)
            .unwrap();
        assert_eq!(
            k.unwrap_or(0),
            counters.get(&i).copied().unwrap_or(0),
            "{ctx}"
        );
    }
    println!("script calls {by_script}, RL.ALL {by_all} ({all_admitted} admitted, {all_partial} denied by one limit only)");
    assert!(by_script > 200 && by_all > 150 && all_admitted > 30 && all_partial > 10);
}

// ---------------------------------------------------------------------------------
// Bad input

#[test]
fn every_malformed_part_is_refused_and_writes_nothing() {
    let server = Server::start();
    let c = &mut server.conn();
    let n = T0 + 1_000;
    // Some state that a bad call could disturb: a log and counters with room left, a
    // list, a counter and a TAT that hold text.
    let (total, _) = run_all(
        c,
        &format!(
            "RL.ALL 3 SLIDELOG {{u}}:log 5 10 FIXED {{u}}:fix 5 10 GCRA {{u}}:g 5 10 NOW {T0}"
        ),
    );
    assert_eq!(total.0, 1);
    let _: () = redis::cmd("RPUSH")
        .arg("{u}:list")
        .arg("x")
        .query(c)
        .unwrap();
    let fixed_name = T0 / 1_000_000;
    let _: () = redis::cmd("SET")
        .arg(format!("{{u}}:bad:{fixed_name}"))
        .arg("abc")
        .query(c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("{u}:gbad")
        .arg("abc")
        .query(c)
        .unwrap();
    let before = snapshot(c);

    // A first limit that would admit (and write) if the call went ahead.
    let ok1 = "SLIDELOG {u}:log 5 10";
    let ok2 = "FIXED {u}:new 5 10";
    let seventeen: String = (0..17).map(|k| format!(" GCRA {{u}}:m{k} 5 10")).collect();
    let dup_derived =
        format!("ERR RL.ALL: key '{{u}}:c:{fixed_name}' is used by more than one limit");
    let bad_counter =
        format!("ERR limiter key '{{u}}:bad:{fixed_name}' does not hold a non-negative integer");
    let arity = "ERR wrong number of arguments for 'rl.all' command";
    let syntax_cases: Vec<(String, &str)> = vec![
        // numlimits
        (format!("RL.ALL 0 {ok1} NOW {n}"), "ERR RL.ALL needs a number of limits from 1 to 16"),
        (format!("RL.ALL 17{seventeen} NOW {n}"), "ERR RL.ALL needs a number of limits from 1 to 16"),
        (format!("RL.ALL abc {ok1} NOW {n}"), "ERR RL.ALL needs a number of limits from 1 to 16"),
        (format!("RL.ALL -1 {ok1} NOW {n}"), "ERR RL.ALL needs a number of limits from 1 to 16"),
        // too few words
        ("RL.ALL 1".into(), arity),
        ("RL.ALL 1 FIXED {u}:a 5".into(), arity),
        (format!("RL.ALL 2 {ok1}"), arity),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5"), arity),
        // algorithm
        (format!("RL.ALL 2 {ok1} TOKEN {{u}}:a 5 10 NOW {n}"), "ERR RL.ALL: unknown algorithm 'TOKEN'"),
        (format!("RL.ALL 1 RL.FIXED {{u}}:a 5 10 NOW {n}"), "ERR RL.ALL: unknown algorithm 'RL.FIXED'"),
        // BURST is GCRA's only
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 10 BURST 2 NOW {n}"), "ERR syntax error: unknown option 'BURST'"),
        (format!("RL.ALL 1 {ok1} BURST 2 NOW {n}"), "ERR syntax error: unknown option 'BURST'"),
        ("RL.ALL 1 SLIDECOUNT {u}:a 5 10 burst 2".into(), "ERR syntax error: unknown option 'burst'"),
        // repeated options
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 10 COST 1 COST 2 NOW {n}"), "ERR syntax error: COST given more than once"),
        (format!("RL.ALL 2 {ok1} GCRA {{u}}:a 5 10 BURST 1 COST 1 BURST 2 NOW {n}"), "ERR syntax error: BURST given more than once"),
        (format!("RL.ALL 1 {ok1} NOW {n} NOW {n}"), "ERR syntax error: NOW given more than once"),
        (format!("RL.ALL 1 {ok1} PEEK NOW {n} PEEK"), "ERR syntax error: PEEK given more than once"),
        // missing values
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 10 COST"), "ERR syntax error: COST needs a value"),
        (format!("RL.ALL 2 {ok1} GCRA {{u}}:a 5 10 BURST"), "ERR syntax error: BURST needs a value"),
        (format!("RL.ALL 1 {ok1} NOW"), "ERR syntax error: NOW needs a value"),
        (format!("RL.ALL 1 {ok1} PEEK NOW"), "ERR syntax error: NOW needs a value"),
        // a limit's options after NOW or the mode
        (format!("RL.ALL 1 {ok1} NOW {n} COST 2"), "ERR syntax error: COST belongs to a limit and must come before NOW, PEEK, REFUND or RESET"),
        ("RL.ALL 1 GCRA {u}:a 5 10 PEEK BURST 2".into(), "ERR syntax error: BURST belongs to a limit and must come before NOW, PEEK, REFUND or RESET"),
        (format!("RL.ALL 1 {ok1} REFUND COST 1 NOW {n}"), "ERR syntax error: COST belongs to a limit and must come before NOW, PEEK, REFUND or RESET"),
        // unknown options
        (format!("RL.ALL 1 {ok1} NOW {n} FOO"), "ERR syntax error: unknown option 'FOO'"),
        (format!("RL.ALL 1 {ok1} NOW {n} 7"), "ERR syntax error: unknown option '7'"),
        // Between limits an unknown word is read as the next limit's algorithm.
        (format!("RL.ALL 2 {ok1} FOO {ok2} NOW {n}"), "ERR RL.ALL: unknown algorithm 'FOO'"),
        // two modes
        (format!("RL.ALL 1 {ok1} PEEK REFUND NOW {n}"), "ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other"),
        (format!("RL.ALL 1 {ok1} NOW {n} RESET peek"), "ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other"),
        (format!("RL.ALL 1 {ok1} REFUND RESET"), "ERR syntax error: PEEK, REFUND, RESET and IMPOSE exclude each other"),
        // the same key twice, directly or as a derived counter
        (format!("RL.ALL 2 {ok1} GCRA {{u}}:log 5 10 NOW {n}"), "ERR RL.ALL: key '{u}:log' is used by more than one limit"),
        (format!("RL.ALL 3 {ok2} {ok1} SLIDELOG {{u}}:log 7 60 NOW {n}"), "ERR RL.ALL: key '{u}:log' is used by more than one limit"),
        (format!("RL.ALL 2 FIXED {{u}}:c 5 10 SLIDELOG {{u}}:c:{fixed_name} 5 10 NOW {n}"), &dup_derived),
        (format!("RL.ALL 2 FIXED {{u}}:c 5 10 SLIDECOUNT {{u}}:c 5 10 NOW {n}"), "ERR RL.ALL: key '{u}:c' is used by more than one limit"),
        // bad numbers
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 0 10 NOW {n}"), "ERR limit must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a -1 10 NOW {n}"), "ERR limit must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a abc 10 NOW {n}"), "ERR limit must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 1000000000000001 10 NOW {n}"), "ERR limit must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 0 NOW {n}"), "ERR window must be a positive duration such as 60, 60s or 1500ms"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 10m NOW {n}"), "ERR window must be a positive duration such as 60, 60s or 1500ms"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 1.5 NOW {n}"), "ERR window must be a positive duration such as 60, 60s or 1500ms"),
        (format!("RL.ALL 2 {ok1} FIXED {{u}}:a 5 10 COST 0 NOW {n}"), "ERR COST must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 2 {ok1} GCRA {{u}}:a 5 10 BURST 0 NOW {n}"), "ERR BURST must be a positive integer no larger than 1000000000000000"),
        (format!("RL.ALL 1 {ok1} NOW {}", n / 1_000_000), "ERR NOW must be unix time in microseconds; 1764480000 looks like seconds"),
        (format!("RL.ALL 1 {ok1} NOW {}", n / 1000), "ERR NOW must be unix time in microseconds; 1764480000001 looks like milliseconds"),
        (format!("RL.ALL 1 {ok1} NOW abc"), "ERR NOW must be unix time in microseconds between 1973 and 2255"),
        (format!("RL.ALL 1 {ok1} NOW 9007199254740992"), "ERR NOW must be unix time in microseconds between 1973 and 2255"),
        // limits a single command refuses too
        (format!("RL.ALL 2 FIXED {{u}}:a 5 10 SLIDELOG {{u}}:l2 5000 10 COST 1000001 NOW {n}"), "ERR COST must be a positive integer no larger than 1000000"),
        (format!("RL.ALL 2 {ok1} GCRA {{u}}:a 2000 1ms NOW {n}"), "ERR RL.GCRA spaces requests at least 1 µs apart"),
    ];
    let type_cases: Vec<(String, &str)> = vec![
        // a key of the wrong type in the second limit: the first must not write
        (
            format!("RL.ALL 2 {ok1} SLIDELOG {{u}}:list 5 10 NOW {n}"),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            format!("RL.ALL 2 {ok2} GCRA {{u}}:list 5 10 NOW {n}"),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            format!("RL.ALL 2 {ok2} GCRA {{u}}:log 5 10 NOW {n}"),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            format!("RL.ALL 2 {ok1} SLIDELOG {{u}}:g 5 10 NOW {n} RESET"),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        (
            format!("RL.ALL 2 {ok1} GCRA {{u}}:list 5 10 NOW {n} REFUND"),
            "WRONGTYPE Operation against a key holding the wrong kind of value",
        ),
        // a counter that holds text
        (
            format!("RL.ALL 2 {ok1} FIXED {{u}}:bad 5 10 NOW {n}"),
            &bad_counter,
        ),
        (
            format!("RL.ALL 2 {ok2} GCRA {{u}}:gbad 5 10 NOW {n} RESET"),
            "ERR limiter key '{u}:gbad' does not hold a non-negative integer",
        ),
        (
            format!("RL.ALL 3 {ok1} {ok2} GCRA {{u}}:gbad 5 10 NOW {n}"),
            "ERR limiter key '{u}:gbad' does not hold a non-negative integer",
        ),
    ];
    for (line, want) in syntax_cases.iter().chain(&type_cases) {
        let got = err_line(c, line);
        assert!(
            got.starts_with(want),
            "{line}:\n  got  {got}\n  want {want}"
        );
        assert_eq!(snapshot(c), before, "{line} changed the data");
    }
    // The same limits, well formed, do write: the refusals above were not vacuous.
    let (total, _) = run_all(c, &format!("RL.ALL 2 {ok1} {ok2} NOW {n}"));
    assert_eq!(total.0, 1);
    assert_ne!(snapshot(c), before);
}

// ---------------------------------------------------------------------------------
// Cluster (the harness of tests/common/cluster.rs)

#[test]
fn cluster_routes_rl_all_by_its_shared_slot_and_refuses_crossslot() {
    let cluster = Cluster::start();
    // One hash tag per node.
    let mut tags: Vec<Option<String>> = vec![None; 3];
    for k in 0.. {
        let tag = format!("t{k}");
        let node = cluster.owner(key_slot(tag.as_bytes()));
        tags[node].get_or_insert(tag);
        if tags.iter().all(Option::is_some) {
            break;
        }
    }
    let tags: Vec<String> = tags.into_iter().map(Option::unwrap).collect();
    for (node, tag) in tags.iter().enumerate() {
        let line = format!(
            "RL.ALL 4 SLIDELOG {{{tag}}}:log 2 10 SLIDECOUNT {{{tag}}}:cnt 2 10 \
             FIXED {{{tag}}}:fix 2 10 GCRA rl:{{{tag}}} 2 10 NOW {T0}"
        );
        let slot = key_slot(tag.as_bytes());
        for other in (0..3).filter(|&o| o != node) {
            let err = query_line(&mut cluster.nodes[other].conn(), &line).expect_err(&line);
            assert_eq!(err.kind(), ErrorKind::Moved, "{line}: {err}");
            let (addr, moved_slot) = err.redirect_node().unwrap();
            assert_eq!(moved_slot, slot);
            assert_eq!(addr, format!("127.0.0.1:{}", cluster.nodes[node].port));
            let written: Vec<String> = cluster
                .keys_on(other)
                .into_iter()
                .filter(|k| k.contains(&format!("{{{tag}}}")))
                .collect();
            assert!(written.is_empty(), "node {other} was written: {written:?}");
        }
        let c = &mut cluster.nodes[node].conn();
        for k in 0..3 {
            let (total, per) = run_all(c, &line);
            let want = i64::from(k < 2);
            assert_eq!(total.0, want, "{line} call {k}: {per:?}");
            assert!(per.iter().all(|r| r.0 == want), "{per:?}");
        }
        let keys = cluster.keys_on(node);
        let fixed_n = T0 / 1_000_000;
        let count_n = T0 / 10_000_000;
        let want: BTreeSet<String> = [
            format!("{{{tag}}}:log"),
            format!("{{{tag}}}:cnt:{count_n}"),
            format!("{{{tag}}}:fix:{fixed_n}"),
            format!("rl:{{{tag}}}"),
        ]
        .into();
        assert_eq!(keys, want, "node {node}");
        // The derived counters need the hash tag in cluster mode, in RL.ALL too: the
        // bare tag is a key of the same slot, without a hash tag.
        let e = err_line(
            c,
            &format!("RL.ALL 2 GCRA {{{tag}}}:g 2 10 FIXED {tag} 2 10 NOW {T0}"),
        );
        assert!(
            e.starts_with(&format!(
                "ERR key '{tag}' needs a {{hash tag}} in cluster mode"
            )),
            "{e}"
        );
        assert_eq!(cluster.keys_on(node), want, "a refused call wrote");
    }
    // Keys in different slots: CROSSSLOT wherever the call is sent, nothing written.
    let line = format!(
        "RL.ALL 2 GCRA {{{}}}:a 5 10 GCRA {{{}}}:b 5 10 NOW {T0}",
        tags[0], tags[1]
    );
    let before: Vec<BTreeSet<String>> = (0..3).map(|n| cluster.keys_on(n)).collect();
    let leased = format!(
        "RL.ALL 2 CONCURRENCY {{{}}}:a 5 10 FIXED {{{}}}:b 5 10 LEASE r NOW {T0}",
        tags[0], tags[1]
    );
    for node in 0..3 {
        for line in [&line, &leased] {
            let e = err_line(&mut cluster.nodes[node].conn(), line);
            assert!(e.starts_with("CROSSSLOT"), "node {node}: {line}: {e}");
        }
    }
    // The same two keys in one slot (same tag) work.
    let (total, _) = run_all(
        &mut cluster.nodes[0].conn(),
        &format!(
            "RL.ALL 2 GCRA {{{0}}}:a 5 10 GCRA {{{0}}}:b 5 10 NOW {T0}",
            tags[0]
        ),
    );
    assert_eq!(total.0, 1);
    for (node, keys) in before.iter().enumerate().skip(1) {
        assert_eq!(&cluster.keys_on(node), keys);
    }
}

// ---------------------------------------------------------------------------------
// ACL

const PASSWORD: &str = "pw-all";

fn setuser(c: &mut Connection, name: &str, rules: &[&str]) {
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(name)
        .arg("reset")
        .arg("on")
        .arg(format!(">{PASSWORD}"));
    for r in rules {
        cmd.arg(*r);
    }
    let ok: String = cmd.query(c).unwrap();
    assert_eq!(ok, "OK");
}

fn login(s: &Server, user: &str) -> Connection {
    redis::Client::open(format!("redis://{user}:{PASSWORD}@127.0.0.1:{}/", s.port))
        .unwrap()
        .get_connection()
        .expect("login")
}

#[test]
fn acl_refuses_a_limit_whose_key_is_not_permitted_and_nothing_is_written() {
    let s = Server::start();
    let admin = &mut s.conn();
    let (total, _) = run_all(
        admin,
        &format!("RL.ALL 2 GCRA rl:g 5 10 SLIDELOG rl:log 5 10 NOW {T0}"),
    );
    assert_eq!(total.0, 1);
    setuser(admin, "u", &["~rl:g", "~rl:log", "~rl:x", "+rl.all"]);
    let u = &mut login(&s, "u");
    let before = snapshot(admin);
    let fixed_n = T0 / 1_000_000;
    for (line, key) in [
        // A base key outside the patterns: Redis refuses it (the keys are declared).
        (
            format!("RL.ALL 2 GCRA rl:g 5 10 GCRA rl:other 5 10 NOW {T0}"),
            "rl:other".to_string(),
        ),
        (
            format!("RL.ALL 3 SLIDELOG rl:log 5 10 GCRA rl:g 5 10 SLIDELOG nope 5 10 NOW {T0}"),
            "nope".to_string(),
        ),
        // A derived counter outside the patterns: the module refuses it.
        (
            format!("RL.ALL 2 GCRA rl:g 5 10 FIXED rl:x 5 10 NOW {T0}"),
            format!("rl:x:{fixed_n}"),
        ),
        (
            format!("RL.ALL 2 SLIDELOG rl:log 5 10 SLIDECOUNT rl:x 5 10 NOW {T0}"),
            format!("rl:x:{}", T0 / 10_000_000),
        ),
        (
            format!("RL.ALL 2 SLIDELOG rl:log 5 10 FIXED rl:x 5 10 NOW {T0} RESET"),
            format!("rl:x:{fixed_n}"),
        ),
    ] {
        let e = err_line(u, &line);
        assert!(e.starts_with("NOPERM"), "{line}: {e}");
        // The module names the derived key it refused; Redis 7.0 does not name the
        // argument keys it refuses itself.
        if key.starts_with("rl:x:") {
            assert!(e.contains(&key), "{line}: {e} does not name {key}");
        }
        assert_eq!(snapshot(admin), before, "{line} wrote something");
    }
    // The permitted keys alone work for u.
    let (total, _) = run_all(
        u,
        &format!("RL.ALL 2 GCRA rl:g 5 10 SLIDELOG rl:log 5 10 NOW {T0}"),
    );
    assert_eq!(total.0, 1);
    assert_ne!(snapshot(admin), before);
    // With the derived keys permitted too, the counters work.
    setuser(admin, "w", &["~rl:*", "+rl.all"]);
    let w = &mut login(&s, "w");
    let (total, _) = run_all(
        w,
        &format!("RL.ALL 2 GCRA rl:g 5 10 FIXED rl:x 5 10 NOW {T0}"),
    );
    assert_eq!(total.0, 1);
    let v: Option<i64> = redis::cmd("GET")
        .arg(format!("rl:x:{fixed_n}"))
        .query(admin)
        .unwrap();
    assert_eq!(v, Some(1));
}

// ---------------------------------------------------------------------------------
// Replication

#[test]
fn replicas_end_byte_identical_after_rl_all_traffic_with_refund_and_reset() {
    let primary = Server::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port.to_string();
    let args = ["--replicaof", "127.0.0.1", port.as_str()];
    let with_module = Server::start_with(&args);
    let without_module = Server::start_without_module(&args);
    wait_link(&primary, &with_module);
    wait_link(&primary, &without_module);
    let p = &mut primary.conn();
    let mut rng = StdRng::seed_from_u64(0x2e91);
    let pool: Vec<LimitDef> = (0..4)
        .flat_map(|k| {
            let windows = [
                ("10", 10_000_000),
                ("60s", 60_000_000),
                ("30000ms", 30_000_000),
            ];
            ALGOS.iter().map(move |&algo| (k, algo, windows[k % 3]))
        })
        .map(|(k, algo, (window, window_us))| LimitDef {
            algo,
            // The tags the dataset comparison looks for.
            name: format!(
                "{{r}}:{}:{k}",
                match algo {
                    "SLIDELOG" => "log",
                    "SLIDECOUNT" => "cnt",
                    "FIXED" => "fix",
                    _ => "gcra",
                }
            ),
            limit: [2, 3, 7, 20][k],
            window,
            window_us,
            burst: (algo == "GCRA" && k % 2 == 1).then_some(4),
        })
        .collect();
    let mut now = T0;
    let mut modes: BTreeMap<&str, u64> = BTreeMap::new();
    for _ in 0..3_000 {
        now += rng.gen_range(0..400_000);
        let n = rng.gen_range(1..=4);
        let mut chosen: Vec<&LimitDef> = Vec::new();
        while chosen.len() < n {
            let d = &pool[rng.gen_range(0..pool.len())];
            if !chosen.iter().any(|c| c.name == d.name) {
                chosen.push(d);
            }
        }
        let mut line = format!("RL.ALL {n}");
        for d in &chosen {
            line.push_str(&format!(" {} {} {} {}", d.algo, d.name, d.limit, d.window));
            if let Some(b) = d.burst {
                line.push_str(&format!(" BURST {b}"));
            }
            line.push_str(&format!(" COST {}", rng.gen_range(1..=3)));
        }
        line.push_str(&format!(" NOW {now}"));
        let mode = match rng.gen_range(0..20) {
            0..=13 => "",
            14..=15 => " PEEK",
            16..=18 => " REFUND",
            _ => " RESET",
        };
        line.push_str(mode);
        *modes.entry(mode).or_default() += 1;
        run_all(p, &line);
    }
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(p).unwrap();
    assert_eq!(acked, 2);
    let now_ms = server_time_ms(p);
    let on_primary = snapshot(p);
    assert!(on_primary.len() >= 10, "{} keys", on_primary.len());
    for (label, replica) in [
        ("replica with the module", &with_module),
        ("replica without the module", &without_module),
    ] {
        let r = &mut replica.conn();
        let compared = assert_same_data(label, &on_primary, &snapshot(r), now_ms);
        assert!(compared >= 10, "{label}: only {compared} keys compared");
        let stats: String = redis::cmd("INFO").arg("commandstats").query(r).unwrap();
        assert!(
            !stats.to_ascii_lowercase().contains("cmdstat_rl."),
            "{label} ran limiter commands:\n{stats}"
        );
    }
    println!("modes: {modes:?}");
}

// ---------------------------------------------------------------------------------
// COMMAND GETKEYS

#[test]
fn command_getkeys_returns_the_keys_in_order() {
    let s = Server::start();
    let c = &mut s.conn();
    let getkeys = |c: &mut Connection, line: &str| -> RedisResult<Vec<String>> {
        query_line(c, &format!("COMMAND GETKEYS {line}")).and_then(|v| from_redis_value(&v))
    };
    let line = format!(
        "RL.ALL 4 fixed {{u}}:f 5 10 COST 2 GCRA {{u}}:g 3 1 BURST 2 COST 1 \
         SLIDELOG {{u}}:l 4 10 slidecount {{u}}:c 9 1500ms NOW {T0} PEEK"
    );
    assert_eq!(
        getkeys(c, &line).unwrap(),
        ["{u}:f", "{u}:g", "{u}:l", "{u}:c"]
    );
    assert_eq!(getkeys(c, "RL.ALL 1 GCRA k 1 1").unwrap(), ["k"]);
    // Keys that look like options or algorithm names are still keys.
    assert_eq!(
        getkeys(c, "RL.ALL 2 GCRA NOW 1 1 FIXED COST 1 1 RESET").unwrap(),
        ["NOW", "COST"]
    );
    assert!(getkeys(c, "RL.ALL 0 GCRA k 1 1").is_err());
    // GETKEYS wrote nothing.
    assert!(snapshot(c).is_empty());
}
