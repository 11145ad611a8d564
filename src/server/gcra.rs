//! RL.GCRA on one string key holding the TAT in microseconds, expiring when reached.

use super::call::{Call, Reply, MAX_ARGS};
use super::effects::{notify, replicate_set_pxat, Event};
use super::key::{bytes, Key, OwnedString};
use crate::algo::ceil_ms;
use crate::algo::gcra::{decide, ttl_us, Rate};
use crate::args::parse_limiter;
use crate::error::{Error, Result};

pub fn command(call: &Call) -> Result<Reply> {
    let a = parse_limiter("rl.gcra", call.args_from(2, &mut [&[]; MAX_ARGS])?, true)?;
    call.check_memory(a.peek)?;
    // The TAT is stored in whole microseconds, so an emission interval below 1 µs
    // could not be represented: bursts and costs would be spent a microsecond at once.
    if a.limit > a.window.us() {
        return Err(Error::RateTooHigh(a.window.us()));
    }
    let now = a.now.unwrap_or(call.server_now_us);
    let key = Key::open(call.ctx, call.key(), !a.peek)?;
    let tat = key.read_counter(call.key())?;
    let rate = Rate {
        limit: a.limit,
        window: a.window,
        burst: a.burst.unwrap_or(a.limit),
    };
    let (decision, new_tat) = decide(tat, rate, a.cost, now);
    if !decision.allowed || a.peek {
        return Ok(Reply::Decision(decision));
    }
    let new_tat = new_tat
        .and_then(|t| i64::try_from(t).ok())
        .ok_or(Error::TatOverflow)?;
    let at = call.server_now_ms().saturating_add(
        i64::try_from(ceil_ms(u128::from(ttl_us(new_tat.unsigned_abs(), now)))).unwrap_or(i64::MAX),
    );
    // One string is both the stored value and the replicated SET's.
    let value = OwnedString::from_i64(call.ctx, new_tat)?;
    key.write_string(call.ctx, bytes(value.ptr))?;
    key.expire_at(at)?;
    replicate_set_pxat(call.ctx, call.key(), value.ptr, at);
    notify(call.ctx, Event::String, c"set", call.key());
    notify(call.ctx, Event::Generic, c"expire", call.key());
    Ok(Reply::Decision(decision))
}
