//! The one engine behind every limiter command and RL.ALL: open the keys an
//! algorithm names, read them, ask it to decide, and hand the writes it asks for to
//! `slot.rs`, which carries them out, replicates and announces them.
//!
//! Everything that can refuse a call (arguments, key types, ACL, cluster, stored
//! values, overflow) is checked for every limit before the first write, so a refused
//! call changes nothing.

use super::acl::check_key;
use super::call::Call;
use super::key::{bytes, lossy, Key, OwnedString, RString};
use super::log::LogState;
use super::slot::{self, Name, Slot};
use crate::algo::block;
use crate::algo::state::{Held, Stored};
use crate::algo::{
    ceil_ms, Algorithm, Decision, Ints, KeyKind, KeyName, KeyUse, Verdict, Write, Writes, NO_WRITES,
};
use crate::error::{Error, Result};
use crate::layout::{counter_key_in, has_hash_tag, key_slot};
use crate::limit::{Block, Mode, Spec};

/// One limit of a call: an algorithm on a base key.
#[derive(Clone, Copy)]
pub struct Limit {
    pub algorithm: &'static dyn Algorithm,
    pub key: RString,
    pub spec: Spec,
    /// The member of the key's set the call names (a lease id), for algorithms that
    /// use one.
    pub member: Option<RString>,
}

/// Where the block key is among a limit's keys, for writes.
const BLOCK_KEY: usize = 2;

/// A limit with its keys open.
pub struct Loaded<'a> {
    limit: &'a Limit,
    slots: [Option<Slot>; 2],
    /// `<key>:block`, opened only when the call has BLOCK.
    block: Option<Slot>,
    /// What the block key holds (a block that passed included).
    held: Option<Held>,
}

/// What one limit answers: its decision, and with `STRIKES` the current block's.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub decision: Decision,
    pub strikes: Option<u64>,
}

impl Answer {
    /// The four integers, and the strikes when asked for.
    pub fn ints(&self, four: Ints) -> Ints {
        match self.strikes {
            Some(n) => {
                let mut all = [0; 5];
                for (out, v) in all.iter_mut().zip(four.as_slice()) {
                    *out = *v;
                }
                all[4] = i64::try_from(n).unwrap_or(i64::MAX);
                Ints::new(&all)
            }
            None => four,
        }
    }
}

impl Loaded<'_> {
    /// A limit before its keys are opened. `Loaded` is a few hundred bytes: it is
    /// filled where it lives rather than built and moved.
    fn new(limit: &Limit) -> Loaded<'_> {
        Loaded {
            limit,
            slots: [None, None],
            block: None,
            held: None,
        }
    }

    /// The block that holds at `now`, for a call with BLOCK.
    fn blocked(&self, now: u64) -> Option<Held> {
        self.held.filter(|h| self.block.is_some() && h.holds(now))
    }

    fn answer(&self, decision: Decision, now: u64) -> Answer {
        let counted = self.limit.spec.block.is_some_and(|b| b.strikes);
        Answer {
            decision,
            strikes: counted.then(|| self.blocked(now).map_or(0, |h| h.strikes)),
        }
    }

    fn slot_mut(&mut self, key: usize) -> Option<&mut Slot> {
        match key {
            BLOCK_KEY => self.block.as_mut(),
            k => self.slots.get_mut(k).and_then(Option::as_mut),
        }
    }

    fn stored<'a>(&'a self, buf: &'a mut [Stored<'a>; 2]) -> &'a [Stored<'a>] {
        let mut n = 0;
        for (out, slot) in buf.iter_mut().zip(self.slots.iter().flatten()) {
            *out = match (slot.log.as_ref(), slot.key_use.kind) {
                (Some(_), _) => Stored::Log(slot),
                (None, KeyKind::Pair) => Stored::Pair(slot.pair),
                (None, KeyKind::ExpiringInteger) => Stored::Expiring {
                    value: slot.value,
                    expires_ms: slot.expires_ms,
                },
                (None, _) => Stored::Integer(slot.value),
            };
            n += 1;
        }
        buf.get(..n).unwrap_or(&[])
    }

    fn decide(&self, now: u64) -> Verdict {
        let mut buf = [Stored::Integer(None); 2];
        let stored = self.stored(&mut buf);
        self.limit.algorithm.decide(stored, &self.limit.spec, now)
    }

    /// What PEEK, REFUND and RESET reply: what this request would get now, with the
    /// state's own reset (the request it would admit not counted).
    fn peek(&self, now: u64) -> Decision {
        if let Some(held) = self.blocked(now) {
            return held.decision(now);
        }
        let mut buf = [Stored::Integer(None); 2];
        let stored = self.stored(&mut buf);
        let (a, spec) = (self.limit.algorithm, &self.limit.spec);
        Decision {
            reset_after_ms: a.own_reset_ms(stored, spec, now),
            ..a.decide(stored, spec, now).decision
        }
    }

    /// The limiter's own keys (not the block key).
    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter().flatten()
    }

    /// DEL of every key of the limiter, then `then`.
    fn clear(&self, then: Option<Write>) -> Writes {
        let mut w = NO_WRITES;
        let keys = (0..self.slots().count()).map(|key| Write::Delete { key });
        for (out, write) in w.iter_mut().zip(keys.chain(then)) {
            *out = Some(write);
        }
        w
    }
}

/// A block key written to `held`, expiring when the block ends.
fn set_block(held: Held, block: &Block, now: u64) -> Write {
    Write::SetBlock {
        key: BLOCK_KEY,
        held,
        counted: block.counts(),
        ttl_ms: ceil_ms(u128::from(held.end.saturating_sub(now))),
    }
}

/// What a limit decides in `mode` and the writes that carry it out, as if it were
/// alone. With BLOCK: a call while blocked is answered from the block alone; a
/// spending call that is denied, or IMPOSE, starts a block, which clears the limiter's
/// keys so that the budget is full when it ends.
fn plan(l: &Loaded, mode: Mode, now: u64) -> (Decision, Result<Writes>) {
    let Some(b) = l.limit.spec.block else {
        let verdict = l.decide(now);
        return (verdict.decision, writes(l, mode, verdict.writes, now));
    };
    if let Some(held) = l.blocked(now) {
        if matches!(mode, Mode::Spend | Mode::Peek | Mode::Refund) {
            let (decision, after) = block::while_blocked(&b, held, mode, now);
            let w = [after.map(|h| set_block(h, &b, now)), None, None];
            return (decision, Ok(w));
        }
    }
    match mode {
        Mode::Impose => {
            let held = block::start(&b, now, 0);
            (
                held.decision(now),
                Ok(l.clear(Some(set_block(held, &b, now)))),
            )
        }
        Mode::Spend => {
            let verdict = l.decide(now);
            if verdict.decision.allowed {
                return (verdict.decision, verdict.writes);
            }
            let held = block::start(&b, now, 1);
            (
                held.decision(now),
                Ok(l.clear(Some(set_block(held, &b, now)))),
            )
        }
        _ => {
            let verdict = l.decide(now);
            (verdict.decision, writes(l, mode, verdict.writes, now))
        }
    }
}

/// Which keys a call in `mode` may write. With BLOCK a spending call may clear every
/// key of the limiter (a block starts).
fn writable(mode: Mode, key: &KeyUse, block: bool) -> bool {
    match mode {
        Mode::Peek => false,
        Mode::Spend => key.written || block,
        Mode::Refund => key.written,
        Mode::Reset | Mode::Impose => true,
    }
}

/// Opens and reads every key of `loaded`'s limit, checking everything a key can refuse.
fn load(call: &Call, loaded: &mut Loaded, mode: Mode, now: u64) -> Result<()> {
    let limit = loaded.limit;
    let a = limit.algorithm;
    a.check(&limit.spec)?;
    let uses = a.keys(&limit.spec, now);
    let blocks = limit.spec.block.is_some();
    let derived = blocks
        || uses
            .iter()
            .flatten()
            .any(|u| matches!(u.name, KeyName::Derived(_)));
    let base = bytes(limit.key);
    // Derived keys must share the base key's slot, which only a hash tag guarantees.
    if derived && call.in_cluster() && !has_hash_tag(base) {
        return Err(Error::NeedsHashTag(lossy(limit.key)));
    }
    if blocks {
        a.check_block()?;
        load_block(call, loaded, mode)?;
        // While blocked the limiter's own keys are neither read nor written.
        if loaded.blocked(now).is_some() && !matches!(mode, Mode::Reset | Mode::Impose) {
            return Ok(());
        }
    }
    for (slot, key_use) in loaded.slots.iter_mut().zip(uses) {
        let Some(key_use) = key_use else { continue };
        let write = writable(mode, &key_use, blocks);
        let name = match key_use.name {
            KeyName::Base => Name::Base(limit.key),
            KeyName::Derived(n) => {
                let name = OwnedString::new(call.ctx, &counter_key_in(base, n, &mut [0; 128]))?;
                // Not an argument, so Redis could not check it against the ACL.
                check_key(call.ctx, call.caller(), name.ptr, write)?;
                Name::Made(name)
            }
            KeyName::Block => return Err(Error::Internal("an algorithm named the block key")),
        };
        let key = Key::open(call.ctx, name.ptr(), write)?;
        let mut expires_ms = None;
        let mut pair = None;
        let (value, log) = match key_use.kind {
            KeyKind::Integer | KeyKind::ExpiringInteger => {
                let value = key.read_counter(call.ctx, name.ptr(), mode == Mode::Peek)?;
                // A value beyond the layout's range is another layout's (a TAT in
                // another unit): deciding on it would answer nonsense.
                let (largest, holds) = a.integer_layout();
                if value.is_some_and(|v| v > largest) {
                    return Err(Error::OutOfLayout(lossy(name.ptr()), holds));
                }
                if key_use.kind == KeyKind::ExpiringInteger && value.is_some() {
                    expires_ms = key.expires_at_ms();
                }
                (value, None)
            }
            KeyKind::Pair => {
                let (first, second, holds) = a.pair_layout();
                let refused = || Error::OutOfLayout(lossy(name.ptr()), holds);
                pair = key.read_parsed(call.ctx, name.ptr(), mode == Mode::Peek, |text| {
                    parse_pair(text)
                        .filter(|&(a, b)| a <= first && b <= second)
                        .ok_or_else(refused)
                })?;
                (None, None)
            }
            KeyKind::Log { expired_up_to } => (
                None,
                Some(LogState::read(
                    call,
                    &key,
                    name.ptr(),
                    expired_up_to,
                    limit.member,
                    a.log_layout(),
                )?),
            ),
        };
        let mut opened = Slot::new(name, key, key_use, value, log);
        opened.expires_ms = expires_ms;
        opened.pair = pair;
        *slot = Some(opened);
    }
    check_migration(call, loaded)
}

/// `<first>:<second>`, two plain decimal numbers.
fn parse_pair(text: &[u8]) -> Option<(u64, u64)> {
    let at = text.iter().position(|&b| b == b':')?;
    let first = crate::args::parse_u64(text.get(..at)?)?;
    let second = crate::args::parse_u64(text.get(at + 1..)?)?;
    Some((first, second))
}

/// Opens and reads `<key>:block`.
fn load_block(call: &Call, loaded: &mut Loaded, mode: Mode) -> Result<()> {
    let base = bytes(loaded.limit.key);
    let mut made = base.to_vec();
    made.extend_from_slice(b":block");
    let name = OwnedString::new(call.ctx, &made)?;
    // PEEK and REFUND never write it; a spending call may start or count a block.
    let write = !matches!(mode, Mode::Peek | Mode::Refund);
    check_key(call.ctx, call.caller(), name.ptr, write)?;
    let key = Key::open(call.ctx, name.ptr, write)?;
    let held = key.read_parsed(call.ctx, name.ptr, mode == Mode::Peek, |text| {
        Held::parse(text).ok_or_else(|| Error::NotABlock(lossy(name.ptr)))
    })?;
    loaded.held = held;
    let key_use = KeyUse {
        name: KeyName::Block,
        kind: KeyKind::Integer,
        written: true,
    };
    let value = held.map(|h| h.end);
    loaded.block = Some(Slot::new(Name::Made(name), key, key_use, value, None));
    Ok(())
}

/// While a slot moves between nodes, Redis sends a call to the importing node as
/// soon as the base key (which the window counters' limiters never write) is missing
/// on the old one, before the counters have moved. Deciding there would start from
/// zero, so, like Redis for a multi-key command whose keys are split, the call gets
/// TRYAGAIN until every counter it reads has arrived.
fn check_migration(call: &Call, loaded: &Loaded) -> Result<()> {
    // A counter is missing when its read found no key: no value, no second KeyType.
    let missing_counter = || {
        loaded.slots().any(|s| {
            let counter = matches!(s.key_use.kind, KeyKind::Integer);
            matches!(s.key_use.name, KeyName::Derived(_)) && counter && s.value.is_none()
        }) || loaded.block.as_ref().is_some_and(|b| b.value.is_none())
    };
    if call.in_cluster()
        && missing_counter()
        && super::cluster::importing(call.ctx, key_slot(bytes(loaded.limit.key)))
    {
        return Err(Error::TryAgain);
    }
    Ok(())
}

/// The writes a call in `mode` makes; `spend` are those its verdict holds.
fn writes(loaded: &Loaded, mode: Mode, spend: Result<Writes>, now: u64) -> Result<Writes> {
    match mode {
        Mode::Peek => Ok(crate::algo::NO_WRITES),
        // The verdict already holds them: a spending call reads its state only once.
        Mode::Spend => spend,
        Mode::Refund => {
            let mut buf = [Stored::Integer(None); 2];
            let stored = loaded.stored(&mut buf);
            loaded
                .limit
                .algorithm
                .refund(stored, &loaded.limit.spec, now)
        }
        Mode::Reset => Ok(loaded.clear(
            loaded
                .block
                .as_ref()
                .map(|_| Write::Delete { key: BLOCK_KEY }),
        )),
        // Only a limit without BLOCK gets here: IMPOSE leaves it alone.
        Mode::Impose => Ok(NO_WRITES),
    }
}

/// What can still refuse a write, checked before any limit writes anything.
fn check_write(loaded: &Loaded, write: &Write) -> Result<()> {
    if let Write::IncrBy { key, by, .. } = *write {
        let slot = loaded
            .slots
            .get(key)
            .and_then(Option::as_ref)
            .ok_or(Error::Internal("a write names no key"))?;
        slot.value
            .unwrap_or(0)
            .checked_add(by)
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or_else(|| Error::Overflow(lossy(slot.name.ptr())))?;
    }
    Ok(())
}

/// One limiter command: `RL.<ALGO> <key> ...`.
pub fn single(call: &Call, limit: &Limit, now: u64, mode: Mode) -> Result<Answer> {
    call.check_memory(mode)?;
    let mut loaded = Loaded::new(limit);
    load(call, &mut loaded, mode, now)?;
    let (decision, w) = plan(&loaded, mode, now);
    let w = w?;
    // A denial writes nothing: most calls under a flood stop here.
    if w.iter().any(Option::is_some) {
        for write in w.iter().flatten() {
            check_write(&loaded, write)?;
        }
        apply(call, &mut loaded, &w)?;
    }
    let decision = match mode {
        Mode::Spend => decision,
        // What a PEEK says, on the state as this call left it.
        Mode::Peek | Mode::Refund | Mode::Reset | Mode::Impose => loaded.peek(now),
    };
    Ok(loaded.answer(decision, now))
}

/// RL.ALL: every limit decides on its own state; all spend only if all admit.
pub fn all(call: &Call, limits: &[Limit], now: u64, mode: Mode) -> Result<(Decision, Vec<Answer>)> {
    call.check_memory(mode)?;
    let mut loaded: Vec<Loaded> = limits.iter().map(Loaded::new).collect();
    for l in &mut loaded {
        load(call, l, mode, now)?;
    }
    check_distinct(&loaded)?;
    let planned: Vec<(Decision, Result<Writes>)> =
        loaded.iter().map(|l| plan(l, mode, now)).collect();
    let decisions: Vec<Decision> = planned.iter().map(|p| p.0).collect();
    let total = crate::algo::aggregate(&decisions);
    let mut plans = Vec::with_capacity(loaded.len());
    for (l, (decision, w)) in loaded.iter().zip(planned) {
        // A denied RL.ALL writes nothing, not even the log's trim: none of its limits
        // is touched by a request that was refused, except a limit with BLOCK that
        // denied it (its block starts, or counts the strike).
        let refused = mode == Mode::Spend && !total.allowed;
        let w = if refused && (decision.allowed || l.limit.spec.block.is_none()) {
            NO_WRITES
        } else {
            w?
        };
        for write in w.iter().flatten() {
            check_write(l, write)?;
        }
        plans.push(w);
    }
    for (l, w) in loaded.iter_mut().zip(&plans) {
        apply(call, l, w)?;
    }
    let after: Vec<Decision> = match mode {
        Mode::Spend => decisions,
        Mode::Peek | Mode::Refund | Mode::Reset | Mode::Impose => {
            loaded.iter().map(|l| l.peek(now)).collect()
        }
    };
    let total = match mode {
        Mode::Spend => total,
        _ => crate::algo::aggregate(&after),
    };
    let answers = loaded
        .iter()
        .zip(after)
        .map(|(l, d)| l.answer(d, now))
        .collect();
    Ok((total, answers))
}

/// Two limits writing one key would each decide on the state the other is about to
/// change, and two open handles on one key could go stale under each other's writes.
fn check_distinct(loaded: &[Loaded]) -> Result<()> {
    let names: Vec<&[u8]> = loaded
        .iter()
        .flat_map(|l| l.slots().chain(l.block.as_ref()))
        .map(|s| bytes(s.name.ptr()))
        .collect();
    for (i, name) in names.iter().enumerate() {
        if names.iter().skip(i + 1).any(|other| other == name) {
            return Err(Error::DuplicateKey(
                String::from_utf8_lossy(name).into_owned(),
            ));
        }
    }
    Ok(())
}

fn apply(call: &Call, loaded: &mut Loaded, writes: &Writes) -> Result<()> {
    for write in writes.iter().flatten() {
        let key = write.key();
        let slot = loaded
            .slot_mut(key)
            .ok_or(Error::Internal("a write names no key"))?;
        slot::apply(call, slot, write)?;
        match *write {
            Write::SetBlock { held, .. } => loaded.held = Some(held),
            Write::Delete { key: BLOCK_KEY } => loaded.held = None,
            _ => {}
        }
    }
    Ok(())
}
