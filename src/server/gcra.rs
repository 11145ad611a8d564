//! RL.GCRA on one string key holding the TAT in microseconds, expiring when reached.

use super::call::{Call, Reply, MAX_ARGS};
use super::effects::{notify, replicate_set_pxat, Event};
use super::key::Key;
use crate::algo::ceil_ms;
use crate::algo::gcra::{decide, ttl_us, Rate};
use crate::args::{parse_counter, parse_limiter};
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
    let not_a_tat = || Error::NotACounter(String::from_utf8_lossy(call.key_bytes()).into_owned());
    let tat = match key.read_string()? {
        None => None,
        Some(text) => Some(
            parse_counter(text)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(not_a_tat)?,
        ),
    };
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
        .filter(|&t| i64::try_from(t).is_ok())
        .ok_or(Error::TatOverflow)?;
    let at = call.server_now_ms().saturating_add(
        i64::try_from(ceil_ms(u128::from(ttl_us(new_tat, now)))).unwrap_or(i64::MAX),
    );
    key.write_string(call.ctx, crate::layout::decimal(new_tat, &mut [0; 20]))?;
    key.expire_at(at)?;
    replicate_set_pxat(
        call.ctx,
        call.key(),
        i64::try_from(new_tat).unwrap_or(i64::MAX),
        at,
    );
    notify(call.ctx, Event::String, c"set", call.key());
    notify(call.ctx, Event::Generic, c"expire", call.key());
    Ok(Reply::Decision(decision))
}
