//! Reading RL.SLIDELOG's sorted set (and RL.CONCURRENCY's lease set): how many
//! entries are inside the window and which ones leave when. The writes to it are in
//! `slot.rs`, with every other write.
//!
//! Every call's work is bounded whatever the set holds (a script's log has no size
//! cap): at most `TRIM_BATCH` members are removed per call, counts come from ZCOUNT
//! (O(log n)) when a walk would be long, and the n-th oldest entry from its rank.

use super::call::Call;
use super::key::{
    bytes, call_command, free_string, lossy, zcount_up_to, Ctx, Key, Kind, OwnedString, Propagate,
    RString,
};
use crate::error::{Error, Result};
use crate::limit::MAX_NOW_US;

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
    pub fn count(&self) -> u64 {
        match self {
            Expired::Few(members) => members.len() as u64,
            Expired::Many(n) => *n,
        }
    }
}

/// What a call read of a set, kept up to date by the call's own writes to it.
pub struct LogState {
    ctx: Ctx,
    cutoff: u64,
    /// Members in the set, expired or not.
    pub total: u64,
    pub expired: Expired,
    /// The member the call names (a lease id), and its score if the set holds it.
    pub member: Option<RString>,
    pub member_score: Option<f64>,
    /// The newest entries inside the window, read once at load, where the newest is
    /// checked against the layout; the decision that follows reads them from here.
    /// `None` once the call's own writes may have changed them: read from the set.
    tops: Option<Tops>,
}

#[derive(Clone, Copy)]
struct Tops {
    newest: Option<f64>,
    /// The newest of the members other than the call's.
    newest_other: Option<f64>,
}

impl LogState {
    /// Reads the set `key` (named `name`); one whose newest entry is past NOW's
    /// ceiling (`holds` says what it should hold) is another layout's, refused.
    pub fn read(
        call: &Call,
        key: &Key,
        name: RString,
        cutoff: u64,
        member: Option<RString>,
        holds: &'static str,
    ) -> Result<LogState> {
        let empty = LogState {
            ctx: call.ctx,
            cutoff,
            total: 0,
            expired: Expired::Few(Vec::new()),
            member,
            member_score: None,
            tops: Some(Tops {
                newest: None,
                newest_other: None,
            }),
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
                let member_score = member.and_then(|m| key.score(m));
                let tops = read_tops(call.ctx, key, cutoff, member, member_score);
                // +inf included (a sorted set never holds a NaN).
                if tops.newest.is_some_and(|s| s > MAX_NOW_US as f64) {
                    return Err(Error::OutOfLayout(lossy(name), holds));
                }
                Ok(LogState {
                    total: key.value_length(),
                    expired,
                    member_score,
                    tops: Some(tops),
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
        self.tops = None;
    }

    /// The call wrote entries inside the window: its newest are read again.
    pub fn changed(&mut self) {
        self.tops = None;
    }

    /// Whether the call's member is in the set and not expired.
    pub fn member_live(&self) -> bool {
        self.member_score.is_some_and(|s| s > self.cutoff as f64)
    }

    /// The entries inside the window.
    pub fn count(&self) -> u64 {
        self.total.saturating_sub(self.expired.count())
    }

    /// The n-th oldest entry inside the window of the set `key` (named `name`).
    pub fn nth_oldest(&self, key: &Key, name: RString, n: u64) -> Option<i64> {
        if n == 0 {
            return None;
        }
        if n <= SHORT_WALK {
            let mut seen = 0;
            let mut found = None;
            key.for_each_in_range(
                self.cutoff as f64,
                f64::INFINITY,
                true,
                false,
                |m, score| {
                    free_string(self.ctx, m);
                    seen += 1;
                    if seen == n {
                        found = Some(timestamp(score));
                    }
                    seen < n
                },
            );
            return found;
        }
        let rank = self.expired.count().checked_add(n - 1)?;
        score_at_rank(self.ctx, name, rank).map(timestamp)
    }

    pub fn newest(&self, key: &Key) -> Option<i64> {
        match self.tops {
            Some(tops) => tops.newest,
            None => key.last_score_above(self.ctx, self.cutoff as f64),
        }
        .map(timestamp)
    }

    pub fn live_member_score(&self) -> Option<i64> {
        self.member_score
            .filter(|_| self.member_live())
            .map(timestamp)
    }

    pub fn newest_except_member(&self, key: &Key) -> Option<i64> {
        match self.tops {
            Some(tops) => tops.newest_other,
            None => {
                read_tops(self.ctx, key, self.cutoff, self.member, self.member_score).newest_other
            }
        }
        .map(timestamp)
    }
}

/// The newest entries above `cutoff`. Only when the call's `member` (scored
/// `member_score`) may be the newest are two members read from the top: it and the one
/// below it.
fn read_tops(
    ctx: Ctx,
    key: &Key,
    cutoff: u64,
    member: Option<RString>,
    member_score: Option<f64>,
) -> Tops {
    let newest = key.last_score_above(ctx, cutoff as f64);
    let Some(member) = member.filter(|_| newest.is_some() && member_score == newest) else {
        return Tops {
            newest,
            newest_other: newest,
        };
    };
    let member = bytes(member);
    let mut newest_other = None;
    key.for_each_in_range(cutoff as f64, f64::INFINITY, true, true, |m, score| {
        let other = bytes(m) != member;
        free_string(ctx, m);
        if other {
            newest_other = Some(score);
        }
        !other
    });
    Tops {
        newest,
        newest_other,
    }
}

/// A score as a whole microsecond, rounded so that an entry leaves no earlier than
/// its score says (scores written by others may be fractional; one past NOW's
/// ceiling is refused at load).
fn timestamp(score: f64) -> i64 {
    score.ceil() as i64
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
