//! RL.SLIDELOG on its sorted set: trim, count, add, expire, as the script does.

use super::call::{Call, Reply};
use super::effects::{notify, Effect, Event};
use super::key::{free_string, Key, Kind, OwnedString};
use crate::algo::slidelog::{cutoff, decide, Log};
use crate::args::{parse_limiter, LimiterArgs};
use crate::error::{Error, Result};
use crate::layout::log_member;

/// A log's size is bounded so that no single call adds or scans an unbounded set.
pub const MAX_LOG_LIMIT: u64 = 1_000_000;

/// The members of the sorted set that are inside the window: scores above `cutoff`.
struct WindowView<'a> {
    call: &'a Call<'a>,
    key: &'a Key,
    cutoff: f64,
    /// Known when everything at or below the cutoff has just been trimmed.
    len: Option<u64>,
}

impl WindowView<'_> {
    fn scan(&self, mut visit: impl FnMut(f64) -> bool) {
        self.key
            .for_each_in_range(self.cutoff, f64::INFINITY, true, |member, score| {
                free_string(self.call.ctx, member);
                visit(score)
            });
    }
}

/// A score as a whole microsecond, rounded so that an entry leaves no earlier than
/// its score says (scores written by others may be fractional, huge or infinite).
fn timestamp(score: f64) -> i64 {
    score.ceil() as i64
}

impl Log for WindowView<'_> {
    fn count(&self) -> u64 {
        self.len.unwrap_or_else(|| {
            let mut n = 0;
            self.scan(|_| {
                n += 1;
                true
            });
            n
        })
    }

    fn nth_oldest(&self, n: u64) -> Option<i64> {
        let mut seen = 0;
        let mut found = None;
        self.scan(|score| {
            seen += 1;
            if seen == n {
                found = Some(timestamp(score));
            }
            seen < n
        });
        found
    }

    fn newest(&self) -> Option<i64> {
        self.key
            .last_score_above(self.call.ctx, self.cutoff)
            .map(timestamp)
    }
}

pub fn command(call: &Call) -> Result<Reply> {
    let a = parse_limiter("rl.slidelog", &call.args_from(2), false)?;
    call.check_memory(a.peek)?;
    if a.limit > MAX_LOG_LIMIT {
        return Err(Error::NotPositive {
            name: "limit",
            max: MAX_LOG_LIMIT,
        });
    }
    let now = a.now.unwrap_or(call.server_now_us);
    let cutoff = cutoff(now, a.window);
    let key = Key::open(call.ctx, call.key(), !a.peek)?;
    if !matches!(key.kind(), Kind::Empty | Kind::Zset) {
        return Err(Error::WrongType);
    }
    let mut view = WindowView {
        call,
        key: &key,
        cutoff: cutoff as f64,
        len: None,
    };
    if a.peek {
        return Ok(Reply::Decision(decide(
            &view, a.limit, a.cost, a.window, now,
        )));
    }

    let trimmed = key.zremrange_by_score(call.ctx, f64::NEG_INFINITY, cutoff as f64);
    view.len = Some(key.value_length());
    let decision = decide(&view, a.limit, a.cost, a.window, now);

    if trimmed > 0 {
        Effect::new(call.ctx, call.key())
            .bytes(b"-inf")?
            .int(i64::try_from(cutoff).unwrap_or(i64::MAX))?
            .replicate(c"ZREMRANGEBYSCORE");
        notify(call.ctx, Event::Zset, c"zremrangebyscore", call.key());
        if key.kind() == Kind::Empty {
            notify(call.ctx, Event::Generic, c"del", call.key());
        }
    }
    if decision.allowed {
        add_entries(call, &key, &a, now)?;
    }
    if key.kind() != Kind::Empty {
        // The script's PEXPIRE <window>, as the absolute instant replicas must share.
        let at = call
            .server_now_ms()
            .saturating_add(i64::try_from(a.window.ms()).unwrap_or(i64::MAX));
        key.expire_at(at)?;
        Effect::new(call.ctx, call.key())
            .int(at)?
            .replicate(c"PEXPIREAT");
        notify(call.ctx, Event::Generic, c"expire", call.key());
    }
    Ok(Reply::Decision(decision))
}

/// Adds `cost` entries at `now`, each with a fresh random suffix; a suffix that is
/// already taken is drawn again, so every unit is counted.
fn add_entries(call: &Call, key: &Key, a: &LimiterArgs, now: u64) -> Result<()> {
    let score = now.to_string();
    let mut zadd = Effect::new(call.ctx, call.key());
    let mut added = 0;
    while added < a.cost {
        let member = OwnedString::new(call.ctx, &log_member(now, random_bytes()))?;
        if key.zadd_new(now as f64, member.ptr)? {
            zadd = zadd
                .bytes(score.as_bytes())?
                .string(member.ptr)
                .keep(member);
            added += 1;
        }
    }
    zadd.replicate(c"ZADD");
    notify(call.ctx, Event::Zset, c"zadd", call.key());
    Ok(())
}

fn random_bytes() -> [u8; 4] {
    let mut buf = [0u8; 4];
    // SAFETY: GetRandomBytes fills exactly `len` bytes of the buffer.
    unsafe {
        if let Some(f) = redis_module::raw::RedisModule_GetRandomBytes {
            f(buf.as_mut_ptr(), buf.len());
        }
    }
    buf
}
