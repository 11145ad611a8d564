//! What each command does with its arguments: parse, then hand the limits to the
//! engine (or, for RL.PSEUDONYM, hash).

use super::call::{Call, Reply, MAX_ARGS};
use super::engine::{self, Limit};
use super::secret::with_secret;
use super::top;
use crate::args::{parse_all, parse_now, parse_u64};
use crate::command::{joinable, Command};
use crate::error::{Error, Result};
use crate::limit::Mode;
use crate::pseudonym;

fn name(command: &'static Command) -> &'static str {
    command.name
}

/// `RL.<ALGO> <key> <limit> <window> [options]`.
pub fn limiter(call: &Call, command: &'static Command, _: &'static [Command]) -> Result<Reply> {
    let algorithm = command
        .algorithm
        .ok_or(Error::Internal("a limiter command without an algorithm"))?;
    let mut buf = [&[][..]; MAX_ARGS];
    let args = call.args_from(2, &mut buf)?;
    let r = algorithm.parse(name(command), args)?;
    let limit = Limit {
        algorithm,
        key: call.arg(1),
        spec: r.spec,
        // Positions in `args` start after the key.
        member: r.member.map(|at| call.arg(at + 2)),
    };
    let now = r.now.unwrap_or_else(|| call.server_now_us());
    let answer = engine::single(call, &limit, now, r.mode)?;
    let d = answer.decision;
    if r.mode == Mode::Spend {
        top::record(call.key(), d.allowed, command, algorithm, now);
    }
    Ok(Reply::Ints(
        d.allowed,
        answer.ints(algorithm.reply(&d, &limit.spec)),
    ))
}

/// `RL.ALL <numlimits> <algo> <key> <limit> <window> [BURST b] [COST n] ... [NOW t]
/// [PEEK|REFUND|RESET]`.
pub fn all(call: &Call, command: &'static Command, table: &'static [Command]) -> Result<Reply> {
    let args = call.all_args();
    let r = parse_all(&args, |name| joinable(table, name))?;
    // Positions in `args` start after the command name.
    let lease = r.lease.map(|at| call.arg(at + 1));
    let limits: Vec<Limit> = r
        .limits
        .iter()
        .map(|l| Limit {
            algorithm: l.algorithm,
            key: call.arg(l.key + 1),
            spec: l.spec,
            member: lease.filter(|_| l.algorithm.uses_member()),
        })
        .collect();
    let now = r.now.unwrap_or_else(|| call.server_now_us());
    let (total, each) = engine::all(call, &limits, now, r.mode)?;
    if r.mode == Mode::Spend {
        // Each limit that denied is counted as the denial, under its own algorithm.
        for (l, a) in limits.iter().zip(&each) {
            let allowed = total.allowed || a.decision.allowed;
            if total.allowed || !a.decision.allowed {
                top::record(l.key, allowed, command, l.algorithm, now);
            }
        }
    }
    let each = each.iter().map(|a| a.ints(a.decision.ints())).collect();
    Ok(Reply::All(total, each))
}

/// Where RL.ALL's keys are, for Redis (cluster routing, ACL, COMMAND GETKEYS):
/// positions counted from the command name. A call that does not parse declares
/// none, and then gets its syntax error from the command itself.
pub fn all_key_positions(table: &'static [Command], args: &[&[u8]]) -> Vec<usize> {
    parse_all(args, |name| joinable(table, name))
        .map(|r| r.limits.iter().map(|l| l.key + 1).collect())
        .unwrap_or_default()
}

/// `RL.PSEUDONYM <identity> [<scope>] [PREFIX6 <bits>] [NOW <µs>]`: keyless.
pub fn pseudonym(call: &Call, _: &'static Command, _: &'static [Command]) -> Result<Reply> {
    let mut buf = [&[][..]; MAX_ARGS];
    let args = call.args_from(1, &mut buf)?;
    let Some((identity, rest)) = args.split_first() else {
        return Err(Error::WrongArity("rl.pseudonym"));
    };
    // Options always come in pairs, so an odd count means a scope comes first: a scope
    // that happens to read "NOW" is still a scope.
    let (scope, options) = match rest.split_first() {
        Some((scope, options)) if rest.len() % 2 == 1 => (Some(*scope), options),
        _ => (None, rest),
    };
    let mut prefix6 = None;
    let mut now = None;
    for pair in options.chunks(2) {
        let [name, value] = pair else {
            return Err(Error::WrongArity("rl.pseudonym"));
        };
        if name.eq_ignore_ascii_case(b"PREFIX6") {
            if prefix6.is_some() {
                return Err(Error::RepeatedOption("PREFIX6"));
            }
            let bits = parse_u64(value)
                .and_then(|b| u8::try_from(b).ok())
                .filter(|b| (1..=128).contains(b))
                .ok_or(Error::BadPrefix)?;
            prefix6 = Some(bits);
        } else if name.eq_ignore_ascii_case(b"NOW") {
            if now.is_some() {
                return Err(Error::RepeatedOption("NOW"));
            }
            now = Some(parse_now(value)?);
        } else {
            return Err(Error::UnknownOption(
                String::from_utf8_lossy(name).into_owned(),
            ));
        }
    }
    let now = now.unwrap_or_else(|| call.server_now_us());
    let name = with_secret(|secret| pseudonym::pseudonym(secret, identity, scope, prefix6, now))?;
    Ok(Reply::Bulk(name))
}

/// Panics on purpose, after touching nothing.
pub fn debug_panic(_: &Call, _: &'static Command, _: &'static [Command]) -> Result<Reply> {
    panic!("rl.debug-panic was asked to panic");
}
