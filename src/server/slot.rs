//! One key a call opened, what it held, and every write to it: each write is carried
//! out, replicated as core commands with absolute times, and announced with the
//! keyspace events the scripts' commands fire, here and nowhere else. Below the engine,
//! which decides what to write, and never calling back into it.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

use super::call::Call;
use super::effects::{
    apply_trim, integers, notify, replicate, replicate_int, replicate_key, replicate_set_pxat,
    replicate_trim, run_replicated, run_set_pxat, signal_modified, Effect, Event,
};
use super::key::{bytes, lossy, Ctx, Key, Kind, OwnedString, RString};
use super::log::{Expired, LogState, TRIM_BATCH};
use crate::algo::state::{Fields, Log};
use crate::algo::{KeyUse, Write};
use crate::error::{Error, Result};
use crate::layout::{decimal, log_member};

/// A key's name: the base key (a command argument) or one the module made.
pub enum Name {
    Base(RString),
    Made(OwnedString),
}

impl Name {
    pub fn ptr(&self) -> RString {
        match self {
            Name::Base(s) => *s,
            Name::Made(s) => s.ptr,
        }
    }
}

/// One open key and what it held.
pub struct Slot {
    pub name: Name,
    pub key: Key,
    pub key_use: KeyUse,
    /// The integer a string key holds (`Integer` keys).
    pub value: Option<u64>,
    /// The key's expiry instant (unix ms), kept for `ExpiringInteger` keys only: read
    /// at load, and updated by every write here that changes it.
    pub expires_ms: Option<u64>,
    /// The entries a sorted set holds (`Log` keys).
    pub log: Option<LogState>,
    /// The integers a `Fields` key holds.
    pub fields: Option<Fields>,
    /// WATCH and client-side caching were told this key changed.
    signalled: bool,
}

impl Slot {
    pub fn new(
        name: Name,
        key: Key,
        key_use: KeyUse,
        value: Option<u64>,
        log: Option<LogState>,
    ) -> Slot {
        Slot {
            name,
            key,
            key_use,
            value,
            expires_ms: None,
            log,
            fields: None,
            signalled: false,
        }
    }

    /// A write to this key, announced: keyspace subscribers get `event` (as the
    /// script's command would fire it), and WATCH and client-side caching learn of the
    /// change, once per key and call. Every write goes through here, so a key the call
    /// opened but did not write is never signalled.
    fn announce(&mut self, ctx: Ctx, kind: Event, event: &CStr) {
        let name = self.name.ptr();
        notify(ctx, kind, event, name);
        if !self.signalled {
            signal_modified(ctx, name);
            self.signalled = true;
        }
    }

    /// With integer values, Redis's own command writes the key to `value`: the open
    /// handle would go stale under it, and the command replicates, announces and
    /// signals itself.
    fn written_by_redis(&mut self, value: u64) {
        self.key = Key::closed();
        self.value = Some(value);
        self.signalled = true;
    }
}

/// The algorithms read a log through its slot.
impl Log for Slot {
    fn count(&self) -> u64 {
        self.log.as_ref().map_or(0, LogState::count)
    }

    fn nth_oldest(&self, n: u64) -> Option<i64> {
        self.log.as_ref()?.nth_oldest(&self.key, self.name.ptr(), n)
    }

    fn newest(&self) -> Option<i64> {
        self.log.as_ref()?.newest(&self.key)
    }

    fn member_score(&self) -> Option<i64> {
        self.log.as_ref()?.live_member_score()
    }

    fn newest_except_member(&self) -> Option<i64> {
        self.log.as_ref()?.newest_except_member(&self.key)
    }
}

/// An instant `ttl_ms` from the server's now: expiry stays on the server clock.
fn expiry(call: &Call, ttl_ms: u64) -> i64 {
    call.server_now_ms()
        .saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX))
}

/// Carries out one write the algorithm asked for on `slot`: applied, replicated as a
/// core command with absolute times, and announced.
pub fn apply(call: &Call, slot: &mut Slot, write: &Write) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    match *write {
        Write::IncrBy { by, ttl_ms, .. } => {
            // The read found no counter (asking the key again costs a KeyType).
            let created = slot.value.is_none();
            let value = slot
                .value
                .unwrap_or(0)
                .checked_add(by)
                .ok_or_else(|| Error::Overflow(lossy(name)))?;
            if integers() {
                // Redis's own INCRBY stores the counter as INCR does (an integer, or
                // a shared one below 10,000).
                slot.written_by_redis(value);
                run_replicated(ctx, c"INCRBY", name, to_i64(by))?;
                if created {
                    let at = expiry(call, ttl_ms);
                    run_replicated(ctx, c"PEXPIREAT", name, at)?;
                    slot.expires_ms = u64::try_from(at).ok();
                }
                return Ok(());
            }
            slot.key.write_string(decimal(value, &mut [0; 20]))?;
            slot.value = Some(value);
            replicate_int(ctx, c"INCRBY", name, to_i64(by))?;
            slot.announce(ctx, Event::String, c"incrby");
            if created {
                let at = expiry(call, ttl_ms);
                slot.key.expire_at(at)?;
                slot.expires_ms = u64::try_from(at).ok();
                replicate_int(ctx, c"PEXPIREAT", name, at)?;
                slot.announce(ctx, Event::Generic, c"expire");
            }
        }
        Write::DecrBy { by, .. } => {
            let value = slot.value.unwrap_or(0).saturating_sub(by);
            slot.key.write_string(decimal(value, &mut [0; 20]))?;
            slot.value = Some(value);
            replicate_int(ctx, c"DECRBY", name, to_i64(by))?;
            slot.announce(ctx, Event::String, c"decrby");
        }
        Write::SetExpiring { value, ttl_ms, .. } => {
            let at = expiry(call, ttl_ms);
            slot.expires_ms = u64::try_from(at).ok();
            // A TTL under 1 ms (RL.THROTTLE truncates, as redis-cell does) gives an
            // instant that is already now: some servers' SET … PXAT (Valkey 8) delete
            // such a key at once, where it must live out its millisecond as redis-cell's
            // does. The key API keeps it; it is gone within the millisecond either way.
            if integers() && ttl_ms > 0 {
                // SET stores the TAT as an integer, as the script's SET does.
                slot.written_by_redis(value);
                return run_set_pxat(ctx, name, to_i64(value), at);
            }
            // One string is both the stored value and the replicated SET's.
            let text = OwnedString::from_i64(ctx, to_i64(value))?;
            slot.key.write_string(bytes(text.ptr))?;
            slot.key.expire_at(at)?;
            slot.value = Some(value);
            replicate_set_pxat(ctx, name, text.ptr, at)?;
            slot.announce(ctx, Event::String, c"set");
            slot.announce(ctx, Event::Generic, c"expire");
        }
        Write::SetFields { fields, ttl_ms, .. } => {
            set_text(call, slot, &fields.format(), ttl_ms)?;
            slot.fields = Some(fields);
        }
        Write::Expire { ttl_ms, .. } => {
            if slot.key.kind() != Kind::Empty {
                // The script's PEXPIRE <window>, as the absolute instant replicas share.
                let at = expiry(call, ttl_ms);
                slot.key.expire_at(at)?;
                slot.expires_ms = u64::try_from(at).ok();
                replicate_int(ctx, c"PEXPIREAT", name, at)?;
                slot.announce(ctx, Event::Generic, c"expire");
            }
        }
        Write::Delete { .. } => {
            if slot.key.kind() != Kind::Empty {
                slot.key.delete()?;
                replicate_key(ctx, c"DEL", name)?;
                slot.announce(ctx, Event::Generic, c"del");
            }
            slot.value = None;
            slot.expires_ms = None;
            slot.fields = None;
            if let Some(log) = &mut slot.log {
                log.cleared();
            }
        }
        Write::Trim { cutoff, .. } => trim(call, slot, cutoff)?,
        Write::Add { at, count, .. } => add(call, slot, at, count)?,
        Write::RemoveNewest { count, cutoff, .. } => remove_newest(call, slot, count, cutoff)?,
        Write::SetMember { score, .. } => set_member(call, slot, score)?,
        Write::RemoveMember { .. } => remove_member(call, slot)?,
        Write::SetBlock {
            held,
            counted,
            ttl_ms,
            ..
        } => {
            set_text(call, slot, &held.format(counted), ttl_ms)?;
            slot.value = Some(held.end);
        }
    }
    Ok(())
}

/// SET of a string state expiring `ttl_ms` from the server's now, replicated as
/// SET … PXAT and announced as the script's SET … PX.
fn set_text(call: &Call, slot: &mut Slot, text: &[u8], ttl_ms: u64) -> Result<()> {
    let (ctx, name) = (call.ctx, slot.name.ptr());
    let at = expiry(call, ttl_ms);
    let text = OwnedString::new(ctx, text)?;
    slot.key.write_string(bytes(text.ptr))?;
    slot.key.expire_at(at)?;
    replicate_set_pxat(ctx, name, text.ptr, at)?;
    slot.announce(ctx, Event::String, c"set");
    slot.announce(ctx, Event::Generic, c"expire");
    Ok(())
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

/// The most members one replicated ZADD or ZREM carries: a COST of a million reaches
/// replicas and the AOF as a thousand commands of a thousand members each, not as one
/// of two million arguments (which a replica must buffer whole before running it).
/// The scripts write in batches of the same size (Lua's `unpack` cannot take more
/// than a few thousand values).
const EFFECT_BATCH: u64 = 1_000;

/// Adds `count` entries at `at`, each with a fresh random suffix; a suffix that is
/// already taken is drawn again, so every unit is counted.
pub fn add(call: &Call, slot: &mut Slot, at: u64, count: u64) -> Result<()> {
    let ctx = call.ctx;
    let name = slot.name.ptr();
    // One score string serves every member of the replicated ZADD.
    let score = OwnedString::from_i64(ctx, i64::try_from(at).unwrap_or(i64::MAX))?;
    let new_member = |key: &Key| -> Result<OwnedString> {
        loop {
            let member = OwnedString::new(ctx, &log_member(at, random_bytes()))?;
            if key.zadd_new(at as f64, member.ptr)? {
                return Ok(member);
            }
        }
    };
    if count == 1 {
        // The usual COST: one ZADD of three strings, with no argument list to build.
        let member = new_member(&slot.key)?;
        replicate(ctx, c"ZADD", &[name, score.ptr, member.ptr])?;
        slot.announce(ctx, Event::Zset, c"zadd");
    } else {
        // As the script's batches: one ZADD (and one event) per EFFECT_BATCH members.
        for batch in sorted_suffixes(count).chunks(EFFECT_BATCH as usize) {
            let mut zadd = Effect::new(ctx, name);
            for &suffix in batch {
                let member = OwnedString::new(ctx, &log_member(at, suffix.to_be_bytes()))?;
                let member = if slot.key.zadd_new(at as f64, member.ptr)? {
                    member
                } else {
                    new_member(&slot.key)?
                };
                zadd = zadd.string(score.ptr).string(member.ptr).keep(member);
            }
            zadd.replicate(c"ZADD")?;
            slot.announce(ctx, Event::Zset, c"zadd");
        }
    }
    if let Some(log) = &mut slot.log {
        log.total = log.total.saturating_add(count);
        log.changed();
    }
    Ok(())
}

/// REFUND: removes the `count` newest entries inside the window, replicated as ZREMs
/// of at most EFFECT_BATCH members.
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
    for batch in doomed.chunks(EFFECT_BATCH as usize) {
        batch
            .iter()
            .fold(Effect::new(ctx, name), |zrem, m| zrem.string(m.ptr))
            .replicate(c"ZREM")?;
        slot.announce(ctx, Event::Zset, c"zrem");
    }
    if slot.key.kind() == Kind::Empty {
        slot.announce(ctx, Event::Generic, c"del");
    }
    if let Some(log) = &mut slot.log {
        log.total = log.total.saturating_sub(doomed.len() as u64);
        log.changed();
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
    log.changed();
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
    log.changed();
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

/// `count` distinct random suffixes, ascending. Members added in their sorted order
/// each land next to the one before in the sorted set, on a path still in the cache;
/// in random order each insertion misses the cache on most levels of the skip list,
/// which makes a million members about four times slower.
fn sorted_suffixes(count: u64) -> Vec<u32> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut suffixes: Vec<u32> = Vec::with_capacity(count);
    while suffixes.len() < count {
        let missing = count - suffixes.len();
        suffixes.extend((0..missing).map(|_| u32::from_be_bytes(random_bytes())));
        suffixes.sort_unstable();
        suffixes.dedup();
    }
    suffixes
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
