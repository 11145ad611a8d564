//! RL.SLIDELOG on its sorted set: trim, count, add, expire, as the script does.

use std::sync::atomic::{AtomicU64, Ordering};

use super::call::{Call, Reply, MAX_ARGS};
use super::effects::{apply_trim, notify, replicate_int, replicate_trim, Effect, Event};
use super::key::{free_string, zcount_above, zcount_up_to, Key, Kind, OwnedString};
use crate::algo::slidelog::{cutoff, decide, Log};
use crate::args::{parse_limiter, LimiterArgs};
use crate::error::{Error, Result};
use crate::layout::log_member;

/// A log's size is bounded so that no single call adds or scans an unbounded set.
pub const MAX_LOG_LIMIT: u64 = 1_000_000;

/// Each unit of COST is one member added in the call, so COST is bounded too.
pub const MAX_LOG_COST: u64 = 1_000;

/// Expired members removed per call. A log that went quiet with a million members
/// is trimmed over many calls instead of stalling the server in one; decisions stay
/// exact because they count only the members inside the window.
pub const TRIM_BATCH: usize = 1_000;

/// The members of the sorted set that are inside the window: scores above `cutoff`.
struct WindowView<'a> {
    call: &'a Call<'a>,
    key: &'a Key,
    cutoff: f64,
    /// Members inside the window.
    len: u64,
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
        self.len
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
    let a = parse_limiter(
        "rl.slidelog",
        call.args_from(2, &mut [&[]; MAX_ARGS])?,
        false,
    )?;
    call.check_memory(a.peek)?;
    if a.limit > MAX_LOG_LIMIT {
        return Err(Error::NotPositive {
            name: "limit",
            max: MAX_LOG_LIMIT,
        });
    }
    if a.cost > MAX_LOG_COST {
        return Err(Error::NotPositive {
            name: "COST",
            max: MAX_LOG_COST,
        });
    }
    let now = a.now.unwrap_or(call.server_now_us);
    let cutoff = cutoff(now, a.window);
    let key = Key::open(call.ctx, call.key(), !a.peek)?;
    if !matches!(key.kind(), Kind::Empty | Kind::Zset) {
        return Err(Error::WrongType);
    }
    let (key, trim) = if a.peek {
        (key, Trim::Partial(Vec::new()))
    } else {
        trim(call, key, cutoff)?
    };
    let len = if !matches!(trim, Trim::Partial(_)) {
        key.value_length()
    } else if key.kind() == Kind::Zset {
        zcount_above(call.ctx, call.key(), cutoff)?
    } else {
        0
    };
    let view = WindowView {
        call,
        key: &key,
        cutoff: cutoff as f64,
        len,
    };
    let decision = decide(&view, a.limit, a.cost, a.window, now);
    if a.peek {
        return Ok(Reply::Decision(decision));
    }

    match &trim {
        Trim::Nothing | Trim::ByRedis => {}
        // All expired members gone: the script's own command.
        Trim::Complete(_) => replicate_trim(
            call.ctx,
            call.key(),
            i64::try_from(cutoff).unwrap_or(i64::MAX),
        ),
        // A partial batch: the exact members, so that replicas remove the same ones.
        Trim::Partial(members) => members
            .iter()
            .fold(Effect::new(call.ctx, call.key()), |zrem, m| {
                zrem.string(m.ptr)
            })
            .replicate(c"ZREM"),
    }
    if matches!(&trim, Trim::Complete(m) | Trim::Partial(m) if !m.is_empty()) {
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
        replicate_int(call.ctx, c"PEXPIREAT", call.key(), at);
        notify(call.ctx, Event::Generic, c"expire", call.key());
    }
    Ok(Reply::Decision(decision))
}

/// Expired members removed one at a time through the key API (about 2,700
/// instructions each). Longer runs go to Redis's own ZREMRANGEBYSCORE (about 1,150
/// each, after an RM_Call's fixed cost): the two cross at about 11 members.
const SMALL_TRIM: usize = 12;

/// How the expired members left the log.
enum Trim {
    Nothing,
    /// All of them, through the key API: still to be replicated and announced.
    Complete(Vec<OwnedString>),
    /// All of them, by ZREMRANGEBYSCORE, which replicated and announced itself.
    ByRedis,
    /// The oldest `TRIM_BATCH` of more (the rest goes in later calls), or none for a
    /// PEEK: what is inside the window must then be counted, not inferred.
    Partial(Vec<OwnedString>),
}

/// Removes expired members (score <= `cutoff`), at most `TRIM_BATCH` of them.
fn trim(call: &Call, key: Key, cutoff: u64) -> Result<(Key, Trim)> {
    let max = cutoff as f64;
    let (mut removed, complete) = key.zremrange_up_to(call.ctx, max, SMALL_TRIM);
    if complete {
        let trim = if removed.is_empty() {
            Trim::Nothing
        } else {
            Trim::Complete(removed)
        };
        return Ok((key, trim));
    }
    // More are expired. Redis removes them faster, if there are few enough for one call.
    let most = (TRIM_BATCH - SMALL_TRIM) as u64;
    let left = key.value_length();
    let expired = if left <= most {
        left
    } else {
        zcount_up_to(call.ctx, call.key(), cutoff)?
    };
    if expired <= most {
        // The key handle would go stale under another command's write: close it first.
        drop(key);
        apply_trim(
            call.ctx,
            call.key(),
            i64::try_from(cutoff).unwrap_or(i64::MAX),
        )?;
        return Ok((Key::open(call.ctx, call.key(), true)?, Trim::ByRedis));
    }
    let (more, _) = key.zremrange_up_to(call.ctx, max, TRIM_BATCH - SMALL_TRIM);
    removed.extend(more);
    Ok((key, Trim::Partial(removed)))
}

/// Adds `cost` entries at `now`, each with a fresh random suffix; a suffix that is
/// already taken is drawn again, so every unit is counted.
fn add_entries(call: &Call, key: &Key, a: &LimiterArgs, now: u64) -> Result<()> {
    // One score string serves every member of the replicated ZADD.
    let score = OwnedString::from_i64(call.ctx, i64::try_from(now).unwrap_or(i64::MAX))?;
    let mut zadd = Effect::new(call.ctx, call.key());
    let mut added = 0;
    while added < a.cost {
        let member = OwnedString::new(call.ctx, &log_member(now, random_bytes()))?;
        if key.zadd_new(now as f64, member.ptr)? {
            zadd = zadd.string(score.ptr).string(member.ptr).keep(member);
            added += 1;
        }
    }
    zadd.replicate(c"ZADD");
    notify(call.ctx, Event::Zset, c"zadd", call.key());
    Ok(())
}

/// Member suffixes only need to be distinct, not secret (a taken one is drawn again),
/// so they come from a fast generator seeded once from Redis's random bytes rather
/// than from a call into Redis's HMAC-based generator per member.
fn random_bytes() -> [u8; 4] {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut state = STATE.load(Ordering::Relaxed);
    if state == 0 {
        let mut seed = [0u8; 8];
        // SAFETY: GetRandomBytes fills exactly `len` bytes of the buffer.
        unsafe {
            if let Some(f) = redis_module::raw::RedisModule_GetRandomBytes {
                f(seed.as_mut_ptr(), seed.len());
            }
        }
        state = u64::from_le_bytes(seed) | 1;
    }
    // splitmix64
    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    STATE.store(state, Ordering::Relaxed);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let [a, b, c, d, ..] = z.to_le_bytes();
    [a, b, c, d]
}
