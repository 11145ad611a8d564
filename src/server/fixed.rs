//! RL.FIXED on `<key>:<window start>`.

use super::call::{Call, Reply, MAX_ARGS};
use super::counter::{check_cluster_key, check_migration, Counter};
use crate::algo::fixed::{decide, window_start};
use crate::args::parse_limiter;
use crate::error::Result;
use crate::layout::{counter_key, fixed_window_name};

pub fn command(call: &Call) -> Result<Reply> {
    let a = parse_limiter("rl.fixed", call.args_from(2, &mut [&[]; MAX_ARGS])?, false)?;
    call.check_memory(a.peek)?;
    check_cluster_key(call)?;
    let now = a.now.unwrap_or(call.server_now_us);
    let start = fixed_window_name(window_start(now, a.window), a.window);
    let counter = Counter::open(call, &counter_key(call.key_bytes(), start), !a.peek)?;
    check_migration(call, &[&counter])?;
    let decision = decide(counter.value, a.limit, a.cost, a.window, now);
    if decision.allowed && !a.peek {
        counter.add(call, a.cost, a.window.ms().saturating_mul(2))?;
    }
    Ok(Reply::Decision(decision))
}
