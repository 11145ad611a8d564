//! Randomised robustness tests over everything a request can reach without Redis:
//! argument parsing and every decision function, fed arbitrary bytes and extreme
//! integers. No input may panic (overflow checks are on, so a wrapped number would
//! panic too), and every input is either a decision or an error.
//!
//! `make test` runs a short pass; `make fuzz` runs a long one (RL_FUZZ_CASES).

use rand::{rngs::StdRng, Rng, SeedableRng};

use crate::algo::block;
use crate::algo::slidelog::tests::VecLog;
use crate::algo::state::{Held, Stored};
use crate::algo::{fixed, gcra, slidecount, slidelog, Decision, Write};
use crate::args::{parse_all, parse_counter, parse_limiter, parse_window, MAX_LIMITS};
use crate::layout::{counter_key, fixed_window_name, has_hash_tag, log_member};
use crate::limit::{Block, Growth, Mode, Spec, Window, MAX_AMOUNT};
use crate::pseudonym::{canonical_identity, pseudonym};

fn cases() -> u64 {
    std::env::var("RL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn seed() -> u64 {
    std::env::var("RL_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed)
}

const WORDS: &[&str] = &[
    "1",
    "2",
    "fixed",
    "SLIDELOG",
    "slidecount",
    "gcra",
    "REFUND",
    "reset",
    "COST",
    "NOW",
    "PEEK",
    "BURST",
    "cost",
    "now",
    "peek",
    "Burst",
    "REFILL",
    "refill",
    "tokenbucket",
    "BLOCK",
    "block",
    "EXTEND",
    "BACKOFF",
    "backoff",
    "STRIKES",
    "IMPOSE",
    "impose",
    "counter",
    "slidewindow",
    "COUNTALL",
    "countall",
    "RENEW",
    "renew",
    "ESCALATE",
    "escalate",
    "9223372036854775ms",
    "9223372036854776ms",
    "1764480000000000:3",
    "1764480000000000:",
    ":1",
    "0",
    "1",
    "-1",
    "+1",
    "10",
    "60s",
    "1500ms",
    "0ms",
    "ms",
    "s",
    "",
    " ",
    "1e3",
    "1.5",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "1000000000000000",
    "1000000000000001",
    "1764480000000000",
    "1764480000",
    "1764480000000",
    "9007199254740991",
    "9007199254740992",
    "315360000s",
    "315360001s",
    "\u{0}",
    "\r\n",
    "ÿ",
];

fn token(rng: &mut StdRng) -> Vec<u8> {
    if rng.gen_bool(0.7) {
        WORDS[rng.gen_range(0..WORDS.len())].as_bytes().to_vec()
    } else {
        let n = rng.gen_range(0..24);
        (0..n).map(|_| rng.gen()).collect()
    }
}

fn extreme(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..6) {
        0 => 0,
        1 => u64::MAX,
        2 => rng.gen_range(0..1_000),
        3 => MAX_AMOUNT,
        4 => rng.gen(),
        _ => rng.gen_range(0..=MAX_AMOUNT),
    }
}

/// An argument as the parser lets it through: 1 to MAX_AMOUNT, extremes favoured.
fn amount(rng: &mut StdRng) -> u64 {
    extreme(rng).clamp(1, MAX_AMOUNT)
}

/// A window up to `longest` ms, the algorithm's bound.
fn any_window(rng: &mut StdRng, longest: u64) -> Window {
    let ms = match rng.gen_range(0..4) {
        0 => 1,
        1 => crate::limit::MAX_WINDOW_MS,
        2 => longest,
        _ => rng.gen_range(1..=longest),
    };
    Window::from_ms_upto(ms, longest).unwrap_or(Window::TEN_SECONDS)
}

/// A decision time as the parser (or the server clock) can give one.
fn any_now(rng: &mut StdRng) -> u64 {
    match rng.gen_range(0..3) {
        0 => crate::limit::MIN_NOW_US,
        1 => crate::limit::MAX_NOW_US,
        _ => rng.gen_range(crate::limit::MIN_NOW_US..=crate::limit::MAX_NOW_US),
    }
}

fn check(d: Decision, limit: u64, cost: u64) {
    if d.allowed {
        assert_eq!(d.retry_after_ms, 0, "{d:?}");
        assert!(cost <= limit);
    } else {
        assert!(d.retry_after_ms == -1 || d.retry_after_ms > 0, "{d:?}");
    }
    assert!(d.remaining <= limit, "{d:?}");
    if cost > limit {
        assert!(!d.allowed && d.retry_after_ms == -1, "{d:?}");
    }
}

#[test]
fn parsing_never_panics() {
    let mut rng = StdRng::seed_from_u64(seed());
    for _ in 0..cases() {
        let n = rng.gen_range(0..9);
        let args: Vec<Vec<u8>> = (0..n).map(|_| token(&mut rng)).collect();
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let accepts = crate::args::Accepts {
            burst: rng.gen(),
            refill: rng.gen(),
            counts: rng.gen(),
            longest_window_ms: if rng.gen() {
                crate::limit::MAX_LONG_WINDOW_MS
            } else {
                crate::limit::MAX_WINDOW_MS
            },
        };
        if let Ok(a) = parse_limiter("rl.fuzz", &refs, accepts) {
            let spec = a.spec;
            assert!(accepts.counts || !(spec.count_all || spec.renew || spec.escalate));
            assert!(!(spec.renew && spec.escalate));
            assert!(spec.window.ms() <= accepts.longest_window_ms);
            assert!(accepts.refill || spec.refill.is_none());
            assert!(
                (1..=MAX_AMOUNT).contains(&spec.limit) && (1..=MAX_AMOUNT).contains(&spec.cost)
            );
            assert!(spec.window.ms() >= 1);
            check_block_args(&spec, a.mode);
        }
        if let Ok(all) = parse_all(&refs, |n| {
            crate::command::joinable(&crate::commands::COMMANDS, n)
        }) {
            let limits = all.limits;
            assert!(!limits.is_empty() && limits.len() as u64 <= MAX_LIMITS);
            assert!(limits.iter().all(|l| l.key < refs.len()));
            assert!(all.lease.is_none_or(|at| at < refs.len()));
            for l in &limits {
                assert!(!(l.spec.count_all || l.spec.renew));
                check_block_args(&l.spec, Mode::Spend);
                assert!(l.spec.block.is_none() || l.algorithm.check_block().is_ok());
            }
            if all.mode == Mode::Impose {
                assert!(limits.iter().any(|l| l.spec.block.is_some()));
            }
        }
        // Every command of the table parses its own arguments without a panic, and
        // a member it names is one of them.
        for a in crate::commands::COMMANDS.iter().filter_map(|c| c.algorithm) {
            if let Ok(r) = a.parse("rl.fuzz", &refs) {
                assert!(r.member.is_none_or(|at| at < refs.len()));
            }
        }
        let one = token(&mut rng);
        let _ = parse_window(&one);
        let _ = parse_counter(&one);
        let _ = has_hash_tag(&one);
        let _ = canonical_identity(&one, rng.gen_bool(0.5).then(|| rng.gen_range(1..=128)));
        let _ = pseudonym(&one, &one, Some(&one), Some(64), any_now(&mut rng));
        let _ = counter_key(&one, rng.gen());
        let _ = log_member(rng.gen(), rng.gen());
        let _ = fixed_window_name(
            rng.gen(),
            any_window(&mut rng, crate::limit::MAX_LONG_WINDOW_MS),
        );
        if let Some(h) = Held::parse(&one) {
            assert_eq!(Held::parse(&h.format(true)), Some(h));
        }
    }
}

/// What the parser lets through for BLOCK: a bound no shorter than the block, and
/// IMPOSE only with a BLOCK.
fn check_block_args(spec: &Spec, mode: Mode) {
    if let Some(b) = spec.block {
        assert!(b.duration.ms() >= 1);
        if let Growth::Backoff { max } = b.growth {
            assert!(max.ms() >= b.duration.ms());
        }
    }
    if mode == Mode::Impose {
        assert!(spec.block.is_some());
    }
}

/// A block of any length, growth and count, at any time: a call while it holds is
/// denied with nothing left and a wait to its end; a write never shortens it, never
/// drops a strike, and a backoff's is never past its bound.
#[test]
fn blocks_never_panic_and_never_shorten() {
    let mut rng = StdRng::seed_from_u64(seed() ^ 3);
    for _ in 0..cases() {
        let duration = any_window(&mut rng, crate::limit::MAX_WINDOW_MS);
        let max = any_window(&mut rng, crate::limit::MAX_WINDOW_MS);
        let growth = match rng.gen_range(0..3) {
            0 => Growth::Fixed,
            1 => Growth::Extend,
            _ => Growth::Backoff {
                max: if max.ms() >= duration.ms() {
                    max
                } else {
                    duration
                },
            },
        };
        let b = Block {
            duration,
            growth,
            strikes: rng.gen(),
        };
        let now = any_now(&mut rng);
        // What a read lets through: an end and a count within the block's layout.
        let held = Held {
            end: now
                .saturating_add(extreme(&mut rng).max(1))
                .min(crate::limit::MAX_END_US)
                .max(now + 1),
            strikes: extreme(&mut rng).min(MAX_AMOUNT),
        };
        let mode = [Mode::Spend, Mode::Peek, Mode::Refund][rng.gen_range(0..3)];
        let (d, after) = block::while_blocked(&b, held, mode, now);
        assert!(
            !d.allowed && d.remaining == 0 && d.retry_after_ms > 0,
            "{d:?}"
        );
        assert_eq!(u64::try_from(d.retry_after_ms).ok(), Some(d.reset_after_ms));
        match after {
            Some(a) => {
                assert!(mode == Mode::Spend && b.counts());
                assert!(a.end >= held.end && a.strikes >= held.strikes);
                if let Growth::Backoff { max } = growth {
                    assert!(a.end <= held.end.max(now + max.us()));
                }
                assert_eq!(Held::parse(&a.format(true)), Some(a));
            }
            None => assert!(mode != Mode::Spend || !b.counts()),
        }
        let started = block::start(&b, now, 1);
        assert!(started.holds(now) && started.end == now + duration.us());
    }
}

#[test]
fn decisions_never_panic_and_stay_consistent() {
    let mut rng = StdRng::seed_from_u64(seed() ^ 1);
    for _ in 0..cases() {
        // Arguments within what the parser accepts; stored state entirely arbitrary.
        let (limit, cost) = (amount(&mut rng), amount(&mut rng));
        let window = any_window(&mut rng, crate::limit::MAX_WINDOW_MS);
        let now = any_now(&mut rng);

        check(
            fixed::decide(extreme(&mut rng), limit, cost, window, now),
            limit,
            cost,
        );

        let counters = slidecount::Counters {
            current: extreme(&mut rng),
            previous: extreme(&mut rng),
        };
        check(
            slidecount::decide(counters, limit, cost, window, now),
            limit,
            cost,
        );

        let entries: Vec<i64> = (0..rng.gen_range(0..6))
            .map(|_| match rng.gen_range(0..4) {
                0 => i64::MIN,
                1 => i64::MAX,
                2 => now as i64 - rng.gen_range(0..2 * window.us() as i64),
                _ => rng.gen(),
            })
            .collect();
        let log = VecLog::in_window(&entries, now, window);
        check(
            slidelog::decide(&log, limit, cost, window, now),
            limit,
            cost,
        );

        let burst = amount(&mut rng);
        let rate = gcra::Rate {
            limit,
            window,
            burst,
        };
        let tat = rng.gen_bool(0.8).then(|| extreme(&mut rng));
        let (d, new_tat) = gcra::decide(tat, rate, cost, now);
        check(d, burst, cost);
        // Admitted with no TAT to store happens only when the TAT would not fit in
        // 64 bits (an absurd BURST × window); the command then answers an overflow error.
        if !d.allowed {
            assert!(new_tat.is_none());
        }
    }
}

/// Every algorithm of the command table, through the engine's interface: arbitrary
/// stored state never panics, decisions stay consistent, and the writes asked for
/// name the algorithm's own keys.
#[test]
fn every_algorithm_of_the_table_decides_and_writes_consistently() {
    let mut rng = StdRng::seed_from_u64(seed() ^ 2);
    let algorithms: Vec<_> = crate::commands::COMMANDS
        .iter()
        .filter_map(|c| c.algorithm)
        .collect();
    assert!(algorithms.len() >= 4);
    for _ in 0..cases() / 4 {
        for &a in &algorithms {
            // THROTTLE admits max_burst + 1 at once (redis-cell's limit).
            let throttle = a.name() == "THROTTLE";
            let spec = Spec {
                limit: amount(&mut rng),
                window: any_window(&mut rng, a.longest_window_ms()),
                cost: if rng.gen() { 1 } else { amount(&mut rng) },
                burst: ((a.accepts_burst() || throttle) && rng.gen()).then(|| amount(&mut rng)),
                refill: (a.accepts_refill() && rng.gen()).then(|| amount(&mut rng)),
                renew_only: rng.gen_bool(0.2),
                block: None,
                count_all: a.takes_counter_options() && rng.gen(),
                renew: a.takes_counter_options() && rng.gen(),
                escalate: a.takes_counter_options() && rng.gen(),
            };
            if a.check(&spec).is_err() {
                continue;
            }
            let now = any_now(&mut rng);
            let keys = a.keys(&spec, now);
            let entries: Vec<i64> = (0..rng.gen_range(0..4)).map(|_| rng.gen()).collect();
            let log = VecLog::in_window(&entries, now, spec.window);
            let stored: Vec<Stored> = keys
                .iter()
                .flatten()
                .map(|k| match k.kind {
                    crate::algo::KeyKind::Integer => {
                        Stored::Integer(rng.gen_bool(0.7).then(|| extreme(&mut rng) >> 1))
                    }
                    crate::algo::KeyKind::ExpiringInteger => Stored::Expiring {
                        value: rng.gen_bool(0.7).then(|| extreme(&mut rng) >> 1),
                        // Ended, live (around now) or extreme expiries, or none.
                        expires_ms: match rng.gen_range(0..4) {
                            0 => None,
                            1 => Some(extreme(&mut rng)),
                            _ => Some(
                                (now / 1000).saturating_add_signed(rng.gen_range(-20_000..20_000)),
                            ),
                        },
                    },
                    crate::algo::KeyKind::Log { .. } => Stored::Log(&log),
                    // Within the layout (what the engine lets through), or none.
                    crate::algo::KeyKind::Fields => {
                        Stored::Fields(rng.gen_bool(0.7).then(|| {
                            let values: Vec<u64> = a
                                .fields_layout()
                                .0
                                .iter()
                                .map(|&max| match rng.gen_range(0..3) {
                                    0 => extreme(&mut rng).min(max),
                                    1 => rng.gen_range(0..=max.min(20)),
                                    // Around now: a window in force, ended or ahead.
                                    _ => (now.saturating_add_signed(
                                        rng.gen_range(-30_000_000..30_000_000),
                                    ))
                                    .min(max),
                                })
                                .collect();
                            crate::algo::state::Fields::new(&values)
                        }))
                    }
                })
                .collect();
            let verdict = a.decide(&stored, &spec, now);
            let capacity = if throttle {
                spec.burst.unwrap_or(0).saturating_add(1)
            } else {
                spec.burst.unwrap_or(spec.limit)
            };
            let mut decision = verdict.decision;
            if throttle {
                // redis-cell divides whole microseconds (an interval of 1.999 µs counts
                // as 1) and counts a passed TAT's negative TTL: `remaining` can exceed
                // the limit. Kept as redis-cell has it.
                decision.remaining = 0;
            }
            check(decision, capacity, spec.cost);
            // What the command replies is the algorithm's shape of it.
            let ints = a.reply(&verdict.decision, &spec);
            assert_eq!(ints.as_slice().len(), if throttle { 5 } else { 4 });
            let writes = verdict.writes;
            for w in [writes, a.refund(&stored, &spec, now)]
                .into_iter()
                .flatten()
            {
                for write in w.iter().flatten() {
                    let key = write.key();
                    assert!(key < stored.len(), "{} writes key {key}", a.name());
                    // A counter within its layout stays within it, denials counted too.
                    if let (Write::IncrBy { by, .. }, Some(Some(v))) =
                        (write, stored.get(key).map(Stored::integer))
                    {
                        if v <= MAX_AMOUNT {
                            assert!(v + by <= MAX_AMOUNT, "{} {v} + {by}", a.name());
                        }
                    }
                    // A state of fields reads back: a call never writes outside its layout.
                    if let Write::SetFields { fields, .. } = write {
                        let parsed = crate::algo::state::Fields::parse(
                            &fields.format(),
                            a.fields_layout().0,
                        );
                        assert_eq!(parsed, Some(*fields), "{}", a.name());
                    }
                }
            }
        }
    }
}
