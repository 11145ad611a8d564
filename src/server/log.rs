//! RL.SLIDELOG's sorted set: how many entries are inside the window, which ones
//! leave when, and the trim, add and remove that the script's commands do.
//!
//! Every call's work is bounded whatever the set holds (a script's log has no size
//! cap): at most `TRIM_BATCH` members are removed per call, counts come from ZCOUNT
//! (O(log n)) when a walk would be long, and the n-th oldest entry from its rank.

use std::sync::atomic::{AtomicU64, Ordering};

use super::call::Call;
use super::effects::{apply_trim, replicate, replicate_trim, Effect, Event};
use super::engine::Slot;
use super::key::{
    bytes, call_command, free_string, zcount_up_to, Ctx, Key, Kind, OwnedString, Propagate, RString,
};
use crate::algo::state::Log;
use crate::error::{Error, Result};
use crate::layout::log_member;

/// Expired members removed per call. A log that went quiet with a million members
/// is trimmed over many calls instead of stalling the server in one; decisions stay
/// exact because they count only the members inside the window.
pub const TRIM_BATCH: u64 = 1_000;

/// Expired members removed one at a time through the key API (about 2,700
/// instructions each). Longer runs go to Redis's own ZREMRANGEBYSCORE (about 1,150
/// each, after an RM_Call's fixed cost): the two cross at about 11 members.
const SMALL_TRIM: usize = 12;

/// How far the n-th oldest entry is looked for by walking the set; beyond, by rank.
const SHORT_WALK: u64 = 64;

/// The expired members (score at or below the cutoff) still in the set.
pub enum Expired {
    /// All of them, few enough to remove one by one.
    Few(Vec<OwnedString>),
    /// More than that: only their number.
    Many(u64),
}

impl Expired {
    fn count(&self) -> u64 {
        match self {
            Expired::Few(members) => members.len() as u64,
            Expired::Many(n) => *n,
        }
    }
}

pub struct LogState {
    ctx: Ctx,
    cutoff: u64,
    /// Members in the set, expired or not.
    total: u64,
    expired: Expired,
    /// The member the call names (a lease id), and its score if the set holds it.
    member: Option<RString>,
    member_score: Option<f64>,
}

impl LogState {
    pub fn read(
        call: &Call,
        key: &Key,
        name: RString,
        cutoff: u64,
        member: Option<RString>,
    ) -> Result<LogState> {
        let empty = LogState {
            ctx: call.ctx,
            cutoff,
            total: 0,
            expired: Expired::Few(Vec::new()),
            member,
            member_score: None,
        };
        match key.kind() {
            Kind::Empty => Ok(empty),
            Kind::Zset => {
                let (members, complete) = key.members_up_to(call.ctx, cutoff as f64, SMALL_TRIM);
                let expired = if complete {
                    Expired::Few(members)
                } else {
                    Expired::Many(zcount_up_to(call.ctx, name, cutoff)?)
                };
                Ok(LogState {
                    total: key.value_length(),
                    expired,
                    member_score: member.and_then(|m| key.score(m)),
                    ..empty
                })
            }
            _ => Err(Error::WrongType),
        }
    }

    pub fn cleared(&mut self) {
        self.total = 0;
        self.expired = Expired::Few(Vec::new());
        self.member_score = None;
    }

    /// Whether the call's member is in the set and not expired.
    fn member_live(&self) -> bool {
        self.member_score.is_some_and(|s| s > self.cutoff as f64)
    }
}

/// A score as a whole microsecond, rounded so that an entry leaves no earlier than
/// its score says (scores written by others may be fractional, huge or infinite).
fn timestamp(score: f64) -> i64 {
    score.ceil() as i64
}

impl Log for Slot {
    fn count(&self) -> u64 {
        self.log
            .as_ref()
            .map_or(0, |l| l.total.saturating_sub(l.expired.count()))
    }

    fn nth_oldest(&self, n: u64) -> Option<i64> {
        let log = self.log.as_ref()?;
        if n == 0 {
            return None;
        }
        if n <= SHORT_WALK {
            let mut seen = 0;
            let mut found = None;
            self.key.for_each_in_range(
                log.cutoff as f64,
                f64::INFINITY,
                true,
                false,
                |m, score| {
                    free_string(log.ctx, m);
                    seen += 1;
                    if seen == n {
                        found = Some(timestamp(score));
                    }
                    seen < n
                },
            );
            return found;
        }
        let rank = log.expired.count().checked_add(n - 1)?;
        score_at_rank(log.ctx, self.name.ptr(), rank).map(timestamp)
    }

    fn newest(&self) -> Option<i64> {
        let log = self.log.as_ref()?;
        self.key
            .last_score_above(log.ctx, log.cutoff as f64)
            .map(timestamp)
    }

    fn member_score(&self) -> Option<i64> {
        let log = self.log.as_ref()?;
        log.member_score
            .filter(|_| log.member_live())
            .map(timestamp)
    }

    /// At most two members from the top: the call's member and the one below it.
    fn newest_except_member(&self) -> Option<i64> {
        let log = self.log.as_ref()?;
        let Some(member) = log.member else {
            return self.newest();
        };
        let member = bytes(member);
        let mut found = None;
        self.key
            .for_each_in_range(log.cutoff as f64, f64::INFINITY, true, true, |m, score| {
                let other = bytes(m) != member;
                free_string(log.ctx, m);
                if other {
                    found = Some(timestamp(score));
                }
                !other
            });
        found
    }
}

/// The score of the member at `rank` (0 = lowest): `ZRANGE key rank rank WITHSCORES`,
/// O(log n), where the key API could only walk there.
fn score_at_rank(ctx: Ctx, key: RString, rank: u64) -> Option<f64> {
    let rank = OwnedString::from_i64(ctx, i64::try_from(rank).ok()?).ok()?;
    let withscores = OwnedString::new(ctx, b"WITHSCORES").ok()?;
    call_command(
        ctx,
        c"ZRANGE",
        &[key, rank.ptr, rank.ptr, withscores.ptr],
        Propagate::No,
        |reply| {
            let mut len = 0;
            // SAFETY: a live array reply; the score's bytes are parsed before it is freed.
            unsafe {
                let element = redis_module::raw::RedisModule_CallReplyArrayElement?(reply, 1);
                if element.is_null() {
                    return None;
                }
                let p = redis_module::raw::RedisModule_CallReplyStringPtr?(element, &mut len);
                if p.is_null() {
                    return None;
                }
                std::str::from_utf8(std::slice::from_raw_parts(p.cast::<u8>(), len))
                    .ok()?
                    .parse()
                    .ok()
            }
        },
    )
    .ok()
    .flatten()
}

/// Removes the expired members, at most `TRIM_BATCH` of them, replicated and
/// announced as the script's ZREMRANGEBYSCORE (or, for a partial batch, as the exact
/// members removed, so that replicas remove the same ones).
pub fn trim(call: &Call, slot: &mut Slot, cutoff: u64) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    let Some(log) = &mut slot.log else {
        return Ok(());
    };
    let cutoff_i64 = i64::try_from(cutoff).unwrap_or(i64::MAX);
    let removed = match std::mem::replace(&mut log.expired, Expired::Few(Vec::new())) {
        Expired::Few(members) if members.is_empty() => return Ok(()),
        Expired::Few(members) => {
            for m in &members {
                slot.key.zrem(m.ptr)?;
            }
            replicate_trim(ctx, name, cutoff_i64)?;
            members.len() as u64
        }
        Expired::Many(n) if n <= TRIM_BATCH => {
            // Redis removes a run in one pass, replicating and announcing itself. The
            // key handle would go stale under another command's write: close it first.
            slot.key = Key::closed();
            apply_trim(ctx, name, cutoff_i64)?;
            slot.key = Key::open(ctx, name, true)?;
            log.total = log.total.saturating_sub(n);
            return Ok(());
        }
        Expired::Many(n) => {
            let (members, _) = slot
                .key
                .members_up_to(ctx, cutoff as f64, TRIM_BATCH as usize);
            for m in &members {
                slot.key.zrem(m.ptr)?;
            }
            members
                .iter()
                .fold(Effect::new(ctx, name), |zrem, m| zrem.string(m.ptr))
                .replicate(c"ZREM")?;
            log.expired = Expired::Many(n.saturating_sub(members.len() as u64));
            members.len() as u64
        }
    };
    log.total = log.total.saturating_sub(removed);
    slot.announce(ctx, Event::Zset, c"zremrangebyscore");
    if slot.key.kind() == Kind::Empty {
        slot.announce(ctx, Event::Generic, c"del");
    }
    Ok(())
}

/// Adds `count` entries at `at`, each with a fresh random suffix; a suffix that is
/// already taken is drawn again, so every unit is counted.
pub fn add(call: &Call, slot: &mut Slot, at: u64, count: u64) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    // One score string serves every member of the replicated ZADD.
    let score = OwnedString::from_i64(ctx, i64::try_from(at).unwrap_or(i64::MAX))?;
    let new_member = || -> Result<OwnedString> {
        loop {
            let member = OwnedString::new(ctx, &log_member(at, random_bytes()))?;
            if slot.key.zadd_new(at as f64, member.ptr)? {
                return Ok(member);
            }
        }
    };
    if count == 1 {
        // The usual COST: one ZADD of three strings, with no argument list to build.
        let member = new_member()?;
        replicate(ctx, c"ZADD", &[name, score.ptr, member.ptr])?;
    } else {
        let mut zadd = Effect::new(ctx, name);
        for _ in 0..count {
            let member = new_member()?;
            zadd = zadd.string(score.ptr).string(member.ptr).keep(member);
        }
        zadd.replicate(c"ZADD")?;
    }
    slot.announce(ctx, Event::Zset, c"zadd");
    if let Some(log) = &mut slot.log {
        log.total = log.total.saturating_add(count);
    }
    Ok(())
}

/// REFUND: removes the `count` newest entries inside the window, as one ZREM.
pub fn remove_newest(call: &Call, slot: &mut Slot, count: u64, cutoff: u64) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    let mut doomed = Vec::new();
    slot.key
        .for_each_in_range(cutoff as f64, f64::INFINITY, true, true, |m, _| {
            let m = OwnedString::adopt(ctx, m);
            if doomed.len() as u64 == count {
                return false;
            }
            doomed.push(m);
            true
        });
    if doomed.is_empty() {
        return Ok(());
    }
    for m in &doomed {
        slot.key.zrem(m.ptr)?;
    }
    doomed
        .iter()
        .fold(Effect::new(ctx, name), |zrem, m| zrem.string(m.ptr))
        .replicate(c"ZREM")?;
    slot.announce(ctx, Event::Zset, c"zrem");
    if slot.key.kind() == Kind::Empty {
        slot.announce(ctx, Event::Generic, c"del");
    }
    if let Some(log) = &mut slot.log {
        log.total = log.total.saturating_sub(doomed.len() as u64);
    }
    Ok(())
}

/// ZADD of the call's member at `score`: a new lease, or a held one renewed.
pub fn set_member(call: &Call, slot: &mut Slot, score: u64) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    let Some(log) = &mut slot.log else {
        return Err(Error::Internal("a member write on a key that is no set"));
    };
    let member = log
        .member
        .ok_or(Error::Internal("a member write without a member"))?;
    let at = i64::try_from(score).map_err(|_| Error::Internal("a score beyond i64"))?;
    if !log.member_live() {
        log.total = log.total.saturating_add(1);
    }
    log.member_score = Some(at as f64);
    slot.key.zadd(at as f64, member)?;
    let text = OwnedString::from_i64(ctx, at)?;
    Effect::new(ctx, name)
        .string(text.ptr)
        .string(member)
        .replicate(c"ZADD")?;
    slot.announce(ctx, Event::Zset, c"zadd");
    Ok(())
}

/// ZREM of the call's member.
pub fn remove_member(call: &Call, slot: &mut Slot) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    let Some(log) = &mut slot.log else {
        return Ok(());
    };
    let (Some(member), Some(_)) = (log.member, log.member_score) else {
        return Ok(());
    };
    if log.member_live() {
        log.total = log.total.saturating_sub(1);
    }
    log.member_score = None;
    slot.key.zrem(member)?;
    Effect::new(ctx, name).string(member).replicate(c"ZREM")?;
    slot.announce(ctx, Event::Zset, c"zrem");
    if slot.key.kind() == Kind::Empty {
        slot.announce(ctx, Event::Generic, c"del");
    }
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
