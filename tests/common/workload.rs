//! A seeded workload of all four limiters on the server clock, and the comparison of
//! two datasets: shared by the replication and persistence tests.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{rl, Connection, T0};

/// Keys whose expiry is this close to (or past) the reference clock when the
/// snapshots are taken are left out of comparisons: they may be deleted on one side
/// and not yet on the other.
pub const MARGIN_MS: i64 = 1_000;

pub fn info(c: &mut Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(c).expect("INFO")
}

pub fn info_field(c: &mut Connection, section: &str, field: &str) -> Option<String> {
    let text = info(c, section);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

pub fn info_int(c: &mut Connection, section: &str, field: &str) -> i64 {
    info_field(c, section, field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .parse()
        .unwrap_or_else(|e| panic!("{field}: {e}"))
}

pub fn server_time_ms(c: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).expect("TIME");
    s * 1000 + us / 1000
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Algo {
    Log,
    Count,
    Fixed,
    Gcra,
}

impl Algo {
    const ALL: [Algo; 4] = [Algo::Log, Algo::Count, Algo::Fixed, Algo::Gcra];

    pub fn command(self) -> &'static str {
        match self {
            Algo::Log => "RL.SLIDELOG",
            Algo::Count => "RL.SLIDECOUNT",
            Algo::Fixed => "RL.FIXED",
            Algo::Gcra => "RL.GCRA",
        }
    }

    pub fn tag(self) -> &'static str {
        match self {
            Algo::Log => "log",
            Algo::Count => "cnt",
            Algo::Fixed => "fix",
            Algo::Gcra => "gcra",
        }
    }
}

/// One limiter: a key with a fixed limit, and one window as an app uses it, or a
/// few windows of all sizes used in turn (so that a long-lived key also sees its old
/// entries trimmed by a short window: effects replicas must apply too).
pub struct Limiter {
    algo: Algo,
    key: String,
    limit: u64,
    windows: Vec<String>,
    burst: Option<u64>,
    /// Costs in the hundreds instead of 1 to 3.
    big: bool,
}

/// Windows of three sizes: tiny ones (keys expire while the workload runs), ones in
/// milliseconds, and ones in seconds (keys that outlive the workload and are compared).
pub fn random_window(rng: &mut StdRng, size: usize) -> String {
    match size {
        0 => format!("{}ms", rng.gen_range(1..=50)),
        1 => format!("{}ms", rng.gen_range(100..=3_000)),
        _ => {
            if rng.gen_bool(0.5) {
                format!("{}", rng.gen_range(10..=120))
            } else {
                format!("{}s", rng.gen_range(10..=120))
            }
        }
    }
}

pub fn limiters(rng: &mut StdRng) -> Vec<Limiter> {
    let mut out = Vec::new();
    for algo in Algo::ALL {
        for i in 0..12 {
            let limit = rng.gen_range(1..=6);
            let windows = match i % 4 {
                3 => (0..3).map(|size| random_window(rng, size)).collect(),
                size => vec![random_window(rng, size)],
            };
            out.push(Limiter {
                algo,
                // Hash-tagged, as cluster users of SLIDECOUNT and FIXED must.
                key: format!("rl:{{user{i}}}:{}", algo.tag()),
                limit,
                windows,
                burst: (algo == Algo::Gcra && rng.gen_bool(0.5)).then(|| rng.gen_range(1..=6)),
                big: false,
            });
        }
    }
    // One big log: a short window then leaves more expired entries than one call
    // trims at once, and the module replicates the exact members it removed.
    out.push(Limiter {
        algo: Algo::Log,
        key: "rl:{big}:log".into(),
        limit: 2_500,
        windows: vec!["20ms".into(), "60s".into(), "60s".into()],
        burst: None,
        big: true,
    });
    out
}

/// What a workload exercised, per limiter.
#[derive(Debug, Default)]
pub struct Tally {
    allowed: BTreeMap<Algo, u64>,
    denied: BTreeMap<Algo, u64>,
    never: u64,
    peeks: u64,
}

/// A seeded mix of all four limiters on the server clock (no NOW): small limits, so
/// many denials; COST sometimes above 1 and sometimes above the limit; some PEEKs.
pub fn workload(c: &mut Connection, seed: u64, steps: usize) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let limiters = limiters(&mut rng);
    let mut tally = Tally::default();
    for _ in 0..steps {
        let l = &limiters[rng.gen_range(0..limiters.len())];
        let window = &l.windows[rng.gen_range(0..l.windows.len())];
        let mut line = format!("{} {} {} {window}", l.algo.command(), l.key, l.limit);
        if let Some(b) = l.burst {
            line.push_str(&format!(" BURST {b}"));
        }
        let cost = match rng.gen_range(0..100) {
            _ if l.big => rng.gen_range(100..=1_000),
            0..=74 => 1,
            75..=94 => rng.gen_range(2..=3),
            // Never admissible (for GCRA: above the burst too).
            _ => l.limit.max(l.burst.unwrap_or(0)) + 1,
        };
        if cost != 1 || rng.gen_bool(0.1) {
            line.push_str(&format!(" COST {cost}"));
        }
        let peek = rng.gen_bool(0.05);
        if peek {
            line.push_str(" PEEK");
        }
        let reply = rl(c, &line);
        if peek {
            tally.peeks += 1;
        } else if reply.0 == 1 {
            *tally.allowed.entry(l.algo).or_default() += 1;
        } else {
            *tally.denied.entry(l.algo).or_default() += 1;
            if reply.2 == -1 {
                tally.never += 1;
            }
        }
    }
    for algo in Algo::ALL {
        assert!(
            tally.allowed.get(&algo).copied().unwrap_or(0) > 50
                && tally.denied.get(&algo).copied().unwrap_or(0) > 50,
            "the workload did not exercise {algo:?} both ways: {tally:?}"
        );
    }
    assert!(tally.never > 0 && tally.peeks > 0, "{tally:?}");
    tally
}

// ---------------------------------------------------------------------------------
// Comparing datasets

pub type Snapshot = Vec<(Vec<u8>, Option<Vec<u8>>, i64)>;

/// The keys of a snapshot that no expiry can touch before `cutoff_ms`.
pub fn stable(snap: &Snapshot, cutoff_ms: i64) -> BTreeMap<String, (Option<Vec<u8>>, i64)> {
    snap.iter()
        .filter(|(_, _, at)| *at == -1 || *at > cutoff_ms)
        .map(|(k, d, at)| (String::from_utf8_lossy(k).into_owned(), (d.clone(), *at)))
        .collect()
}

/// Asserts that the two datasets agree on every key not about to expire (each key of
/// `expected` having a TTL); returns the keys compared.
pub fn assert_same_keys(
    label: &str,
    expected: &Snapshot,
    actual: &Snapshot,
    now_ms: i64,
) -> BTreeMap<String, (Option<Vec<u8>>, i64)> {
    for (k, dump, at) in expected {
        let name = String::from_utf8_lossy(k);
        assert_ne!(*at, -1, "{label}: {name} has no TTL");
        if *at != -2 {
            assert!(dump.is_some(), "{label}: {name} has an expiry but no value");
        }
    }
    let cutoff = now_ms + MARGIN_MS;
    let want = stable(expected, cutoff);
    let got = stable(actual, cutoff);
    let mut problems = Vec::new();
    for (k, v) in &want {
        match got.get(k) {
            None => problems.push(format!("{k}: missing (expires at {})", v.1)),
            Some(g) if g.1 != v.1 => {
                problems.push(format!("{k}: expires at {} instead of {}", g.1, v.1))
            }
            Some(g) if g.0 != v.0 => problems.push(format!(
                "{k}: DUMP differs:\n  want {:?}\n  got  {:?}",
                v.0.as_deref().map(String::from_utf8_lossy),
                g.0.as_deref().map(String::from_utf8_lossy)
            )),
            Some(_) => {}
        }
    }
    for (k, g) in &got {
        if !want.contains_key(k) {
            problems.push(format!("{k}: unexpected key (expires at {})", g.1));
        }
    }
    assert!(
        problems.is_empty(),
        "{label}: {} of {} keys differ:\n{}",
        problems.len(),
        want.len(),
        problems.join("\n")
    );
    want
}

/// Asserts that the two datasets agree on every key not about to expire, and that
/// the comparison covered keys of every limiter.
pub fn assert_same_data(label: &str, expected: &Snapshot, actual: &Snapshot, now_ms: i64) -> usize {
    let want = assert_same_keys(label, expected, actual, now_ms);
    for algo in Algo::ALL {
        let n = want
            .keys()
            .filter(|k| k.ends_with(algo.tag()) || k.contains(&format!("{}:", algo.tag())))
            .count();
        assert!(
            n > 0,
            "{label}: no {algo:?} key was compared: {:?}",
            want.keys()
        );
    }
    want.len()
}

// ---------------------------------------------------------------------------------
// A workload that lands on the edges, compared after every step

/// One limiter of the stepwise workload: windows in whole milliseconds.
struct EdgeLimiter {
    algo: Algo,
    key: String,
    limit: u64,
    windows_ms: Vec<u64>,
    burst: Option<u64>,
}

/// The µs instants after `now` + 1 where `l`'s state changes under `window_ms`: where
/// an entry is exactly `window` old (trimmed; 1 µs earlier it is kept), a counter
/// window starts, a GCRA TAT is reached.
fn edges(c: &mut Connection, l: &EdgeLimiter, window_ms: u64, now: u64) -> Vec<u64> {
    let w = window_ms * 1000;
    let base: Vec<u64> = match l.algo {
        Algo::Log => {
            let scored: Vec<(String, u64)> = redis::cmd("ZRANGE")
                .arg(&l.key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(c)
                .expect("ZRANGE");
            scored.into_iter().map(|(_, s)| s + w).collect()
        }
        Algo::Count | Algo::Fixed => vec![(now / w + 1) * w],
        Algo::Gcra => {
            // The TAT, and about where one more unit starts to fit: one emission
            // interval past the TAT minus the burst's worth of intervals.
            let tat: Option<u64> = redis::cmd("GET").arg(&l.key).query(c).expect("GET");
            let interval = w.div_ceil(l.limit);
            let tolerance = (l.burst.unwrap_or(l.limit) * w).div_ceil(l.limit);
            tat.into_iter()
                .flat_map(|t| [t, (t + interval).saturating_sub(tolerance)])
                .collect()
        }
    };
    // Room for the instant before each, since NOW only moves forward.
    base.into_iter().filter(|&t| t > now + 1).collect()
}

/// What the stepwise workload exercised.
#[derive(Debug, Default)]
pub struct EdgeTally {
    pub allowed: BTreeMap<Algo, u64>,
    pub denied: BTreeMap<Algo, u64>,
    /// Steps whose NOW was an edge of the limiter called (see `edges`).
    pub on_edge: BTreeMap<Algo, u64>,
}

/// A seeded workload of all four limiters on explicit NOW instants, half of them chosen
/// on an edge of the limiter called (an RL.SLIDELOG entry exactly `window` old, or
/// 1 µs younger or older; a counter window's boundary; a GCRA TAT, and when one more
/// unit starts to fit), so that a trim or
/// a window change off by one microsecond leaves the replicated state different.
/// Windows of 1.5 s and more (the keys' TTLs, on the server clock, outlast the
/// comparisons' margin); several limiters use a short and a long window in turn, so
/// long-lived logs are trimmed. `after_step(c, step, line)` runs after every call.
pub fn edge_workload(
    c: &mut Connection,
    seed: u64,
    steps: usize,
    mut after_step: impl FnMut(&mut Connection, usize, &str),
) -> EdgeTally {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut limiters = Vec::new();
    for algo in Algo::ALL {
        for i in 0..4 {
            let windows_ms = if i == 3 {
                vec![1_500, 4_000, 20_000]
            } else {
                vec![rng.gen_range(15..=80) * 100]
            };
            limiters.push(EdgeLimiter {
                algo,
                key: format!("rl:{{edge{i}}}:{}", algo.tag()),
                // (GCRA: long emission intervals, so that its keys, which expire on the
                // server clock when their TAT is reached, live through many steps.)
                limit: rng.gen_range(1..=if algo == Algo::Gcra { 2 } else { 5 }),
                windows_ms,
                burst: (algo == Algo::Gcra && rng.gen_bool(0.5)).then(|| rng.gen_range(1..=2)),
            });
        }
    }
    let mut tally = EdgeTally::default();
    let mut now = T0 + rng.gen_range(0..1_000_000);
    for step in 0..steps {
        let mut l = &limiters[rng.gen_range(0..limiters.len())];
        let mut window_ms = l.windows_ms[rng.gen_range(0..l.windows_ms.len())];
        let mut on_edge = false;
        if rng.gen_bool(0.5) {
            // The nearest edge of any limiter of one kind, and that limiter is called
            // there. (NOW only moves forward, for every limiter: far jumps would
            // leave the others idle.)
            let algo = Algo::ALL[rng.gen_range(0..Algo::ALL.len())];
            let mut nearest: Option<(u64, usize, u64)> = None;
            for (i, cand) in limiters.iter().enumerate().filter(|(_, m)| m.algo == algo) {
                for &w in &cand.windows_ms {
                    for t in edges(c, cand, w, now) {
                        if nearest.is_none_or(|(best, _, _)| t < best) {
                            nearest = Some((t, i, w));
                        }
                    }
                }
            }
            if let Some((t, i, w)) = nearest {
                // On the edge, or 1 µs either side of it.
                let at = t + rng.gen_range(0..=2) - 1;
                (now, l, window_ms, on_edge) = (at, &limiters[i], w, true);
            }
        }
        if !on_edge && rng.gen_bool(0.3) {
            now += rng.gen_range(1..=20_000);
        }
        let mut line = format!("{} {} {} {window_ms}ms", l.algo.command(), l.key, l.limit);
        if let Some(b) = l.burst {
            line.push_str(&format!(" BURST {b}"));
        }
        let cost = match rng.gen_range(0..10) {
            0..=6 => 1,
            _ => rng.gen_range(2..=3),
        };
        line.push_str(&format!(" COST {cost} NOW {now}"));
        let reply = rl(c, &line);
        let outcome = if reply.0 == 1 {
            &mut tally.allowed
        } else {
            &mut tally.denied
        };
        *outcome.entry(l.algo).or_default() += 1;
        if on_edge {
            *tally.on_edge.entry(l.algo).or_default() += 1;
        }
        after_step(c, step, &line);
    }
    for algo in Algo::ALL {
        let n = |m: &BTreeMap<Algo, u64>| m.get(&algo).copied().unwrap_or(0);
        assert!(
            n(&tally.allowed) >= 10 && n(&tally.denied) >= 10 && n(&tally.on_edge) >= 10,
            "the edge workload did not exercise {algo:?}: {tally:?}"
        );
    }
    tally
}
