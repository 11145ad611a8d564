//! RL.SLIDECOUNT on `<key>:<i>` and `<key>:<i-1>`.

use super::call::{Call, Reply, MAX_ARGS};
use super::counter::{check_cluster_key, check_migration, Counter};
use crate::algo::slidecount::{decide, window_index, Counters};
use crate::args::parse_limiter;
use crate::error::Result;
use crate::layout::counter_key;

pub fn command(call: &Call) -> Result<Reply> {
    let a = parse_limiter(
        "rl.slidecount",
        call.args_from(2, &mut [&[]; MAX_ARGS])?,
        false,
    )?;
    call.check_memory(a.peek)?;
    check_cluster_key(call)?;
    let now = a.now.unwrap_or(call.server_now_us);
    let i = window_index(now, a.window);
    let current = Counter::open(call, &counter_key(call.key_bytes(), i), !a.peek)?;
    // Window 0 (the epoch's) has no previous window.
    let previous = match i.checked_sub(1) {
        Some(p) => Some(Counter::open(
            call,
            &counter_key(call.key_bytes(), p),
            false,
        )?),
        None => None,
    };
    let mut read = vec![&current];
    read.extend(previous.as_ref());
    check_migration(call, &read)?;
    let counters = Counters {
        current: current.value,
        previous: previous.as_ref().map_or(0, |p| p.value),
    };
    let decision = decide(counters, a.limit, a.cost, a.window, now);
    if decision.allowed && !a.peek {
        current.add(call, a.cost, a.window.ms().saturating_mul(2))?;
    }
    Ok(Reply::Decision(decision))
}
