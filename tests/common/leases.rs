//! A stepwise RL.CONCURRENCY and RL.THROTTLE workload on explicit NOW instants, for
//! the replication and AOF suites: acquires (some retried), heartbeats, releases,
//! peeks and resets on a few keys, NOW often landing on a lease's expiry (or 1 µs
//! either side), one set with 2,500 expired leases that three calls reclaim (1,000
//! by exact members twice, then the rest by score), and RL.THROTTLE calls (the TAT in
//! ns, SET … PXAT) in between.

use rand::{rngs::StdRng, Rng, SeedableRng};

use super::*;

#[derive(Debug, Default)]
pub struct LeaseTally {
    pub allowed: u64,
    pub denied: u64,
    pub on_edge: u64,
    pub reclaimed: bool,
    pub throttles: u64,
}

fn expiries(c: &mut Connection, key: &str) -> Vec<u64> {
    let scored: Vec<(String, u64)> = redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE");
    scored.into_iter().map(|(_, s)| s).collect()
}

/// `after_step(c, step, line)` runs after every call.
pub fn lease_workload(
    c: &mut Connection,
    seed: u64,
    steps: usize,
    mut after_step: impl FnMut(&mut Connection, usize, &str),
) -> LeaseTally {
    let mut rng = StdRng::seed_from_u64(seed);
    let keys: Vec<(String, u64)> = (0..4)
        .map(|i| (format!("rl:{{lease{i}}}:conc"), rng.gen_range(1..=3)))
        .collect();
    let mut tally = LeaseTally::default();
    let mut now = T0 + rng.gen_range(0..1_000_000);
    // The big set: 2,500 leases that expire within 2.5 ms of NOW (while the key lives
    // 60 s on the server clock).
    let big = "rl:{bigl}:conc";
    let mut pipe = redis::pipe();
    for i in 0..2_500u64 {
        pipe.cmd("RL.CONCURRENCY")
            .arg(big)
            .arg(10_000)
            .arg("60s")
            .arg("ACQUIRE")
            .arg(format!("old{i}"))
            .arg("NOW")
            .arg(now - 60_000_000 + i);
    }
    let _: Vec<Reply> = pipe.query(c).expect("big set");
    after_step(c, 0, "2,500 acquires on the big set");
    for step in 1..steps {
        let (key, limit) = &keys[rng.gen_range(0..keys.len())];
        let ttl_ms = rng.gen_range(15..=60) * 100;
        if rng.gen_bool(0.4) {
            let edges: Vec<u64> = expiries(c, key)
                .into_iter()
                .filter(|&t| t > now + 1)
                .collect();
            if let Some(&t) = edges.first() {
                now = t + rng.gen_range(0..=2) - 1;
                tally.on_edge += 1;
            }
        } else if rng.gen_bool(0.5) {
            now += rng.gen_range(1..=1_500_000);
        }
        let id = format!("w{}", rng.gen_range(0..6));
        let op = match rng.gen_range(0..20) {
            0..=8 => format!("ACQUIRE {id}"),
            9..=12 => format!("HEARTBEAT {id}"),
            13..=16 => format!("RELEASE {id}"),
            17..=18 => "PEEK".to_string(),
            _ => "RESET".to_string(),
        };
        let (key, limit) = if (steps / 3..steps / 3 + 3).contains(&step) {
            // Past the big set's expiries: at most 1,000 reclaimed per call, as exact
            // members (ZREM) twice, then the last 500 by score (ZREMRANGEBYSCORE).
            tally.reclaimed = true;
            (big.to_string(), 10_000)
        } else {
            (key.clone(), *limit)
        };
        let line = if rng.gen_bool(0.25) {
            tally.throttles += 1;
            let q = rng.gen_range(0..=3);
            format!(
                "RL.THROTTLE rl:{{thr{}}} 2 1 {} {q} NOW {now}",
                step % 3,
                2 + step % 3
            )
        } else {
            format!("RL.CONCURRENCY {key} {limit} {ttl_ms}ms {op} NOW {now}")
        };
        let reply: Vec<i64> = query_line(c, &line)
            .and_then(|v| redis::from_redis_value(&v))
            .unwrap_or_else(|e| panic!("{line}: {e}"));
        // RL.CONCURRENCY's first integer is allowed; RL.THROTTLE's is limited.
        let allowed = if line.starts_with("RL.THROTTLE") {
            reply[0] == 0
        } else {
            reply[0] == 1
        };
        if allowed {
            tally.allowed += 1;
        } else {
            tally.denied += 1;
        }
        after_step(c, step, &line);
    }
    assert!(
        tally.allowed >= 20
            && tally.denied >= 10
            && tally.on_edge >= 20
            && tally.reclaimed
            && tally.throttles >= 30,
        "the lease workload did not exercise enough: {tally:?}"
    );
    tally
}
