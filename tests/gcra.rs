//! RL.GCRA through a real server (the pure decision has its own unit tests in
//! src/algo/gcra.rs): the rate is honoured over any interval, BURST 1 spaces requests
//! evenly, retry_after_ms is exact to the millisecond, PEEK writes nothing, the key is
//! the TAT in integer microseconds expiring when it is reached, and every limiter
//! reaches the AOF as its effects (core commands with absolute expiry instants), never
//! as an `RL.` command, with denied calls adding nothing.
//!
//! Every decision time is given with NOW. The keys still expire on the server's clock
//! (a TAT d µs ahead of NOW expires d from the server's now), so the randomized runs
//! use emission intervals of at least 100 ms and send each run as one pipeline, which
//! the server executes far faster than that.
mod common;
use common::*;

use rand::{rngs::StdRng, Rng, SeedableRng};

/// Sends many commands in one round trip and returns their replies in order.
fn pipeline(c: &mut Connection, lines: &[String]) -> Vec<Reply> {
    let mut p = redis::pipe();
    for line in lines {
        let cmd = p.cmd(line.split_whitespace().next().unwrap());
        for word in line.split_whitespace().skip(1) {
            cmd.arg(word);
        }
    }
    p.query(c)
        .unwrap_or_else(|e| panic!("pipeline starting {:?}: {e}", lines.first()))
}

/// The server's clock in milliseconds (TIME).
fn server_ms(c: &mut Connection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query(c).unwrap();
    secs * 1000 + micros / 1000
}

fn get(c: &mut Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pexpiretime(c: &mut Connection, key: &str) -> i64 {
    redis::cmd("PEXPIRETIME").arg(key).query(c).unwrap()
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

#[test]
fn key_holds_the_tat_in_microseconds_and_expires_when_it_is_reached() {
    let s = Server::start();
    let mut c = s.conn();
    // 10 per second, burst 3: an interval of exactly 100 ms.
    let expected = [(1, 2, 0, 100), (1, 1, 0, 200), (1, 0, 0, 300)];
    for (i, want) in expected.into_iter().enumerate() {
        let before = server_ms(&mut c);
        let got = rl(&mut c, &format!("RL.GCRA g 10 1 BURST 3 NOW {T0}"));
        let after = server_ms(&mut c);
        assert_eq!(got, want, "call {i}");
        let tat = T0 + 100_000 * (i as u64 + 1);
        assert_eq!(get(&mut c, "g"), Some(tat.to_string()));
        // NOW is a year behind the server clock: the TTL is still the TAT's distance
        // from NOW (d ms), counted from the server's now.
        let d = 100 * (i as i64 + 1);
        let at = pexpiretime(&mut c, "g");
        assert!(
            (before + d..=after + d).contains(&at),
            "call {i}: expires at {at}, expected {d} ms after {before}..{after}"
        );
        let pttl: i64 = redis::cmd("PTTL").arg("g").query(&mut c).unwrap();
        assert!((1..=d).contains(&pttl), "call {i}: PTTL {pttl}, want ≈ {d}");
    }

    // Denied: the key is left exactly as it was.
    let at = pexpiretime(&mut c, "g");
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA g 10 1 BURST 3 NOW {T0}")),
        (0, 0, 100, 300)
    );
    assert_eq!(get(&mut c, "g"), Some((T0 + 300_000).to_string()));
    assert_eq!(pexpiretime(&mut c, "g"), at);

    // 250 ms later the TAT is 50 ms ahead: admitted, and the new TAT (150 ms ahead)
    // expires 150 ms from the server's now.
    let now = T0 + 250_000;
    let before = server_ms(&mut c);
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA g 10 1 BURST 3 NOW {now}")),
        (1, 1, 0, 150)
    );
    let after = server_ms(&mut c);
    assert_eq!(get(&mut c, "g"), Some((T0 + 400_000).to_string()));
    let at = pexpiretime(&mut c, "g");
    assert!((before + 150..=after + 150).contains(&at), "{at}");

    // A fractional interval (1/3 s): the TAT is a whole microsecond, rounded up, and
    // the TTL is the distance rounded up to the millisecond (never expiring early).
    let before = server_ms(&mut c);
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA f 3 1 BURST 1 NOW {T0}")),
        (1, 0, 0, 334)
    );
    let after = server_ms(&mut c);
    assert_eq!(get(&mut c, "f"), Some((T0 + 333_334).to_string()));
    let at = pexpiretime(&mut c, "f");
    assert!((before + 334..=after + 334).contains(&at), "{at}");

    // Once the TAT is reached the limiter is at full budget: the state is worth no
    // more than an absent key, whatever the key still says.
    let reached = T0 + 400_000;
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.GCRA g 10 1 BURST 3 NOW {reached} PEEK")
        ),
        rl(
            &mut c,
            &format!("RL.GCRA fresh 10 1 BURST 3 NOW {reached} PEEK")
        )
    );
}

#[test]
fn steady_traffic_at_exactly_the_rate_is_always_admitted() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(11);
    // Whole and fractional intervals, burst 1 (the strictest) and larger; arrivals at
    // the exact schedule start + ceil(k × window / limit), from an arbitrary start.
    let cases: [(u64, &str, u64, u64); 7] = [
        (10, "1", 1, 1_000_000),
        (3, "1", 1, 1_000_000),
        (7, "1", 1, 1_000_000),
        (7, "3s", 4, 3_000_000),
        (6, "1500ms", 1, 1_500_000),
        (1000, "1", 1, 1_000_000),
        (999, "1", 1, 1_000_000),
    ];
    for (n, (limit, window, burst, w)) in cases.into_iter().enumerate() {
        for offset in [17, rng.gen_range(0..1_000_000)] {
            let key = format!("steady:{n}:{offset}");
            let start = T0 + offset;
            let lines: Vec<String> = (0..1_500u64)
                .map(|k| {
                    let t = start + (k * w).div_ceil(limit);
                    format!("RL.GCRA {key} {limit} {window} BURST {burst} NOW {t}")
                })
                .collect();
            for (k, reply) in pipeline(&mut c, &lines).into_iter().enumerate() {
                assert_eq!(
                    (reply.0, reply.2),
                    (1, 0),
                    "{limit}/{window} burst {burst} from +{offset} µs: arrival {k} denied: {reply:?}"
                );
            }
        }
    }
}

/// Over any interval [a, b] between two admitted requests, the units admitted in it
/// are at most BURST + limit × (b − a) / window. When window / limit is not a whole
/// number of microseconds the TAT is kept on whole microseconds, so 2 µs of rounding
/// are allowed there (and none otherwise).
#[test]
fn admitted_never_exceeds_burst_plus_rate_times_interval() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(42);
    let (mut admitted_total, mut denied_total) = (0, 0);
    for case in 0..40 {
        let limit: u64 = rng.gen_range(1..=20);
        let window_ms: u64 = rng.gen_range(2_000..=30_000);
        let burst: u64 = rng.gen_range(1..=5);
        let (w, l) = (u128::from(window_ms) * 1000, u128::from(limit));
        let interval = window_ms * 1000 / limit;
        let key = format!("bound:{case}");
        let mut t = T0 + rng.gen_range(0..1_000_000);
        let arrivals: Vec<(u64, u64)> = (0..250)
            .map(|_| {
                t += rng.gen_range(0..interval * 2);
                (t, rng.gen_range(1..=burst))
            })
            .collect();
        let lines: Vec<String> = arrivals
            .iter()
            .map(|(t, cost)| {
                format!("RL.GCRA {key} {limit} {window_ms}ms BURST {burst} COST {cost} NOW {t}")
            })
            .collect();
        let replies = pipeline(&mut c, &lines);
        let admitted: Vec<(u64, u64)> = arrivals
            .iter()
            .zip(&replies)
            .filter(|(_, r)| r.0 == 1)
            .map(|(a, _)| *a)
            .collect();
        admitted_total += admitted.len();
        denied_total += arrivals.len() - admitted.len();
        let slack = if w % l == 0 { 0 } else { 2 };
        for i in 0..admitted.len() {
            let mut units = 0u128;
            for a in &admitted[i..] {
                units += u128::from(a.1);
                let span = u128::from(a.0 - admitted[i].0);
                assert!(
                    units * w <= u128::from(burst) * w + (span + slack) * l,
                    "case {case} ({limit}/{window_ms}ms burst {burst}): {units} units \
                     admitted within {span} µs from {}",
                    admitted[i].0
                );
            }
        }
    }
    // The traffic really pushed against the limit, and the limiter really admitted.
    assert!(admitted_total > 2_000, "{admitted_total}");
    assert!(denied_total > 2_000, "{denied_total}");
}

#[test]
fn burst_one_spaces_requests_evenly() {
    let s = Server::start();
    let mut c = s.conn();
    // Someone hammering every millisecond for 2 s at 4/s gets exactly one per 250 ms,
    // and each denial says exactly when the next one passes.
    let lines: Vec<String> = (0..2_000u64)
        .map(|ms| format!("RL.GCRA even 4 1 BURST 1 NOW {}", T0 + ms * 1000))
        .collect();
    let replies = pipeline(&mut c, &lines);
    let admitted: Vec<u64> = (0..2_000u64)
        .filter(|&ms| replies[ms as usize].0 == 1)
        .collect();
    assert_eq!(admitted, vec![0, 250, 500, 750, 1000, 1250, 1500, 1750]);
    for (ms, reply) in replies.iter().enumerate() {
        let ms = ms as i64;
        if reply.0 == 1 {
            assert_eq!(*reply, (1, 0, 0, 250), "at {ms} ms");
        } else {
            let next = (ms / 250 + 1) * 250;
            assert_eq!(*reply, (0, 0, next - ms, next - ms), "at {ms} ms");
        }
    }

    // 3/s is a fractional interval (333,333.3 µs): each admission comes at the first
    // hammer arrival (whole milliseconds) after the previous one plus the interval, so
    // every 334 ms, evenly (a late arrival earns no credit with BURST 1).
    let lines: Vec<String> = (0..3_000u64)
        .map(|ms| format!("RL.GCRA third 3 1 BURST 1 NOW {}", T0 + ms * 1000))
        .collect();
    let replies = pipeline(&mut c, &lines);
    let admitted: Vec<u64> = (0..3_000u64)
        .filter(|&ms| replies[ms as usize].0 == 1)
        .collect();
    assert_eq!(admitted, (0..9).map(|k| k * 334).collect::<Vec<u64>>());
}

#[test]
fn retry_after_is_exact_to_the_millisecond() {
    let s = Server::start();
    let mut c = s.conn();
    let mut rng = StdRng::seed_from_u64(7);
    let mut denied_cases = 0;
    for case in 0..150 {
        let limit: u64 = rng.gen_range(1..=50);
        let window_ms: u64 = rng.gen_range(5_000..=30_000);
        let burst: u64 = rng.gen_range(1..=5);
        let interval = window_ms * 1000 / limit;
        let key = format!("retry:{case}");
        let rate = format!("{limit} {window_ms}ms BURST {burst}");
        let mut t = T0 + rng.gen_range(0..1_000_000);
        let mut lines = vec![];
        for _ in 0..rng.gen_range(1..=6) {
            t += rng.gen_range(0..interval);
            let cost = rng.gen_range(1..=burst);
            lines.push(format!("RL.GCRA {key} {rate} COST {cost} NOW {t}"));
        }
        pipeline(&mut c, &lines);
        let now = t + rng.gen_range(0..interval);
        let cost = rng.gen_range(1..=burst);
        let request =
            |at: u64, peek: &str| format!("RL.GCRA {key} {rate} COST {cost} NOW {at}{peek}");
        let reply = rl(&mut c, &request(now, ""));
        if reply.0 == 1 {
            assert_eq!(reply.2, 0);
            continue;
        }
        denied_cases += 1;
        let retry = reply.2;
        assert!(retry >= 1, "case {case}: denied with retry {retry}");
        let at = now + retry as u64 * 1000;
        let probes = pipeline(
            &mut c,
            &[
                request(at - 1000, " PEEK"),
                request(at, " PEEK"),
                request(at, ""),
            ],
        );
        let context = format!("case {case}: {rate} COST {cost} at {now}: retry {retry}");
        assert_eq!(probes[0].0, 0, "{context}: admitted 1 ms early");
        assert_eq!(probes[0].2, 1, "{context}: 1 ms early the wait is 1 ms");
        assert_eq!(probes[1].0, 1, "{context}: PEEK not admitted on time");
        assert_eq!(probes[2].0, 1, "{context}: not admitted on time");
    }
    assert!(denied_cases >= 40, "{denied_cases}");
}

/// The admission boundary: with a whole-microsecond interval, exactly one interval
/// after the burst is spent and not a microsecond earlier; with a fractional one,
/// within the 1 µs of rounding and without drift.
#[test]
fn admission_boundary_is_exact_to_the_microsecond() {
    let s = Server::start();
    let mut c = s.conn();
    // 10/s, burst 3, full at T0: the next unit fits at T0 + 100 ms exactly.
    rl(&mut c, &format!("RL.GCRA b 10 1 BURST 3 COST 3 NOW {T0}"));
    let at = |t: u64| format!("RL.GCRA b 10 1 BURST 3 NOW {t} PEEK");
    assert_eq!(rl(&mut c, &at(T0 + 99_999)), (0, 0, 1, 201));
    // The TAT is 200 ms ahead: the PEEK's reset is the state's, not its unit's.
    assert_eq!(rl(&mut c, &at(T0 + 100_000)), (1, 0, 0, 200));
    // 3/s, burst 1: the TAT walks the exact thirds rounded up (T0 + 333,334 µs, then
    // + 666,667, + 1,000,000: no drift). Steps of 333,333 and 333,334 µs alternate
    // against a tolerance of 333,334 µs, so a request may pass up to 1 µs before the
    // stored TAT (src/algo/gcra.rs keeps within 1 µs of the exact schedule), never 2.
    rl(&mut c, &format!("RL.GCRA t 3 1 BURST 1 NOW {T0}"));
    let at = |t: u64| format!("RL.GCRA t 3 1 BURST 1 NOW {t}");
    assert_eq!(get(&mut c, "t"), Some((T0 + 333_334).to_string()));
    assert_eq!(rl(&mut c, &format!("{} PEEK", at(T0 + 333_332))).0, 0);
    assert_eq!(rl(&mut c, &at(T0 + 333_334)).0, 1);
    assert_eq!(get(&mut c, "t"), Some((T0 + 666_667).to_string()));
    assert_eq!(rl(&mut c, &format!("{} PEEK", at(T0 + 666_665))).0, 0);
    assert_eq!(rl(&mut c, &at(T0 + 666_667)).0, 1);
    assert_eq!(get(&mut c, "t"), Some((T0 + 1_000_000).to_string()));
}

#[test]
fn cost_above_burst_is_never_admitted() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA c 10 1 BURST 3 COST 4 NOW {T0}")),
        (0, 3, -1, 0)
    );
    assert!(!exists(&mut c, "c"));
    // Even far in the future, with nothing else arriving.
    let later = T0 + 3_600_000_000;
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.GCRA c 10 1 BURST 3 COST 4 NOW {later}")
        ),
        (0, 3, -1, 0)
    );
    // Without BURST the burst is the limit.
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA c 10 1 COST 11 NOW {T0}")).2,
        -1
    );
    assert!(!exists(&mut c, "c"));
    // COST = BURST is the largest request that fits.
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA c 10 1 BURST 3 COST 3 NOW {T0}")),
        (1, 0, 0, 300)
    );
    // With state: still -1, and the state is untouched.
    let before = snapshot(&mut c);
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA c 10 1 BURST 3 COST 4 NOW {T0}")),
        (0, 0, -1, 300)
    );
    assert_eq!(snapshot(&mut c), before);
}

#[test]
fn peek_writes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    // On an absent key: the decision, but no key.
    assert_eq!(
        rl(&mut c, &format!("RL.GCRA p 10 1 BURST 3 NOW {T0} PEEK")),
        (1, 2, 0, 0)
    );
    assert!(!exists(&mut c, "p"));

    rl(&mut c, &format!("RL.GCRA p 10 1 BURST 3 NOW {T0}"));
    for (call, now) in [(1, T0), (2, T0), (3, T0), (4, T0 + 100_000)] {
        let before = snapshot(&mut c);
        let peeked = rl(&mut c, &format!("RL.GCRA p 10 1 BURST 3 NOW {now} PEEK"));
        // Options in any order, PEEK first.
        let peeked_again = rl(&mut c, &format!("RL.GCRA p 10 1 PEEK NOW {now} BURST 3"));
        assert_eq!(
            snapshot(&mut c),
            before,
            "call {call}: PEEK changed the keyspace"
        );
        assert_eq!(peeked_again, peeked);
        // PEEK answered what the real call then does; its reset is the TAT's lead
        // before the call, the spend's after it (one interval more when admitted).
        let tat: u64 = get(&mut c, "p").and_then(|t| t.parse().ok()).unwrap_or(0);
        let real = rl(&mut c, &format!("RL.GCRA p 10 1 BURST 3 NOW {now}"));
        let lead_ms = tat.saturating_sub(now).div_ceil(1000) as i64;
        assert_eq!(peeked, (real.0, real.1, real.2, lead_ms), "call {call}");
        let spent = if real.0 == 1 { 100 } else { 0 };
        assert_eq!(real.3, lead_ms + spent, "call {call}");
    }
    // The last two were a denial (full at T0) and an admission (100 ms later); the
    // TAT is now 400 ms after T0.
    assert_eq!(get(&mut c, "p"), Some((T0 + 400_000).to_string()));
    let before = snapshot(&mut c);
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.GCRA p 10 1 BURST 3 COST 2 NOW {T0} PEEK")
        ),
        (0, 0, 300, 400)
    );
    assert_eq!(snapshot(&mut c), before);
}

// ---------------------------------------------------------------------------------
// Effects in the AOF.

/// A server whose AOF is written before each reply is sent.
fn aof_server() -> Server {
    Server::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ])
}

/// The raw bytes of the incremental AOF files.
fn aof_bytes(s: &Server) -> Vec<u8> {
    let dir = s.dir.path().join("appendonlydir");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    assert!(!files.is_empty(), "no *.incr.aof in {}", dir.display());
    files.sort();
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect()
}

/// Parses the AOF as the commands it holds (each an array of bulk strings), leaving out
/// SELECT and the MULTI/EXEC that wrap a command's several effects.
fn aof_commands(s: &Server) -> Vec<Vec<String>> {
    fn line<'a>(bytes: &'a [u8], at: &mut usize) -> &'a str {
        let end = bytes[*at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("unterminated AOF line")
            + *at;
        let text = std::str::from_utf8(&bytes[*at..end]).unwrap();
        *at = end + 2;
        text
    }
    let bytes = aof_bytes(s);
    let mut at = 0;
    let mut out = vec![];
    while at < bytes.len() {
        let head = line(&bytes, &mut at);
        let n: usize = head
            .strip_prefix('*')
            .expect("AOF entry not an array")
            .parse()
            .unwrap();
        let mut command = vec![];
        for _ in 0..n {
            let len: usize = line(&bytes, &mut at)
                .strip_prefix('$')
                .expect("AOF argument not a bulk string")
                .parse()
                .unwrap();
            command.push(String::from_utf8_lossy(&bytes[at..at + len]).into_owned());
            assert_eq!(&bytes[at + len..at + len + 2], b"\r\n");
            at += len + 2;
        }
        let name = command[0].to_ascii_uppercase();
        if !matches!(name.as_str(), "SELECT" | "MULTI" | "EXEC") {
            out.push(command);
        }
    }
    out
}

/// Tracks the AOF: each `step` writes a marker key and returns the commands that
/// reached the AOF since the previous step (the marker proves everything before it is
/// in the file).
struct Aof {
    seen: usize,
    markers: u64,
}

impl Aof {
    fn new() -> Aof {
        Aof {
            seen: 0,
            markers: 0,
        }
    }

    fn step(&mut self, s: &Server, c: &mut Connection) -> Vec<Vec<String>> {
        self.markers += 1;
        let value = self.markers.to_string();
        let _: () = redis::cmd("SET")
            .arg("aof-marker")
            .arg(&value)
            .query(c)
            .unwrap();
        let all = aof_commands(s);
        let last = all.last().expect("empty AOF").clone();
        assert_eq!(
            last,
            ["SET", "aof-marker", value.as_str()],
            "marker not last"
        );
        let new = all[self.seen..all.len() - 1].to_vec();
        self.seen = all.len();
        new
    }
}

/// The whole AOF names no limiter command, and reloading it gives back exactly the
/// same keys, values and expiry instants.
fn assert_aof_only_core_and_reloads(s: &Server, c: &mut Connection) {
    let raw = String::from_utf8_lossy(&aof_bytes(s)).to_ascii_uppercase();
    assert!(
        !raw.contains("RL."),
        "an RL. command reached the AOF:\n{raw}"
    );
    let before = snapshot(c);
    let _: () = redis::cmd("DEBUG").arg("LOADAOF").query(c).unwrap();
    assert_eq!(snapshot(c), before, "reloading the AOF changed the data");
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// An absolute expiry instant (ms) written `d` ms after the server's now, which was
/// between `before` and `after`.
fn assert_instant(at: &str, before: i64, after: i64, d: i64) {
    let at: i64 = at.parse().unwrap();
    assert!(
        (before + d..=after + d).contains(&at),
        "expiry instant {at} not {d} ms after {before}..{after}"
    );
}

#[test]
fn gcra_reaches_the_aof_as_set_pxat() {
    let s = aof_server();
    let mut c = s.conn();
    let mut aof = Aof::new();
    aof.step(&s, &mut c);

    for (i, tat) in [T0 + 100_000, T0 + 200_000].into_iter().enumerate() {
        let before = server_ms(&mut c);
        assert_eq!(
            rl(&mut c, &format!("RL.GCRA rl:g 10 1 BURST 2 NOW {T0}")).0,
            1
        );
        let after = server_ms(&mut c);
        let new = aof.step(&s, &mut c);
        assert_eq!(new.len(), 1, "{new:?}");
        let set = &new[0];
        assert_eq!(
            set[..4],
            cmd(&["SET", "rl:g", &tat.to_string(), "PXAT"]),
            "{set:?}"
        );
        assert_eq!(set.len(), 5, "{set:?}");
        assert_instant(&set[4], before, after, 100 * (i as i64 + 1));
        // The instant in the AOF is the primary's own expiry instant.
        assert_eq!(set[4], pexpiretime(&mut c, "rl:g").to_string());
    }

    // Denied, cost above burst, and PEEK (allowed or not): nothing reaches the AOF.
    for line in [
        format!("RL.GCRA rl:g 10 1 BURST 2 NOW {T0}"),
        format!("RL.GCRA rl:g 10 1 BURST 2 COST 3 NOW {T0}"),
        format!("RL.GCRA rl:g 10 1 BURST 2 NOW {T0} PEEK"),
        format!("RL.GCRA rl:g 10 1 BURST 2 NOW {} PEEK", T0 + 500_000),
        format!("RL.GCRA rl:other 10 1 BURST 2 NOW {T0} PEEK"),
    ] {
        rl(&mut c, &line);
        assert_eq!(aof.step(&s, &mut c), Vec::<Vec<String>>::new(), "{line}");
    }

    assert_aof_only_core_and_reloads(&s, &mut c);
    assert_eq!(get(&mut c, "rl:g"), Some((T0 + 200_000).to_string()));
}

#[test]
fn slidelog_reaches_the_aof_as_zadd_zremrangebyscore_pexpireat() {
    let s = aof_server();
    let mut c = s.conn();
    let mut aof = Aof::new();
    aof.step(&s, &mut c);
    let members = |c: &mut Connection| -> Vec<String> {
        redis::cmd("ZRANGE")
            .arg("rl:z")
            .arg(0)
            .arg(-1)
            .query(c)
            .unwrap()
    };

    // Admitted: ZADD of both units at now, then the window as an absolute instant.
    let before = server_ms(&mut c);
    assert_eq!(
        rl(&mut c, &format!("RL.SLIDELOG rl:z 2 1 COST 2 NOW {T0}")).0,
        1
    );
    let after = server_ms(&mut c);
    let new = aof.step(&s, &mut c);
    assert_eq!(new.len(), 2, "{new:?}");
    let m = members(&mut c);
    let t0 = T0.to_string();
    let mut zadd = new[0].clone();
    assert_eq!(zadd[..2], cmd(&["ZADD", "rl:z"]), "{zadd:?}");
    // Score/member pairs, in whatever order the module added them.
    let mut pairs: Vec<(String, String)> = zadd
        .split_off(2)
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    pairs.sort();
    assert_eq!(
        pairs,
        m.iter()
            .map(|m| (t0.clone(), m.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(new[1][..2], cmd(&["PEXPIREAT", "rl:z"]), "{new:?}");
    assert_instant(&new[1][2], before, after, 1000);

    // Denied: nothing added or removed; only the TTL the script would also refresh.
    let before = server_ms(&mut c);
    assert_eq!(
        rl(
            &mut c,
            &format!("RL.SLIDELOG rl:z 2 1 NOW {}", T0 + 500_000)
        )
        .0,
        0
    );
    let after = server_ms(&mut c);
    let new = aof.step(&s, &mut c);
    assert_eq!(new.len(), 1, "{new:?}");
    assert_eq!(new[0][..2], cmd(&["PEXPIREAT", "rl:z"]));
    assert_instant(&new[0][2], before, after, 1000);

    // A window later: the old entries are trimmed (score ≤ now − window), one added.
    let now = T0 + 1_000_000;
    rl(&mut c, &format!("RL.SLIDELOG rl:z 2 1 NOW {now}"));
    let new = aof.step(&s, &mut c);
    assert_eq!(new.len(), 3, "{new:?}");
    assert_eq!(new[0].len(), 4, "{new:?}");
    assert_eq!(new[0][..2], cmd(&["ZREMRANGEBYSCORE", "rl:z"]));
    assert!(["0", "-inf"].contains(&new[0][2].as_str()), "{new:?}");
    assert_eq!(new[0][3], T0.to_string());
    let m = members(&mut c);
    assert_eq!(m.len(), 1);
    assert_eq!(new[1], cmd(&["ZADD", "rl:z", &now.to_string(), &m[0]]));
    assert_eq!(new[2][..2], cmd(&["PEXPIREAT", "rl:z"]));

    // PEEK: nothing.
    rl(&mut c, &format!("RL.SLIDELOG rl:z 2 1 NOW {now} PEEK"));
    assert_eq!(aof.step(&s, &mut c), Vec::<Vec<String>>::new());

    assert_aof_only_core_and_reloads(&s, &mut c);
}

#[test]
fn fixed_and_slidecount_reach_the_aof_as_incrby_pexpireat() {
    let s = aof_server();
    let mut c = s.conn();
    let mut aof = Aof::new();
    aof.step(&s, &mut c);
    let now = T0 + 2_500_000;
    let fixed_key = format!("rl:f:{}", T0 / 1_000_000);
    let count_key = format!("rl:c:{}", now / 1_500_000);
    for (line, key, window_ms) in [
        (
            format!("RL.FIXED rl:f 3 10 COST 2 NOW {now}"),
            &fixed_key,
            10_000,
        ),
        (
            format!("RL.SLIDECOUNT rl:c 3 1500ms COST 2 NOW {now}"),
            &count_key,
            1_500,
        ),
    ] {
        // Creates the counter: INCRBY, then the TTL of 2 windows as an instant.
        let before = server_ms(&mut c);
        assert_eq!(rl(&mut c, &line).0, 1, "{line}");
        let after = server_ms(&mut c);
        let new = aof.step(&s, &mut c);
        assert_eq!(new.len(), 2, "{line}: {new:?}");
        assert_eq!(new[0], cmd(&["INCRBY", key, "2"]), "{line}");
        assert_eq!(new[1][..2], cmd(&["PEXPIREAT", key]), "{line}");
        assert_instant(&new[1][2], before, after, 2 * window_ms);
        assert_eq!(new[1][2], pexpiretime(&mut c, key).to_string());

        // Adds to it: INCRBY only, the expiry stays.
        let more = line.replace("COST 2", "COST 1");
        assert_eq!(rl(&mut c, &more).0, 1, "{more}");
        assert_eq!(
            aof.step(&s, &mut c),
            vec![cmd(&["INCRBY", key, "1"])],
            "{more}"
        );

        // Denied and PEEK: nothing.
        for quiet in [more.clone(), format!("{more} PEEK")] {
            rl(&mut c, &quiet);
            assert_eq!(aof.step(&s, &mut c), Vec::<Vec<String>>::new(), "{quiet}");
        }
    }
    assert_aof_only_core_and_reloads(&s, &mut c);
}
