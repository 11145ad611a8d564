//! Concurrency limit: how many requests are in flight, not how many arrived.
//!
//! Each request in progress holds a lease: a member of a sorted set named by the
//! caller (a request id), scored with the instant it expires. A worker that crashes
//! never releases its lease, so leases expire on their own; a retried acquire finds
//! its own lease and renews it instead of taking a second slot. Everything is
//! decided on one clock, the call's now.

use super::slidelog::{EmptyLog, MAX_LOG_LIMIT};
use super::state::{Log, Stored};
use super::{
    ceil_ms, remaining, retry_ms, Algorithm, Decision, KeyKind, KeyName, KeyUse, Keys, Verdict,
    Write, Writes, NO_WRITES,
};
use crate::args::{parse_now, parse_spec, set_once};
use crate::error::{Error, Result};
use crate::limit::{Mode, Request, Spec, MAX_NOW_US};

/// The decision for the call's member on `leases` (the live ones, score > now): an
/// ACQUIRE (or, with `renew_only`, a HEARTBEAT) expiring `ttl_us` from now.
/// Returns the decision and, when admitted, the lease's new expiry.
pub fn decide(
    leases: &(impl Log + ?Sized),
    limit: u64,
    ttl_us: u64,
    renew_only: bool,
    now: u64,
) -> (Decision, Option<u64>) {
    let held = leases.member_score().is_some();
    let count = leases.count();
    let allowed = held || (!renew_only && count < limit);
    let after = if allowed && !held { count + 1 } else { count };
    let until = now.saturating_add(ttl_us);
    let ahead = |t: i64| u128::try_from(i128::from(t) - i128::from(now)).unwrap_or(0);
    let retry_after_ms = if allowed {
        0
    } else if renew_only {
        // A lost lease is never renewed: its slot may be someone else's by now.
        -1
    } else {
        // A new lease fits once enough of the held ones expire (more than one when
        // the limit was lowered below what is held).
        let must_leave = count.saturating_add(1).saturating_sub(limit);
        leases
            .nth_oldest(must_leave)
            .map_or(-1, |t| retry_ms(ahead(t)))
    };
    let last = if allowed {
        let others = leases.newest_except_member();
        Some(others.map_or(until, |t| u64::try_from(t).unwrap_or(0).max(until)))
    } else {
        leases.newest().and_then(|t| u64::try_from(t).ok())
    };
    let decision = Decision {
        allowed,
        remaining: remaining(limit, u128::from(after)),
        retry_after_ms,
        reset_after_ms: last.map_or(0, |t| ceil_ms(u128::from(t.saturating_sub(now)))),
    };
    (decision, allowed.then_some(until))
}

/// Milliseconds until the last live lease of `leases` expires (0: none held).
pub fn own_reset_ms(leases: &(impl Log + ?Sized), now: u64) -> u64 {
    let last = leases.newest().and_then(|t| u64::try_from(t).ok());
    last.map_or(0, |t| ceil_ms(u128::from(t.saturating_sub(now))))
}

/// RL.CONCURRENCY: leases in a sorted set at the key.
pub struct Concurrency;

fn leases<'a>(stored: &'a [Stored<'a>]) -> &'a dyn Log {
    match stored.first() {
        Some(Stored::Log(log)) => *log,
        _ => &EmptyLog,
    }
}

/// Removes the expired leases (at most a batch per call, as the log's trim).
fn trim(now: u64) -> Write {
    Write::Trim {
        key: 0,
        cutoff: now,
    }
}

/// The key expires when its last lease does.
fn expire(last: u64, now: u64) -> Write {
    Write::Expire {
        key: 0,
        ttl_ms: ceil_ms(u128::from(last.saturating_sub(now))),
    }
}

impl Algorithm for Concurrency {
    fn name(&self) -> &'static str {
        "CONCURRENCY"
    }

    fn uses_member(&self) -> bool {
        true
    }

    /// A denial here means work in flight, not an offence; and a block would refuse
    /// the heartbeats and releases of work already running.
    fn check_block(&self) -> Result<()> {
        Err(Error::BlockNotTaken(
            "CONCURRENCY",
            "a lease is work in flight, not an offence",
        ))
    }

    /// A lease never outlives NOW's ceiling (`LeaseOverflow`).
    fn log_layout(&self) -> &'static str {
        "a lease set (leases scored with their expiry in unix microseconds up to 2255)"
    }

    /// A lease is one slot: COST has no meaning here.
    fn check(&self, spec: &Spec) -> Result<()> {
        if spec.limit > MAX_LOG_LIMIT {
            return Err(Error::NotPositive {
                name: "limit",
                max: MAX_LOG_LIMIT,
            });
        }
        if spec.cost != 1 {
            return Err(Error::LeaseCost);
        }
        Ok(())
    }

    fn keys(&self, _spec: &Spec, now: u64) -> Keys {
        [
            Some(KeyUse {
                name: KeyName::Base,
                kind: KeyKind::Log { expired_up_to: now },
                written: true,
            }),
            None,
        ]
    }

    /// An admitted ACQUIRE or HEARTBEAT trims, sets the lease and the key's expiry;
    /// a denied one writes nothing.
    fn decide(&self, stored: &[Stored], spec: &Spec, now: u64) -> Verdict {
        let leases = leases(stored);
        let ttl = spec.window.us();
        let (decision, until) = decide(leases, spec.limit, ttl, spec.renew_only, now);
        let writes = match until {
            // Scores are doubles: past 2^53 µs they would no longer be exact.
            Some(until) if until > MAX_NOW_US => Err(Error::LeaseOverflow),
            Some(until) => {
                let last = leases
                    .newest_except_member()
                    .and_then(|t| u64::try_from(t).ok())
                    .map_or(until, |t| t.max(until));
                Ok([
                    Some(trim(now)),
                    Some(Write::SetMember {
                        key: 0,
                        score: until,
                    }),
                    Some(expire(last, now)),
                ])
            }
            None => Ok(NO_WRITES),
        };
        Verdict { decision, writes }
    }

    /// Until the last lease held expires: a new lease is not counted.
    fn own_reset_ms(&self, stored: &[Stored], _spec: &Spec, now: u64) -> u64 {
        own_reset_ms(leases(stored), now)
    }

    /// RELEASE: the lease goes; the key then expires with the last one left.
    fn refund(&self, stored: &[Stored], _spec: &Spec, now: u64) -> Result<Writes> {
        let leases = leases(stored);
        if leases.member_score().is_none() {
            return Ok([Some(trim(now)), None, None]);
        }
        let others = leases
            .newest_except_member()
            .and_then(|t| u64::try_from(t).ok());
        Ok([
            Some(trim(now)),
            Some(Write::RemoveMember { key: 0 }),
            others.map(|last| expire(last, now)),
        ])
    }

    /// `<limit> <ttl> ACQUIRE <id> | RELEASE <id> | HEARTBEAT <id> | PEEK | RESET
    /// [NOW <µs>]`, in any order.
    fn parse(&self, command: &'static str, args: &[&[u8]]) -> Result<Request> {
        let [limit, ttl, ..] = args else {
            return Err(Error::WrongArity(command));
        };
        let mut spec = parse_spec(limit, ttl, self.longest_window_ms())?;
        let mut now = None;
        let mut operation: Option<(Mode, Option<usize>)> = None;
        let mut at = 2;
        while let Some(word) = args.get(at) {
            if word.eq_ignore_ascii_case(b"BLOCK") {
                self.check_block()?;
            }
            // RL.ALL's limits take COST; a lease here is one slot too, and says so.
            if word.eq_ignore_ascii_case(b"COST") {
                return Err(Error::LeaseCost);
            }
            for option in ["COUNTALL", "RENEW", "ESCALATE"] {
                if word.eq_ignore_ascii_case(option.as_bytes()) {
                    return Err(Error::CounterOnly(option));
                }
            }
            let name = ["ACQUIRE", "RELEASE", "HEARTBEAT", "PEEK", "RESET", "NOW"]
                .into_iter()
                .find(|n| word.eq_ignore_ascii_case(n.as_bytes()))
                .ok_or_else(|| Error::UnknownOption(String::from_utf8_lossy(word).into()))?;
            let takes_value = !matches!(name, "PEEK" | "RESET");
            if takes_value && args.get(at + 1).is_none() {
                return Err(Error::MissingValue(name));
            }
            let value = at + 1;
            if name == "NOW" {
                let t = args.get(value).copied().unwrap_or_default();
                set_once(&mut now, name, parse_now(t)?)?;
            } else {
                if operation.is_some() {
                    return Err(Error::ConflictingLeaseOperations);
                }
                operation = Some(match name {
                    "ACQUIRE" => (Mode::Spend, Some(value)),
                    "HEARTBEAT" => {
                        spec.renew_only = true;
                        (Mode::Spend, Some(value))
                    }
                    "RELEASE" => (Mode::Refund, Some(value)),
                    "PEEK" => (Mode::Peek, None),
                    _ => (Mode::Reset, None),
                });
            }
            at += if takes_value { 2 } else { 1 };
        }
        let (mode, member) = operation.ok_or(Error::MissingLeaseOperation)?;
        Ok(Request {
            spec,
            now,
            mode,
            member,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::decision as d;
    use crate::limit::Window;

    const T0: u64 = 1_764_480_000_000_000;
    const TTL: u64 = 10_000_000;

    /// Leases as (id, expiry) pairs, the call's member first if it holds one.
    struct Leases {
        held: Vec<(&'static str, u64)>,
        member: Option<&'static str>,
        now: u64,
    }

    impl Leases {
        fn live(&self) -> Vec<(&'static str, u64)> {
            let mut v: Vec<_> = self
                .held
                .iter()
                .copied()
                .filter(|&(_, t)| t > self.now)
                .collect();
            v.sort_by_key(|&(_, t)| t);
            v
        }
    }

    impl Log for Leases {
        fn count(&self) -> u64 {
            self.live().len() as u64
        }
        fn nth_oldest(&self, n: u64) -> Option<i64> {
            let i = usize::try_from(n).ok()?.checked_sub(1)?;
            self.live().get(i).map(|&(_, t)| t as i64)
        }
        fn newest(&self) -> Option<i64> {
            self.live().last().map(|&(_, t)| t as i64)
        }
        fn member_score(&self) -> Option<i64> {
            let m = self.member?;
            self.live()
                .into_iter()
                .find(|&(id, _)| id == m)
                .map(|(_, t)| t as i64)
        }
        fn newest_except_member(&self) -> Option<i64> {
            self.live()
                .into_iter()
                .rev()
                .find(|&(id, _)| Some(id) != self.member)
                .map(|(_, t)| t as i64)
        }
    }

    /// Runs ACQUIRE/HEARTBEAT/RELEASE calls against an in-memory set.
    fn call(held: &mut Vec<(&'static str, u64)>, op: &str, id: &'static str, now: u64) -> Decision {
        let view = Leases {
            held: held.clone(),
            member: Some(id),
            now,
        };
        held.retain(|&(_, t)| t > now);
        match op {
            "release" => {
                held.retain(|&(m, _)| m != id);
                let peek = Leases {
                    held: held.clone(),
                    member: None,
                    now,
                };
                decide(&peek, 2, TTL, false, now).0
            }
            _ => {
                let (d, until) = decide(&view, 2, TTL, op == "heartbeat", now);
                if let Some(until) = until {
                    held.retain(|&(m, _)| m != id);
                    held.push((id, until));
                }
                d
            }
        }
    }

    #[test]
    fn leases_fill_expire_and_renew() {
        let mut held = vec![];
        assert_eq!(call(&mut held, "acquire", "a", T0), d(true, 1, 0, 10_000));
        // A retried acquire renews, never a second slot.
        assert_eq!(
            call(&mut held, "acquire", "a", T0 + 1_000_000),
            d(true, 1, 0, 10_000)
        );
        assert_eq!(
            call(&mut held, "acquire", "b", T0 + 2_000_000),
            d(true, 0, 0, 10_000)
        );
        // Full: the earliest lease (a, until T0 + 11 s) frees the next slot.
        assert_eq!(
            call(&mut held, "acquire", "c", T0 + 3_000_000),
            d(false, 0, 8_000, 9_000)
        );
        // b's heartbeat pushes its expiry to now + ttl.
        assert_eq!(
            call(&mut held, "heartbeat", "b", T0 + 4_000_000),
            d(true, 0, 0, 10_000)
        );
        // a expired at T0 + 11 s exactly: gone, its slot taken by c.
        assert_eq!(
            call(&mut held, "acquire", "c", T0 + 11_000_000),
            d(true, 0, 0, 10_000)
        );
        // a's heartbeat is too late: denied, never.
        assert_eq!(
            call(&mut held, "heartbeat", "a", T0 + 11_000_000),
            d(false, 0, -1, 10_000)
        );
        // A release frees the slot and answers as a peek would: what an acquire of a
        // new id would get (its lease, until now + ttl, the last one).
        assert_eq!(
            call(&mut held, "release", "b", T0 + 12_000_000),
            d(true, 0, 0, 10_000)
        );
        // Releasing an unknown id is no error.
        assert_eq!(
            call(&mut held, "release", "zz", T0 + 12_000_000),
            d(true, 0, 0, 10_000)
        );
    }

    #[test]
    fn a_lowered_limit_waits_for_enough_leases() {
        let leases = Leases {
            held: vec![("a", T0 + 1_000), ("b", T0 + 2_000), ("c", T0 + 3_500)],
            member: Some("x"),
            now: T0,
        };
        // 3 held, limit 2: two must expire before a new one fits.
        let (d, until) = decide(&leases, 2, TTL, false, T0);
        assert_eq!((d.allowed, d.retry_after_ms, until), (false, 2, None));
        assert_eq!(d.reset_after_ms, 4);
    }

    #[test]
    fn the_key_lives_as_long_as_its_last_lease() -> Result<()> {
        let window = Window::from_ms(1_000)?;
        let mut spec = Spec::new(5, window);
        let leases = Leases {
            held: vec![("a", T0 + 5_000_000), ("b", T0 + 200_000)],
            member: Some("a"),
            now: T0,
        };
        // Renewing a with a shorter ttl: b's and a's new expiry are both earlier than
        // a's old one; the key's ttl follows the later of the two.
        let v = Concurrency.decide(&[Stored::Log(&leases)], &spec, T0);
        let w = v.writes?;
        assert_eq!(
            w[1],
            Some(Write::SetMember {
                key: 0,
                score: T0 + 1_000_000
            })
        );
        assert_eq!(
            w[2],
            Some(Write::Expire {
                key: 0,
                ttl_ms: 1_000
            })
        );
        spec.cost = 2;
        assert_eq!(Concurrency.check(&spec), Err(Error::LeaseCost));
        Ok(())
    }

    fn parse(line: &str) -> Result<Request> {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        Concurrency.parse("rl.concurrency", &words)
    }

    #[test]
    fn parses_one_operation() -> Result<()> {
        let r = parse("5 30s acquire req-1 NOW 1764480000000000")?;
        assert_eq!(
            (r.mode, r.member, r.spec.renew_only),
            (Mode::Spend, Some(3), false)
        );
        assert_eq!(r.now, Some(1_764_480_000_000_000));
        let r = parse("5 30 NOW 1764480000000000 HEARTBEAT x")?;
        assert_eq!(
            (r.mode, r.member, r.spec.renew_only),
            (Mode::Spend, Some(5), true)
        );
        assert_eq!(parse("5 30 RELEASE x")?.mode, Mode::Refund);
        assert_eq!(parse("5 30 peek")?.member, None);
        assert_eq!(parse("5 30 RESET")?.mode, Mode::Reset);
        for (line, e) in [
            ("5 30", Error::MissingLeaseOperation),
            ("5 30 ACQUIRE a countall", Error::CounterOnly("COUNTALL")),
            ("5 30 RENEW", Error::CounterOnly("RENEW")),
            ("5 30 ACQUIRE", Error::MissingValue("ACQUIRE")),
            (
                "5 30 ACQUIRE a RELEASE a",
                Error::ConflictingLeaseOperations,
            ),
            ("5 30 PEEK RESET", Error::ConflictingLeaseOperations),
            ("5 30 PEEK COST 2", Error::LeaseCost),
            ("5 30 ACQUIRE x cost 2", Error::LeaseCost),
            ("5", Error::WrongArity("rl.concurrency")),
        ] {
            assert_eq!(parse(line).err(), Some(e), "{line}");
        }
        Ok(())
    }
}
