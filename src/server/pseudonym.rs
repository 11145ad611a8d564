//! RL.PSEUDONYM <identity> [<scope>] [PREFIX6 <bits>] [NOW <µs>]: keyless.

use super::call::{Call, Reply, MAX_ARGS};
use super::secret::with_secret;
use crate::args::{parse_now, parse_u64};
use crate::error::{Error, Result};
use crate::pseudonym::pseudonym;

pub fn command(call: &Call) -> Result<Reply> {
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
    let now = now.unwrap_or(call.server_now_us);
    let name = with_secret(|secret| pseudonym(secret, identity, scope, prefix6, now))?;
    Ok(Reply::Bulk(name))
}
