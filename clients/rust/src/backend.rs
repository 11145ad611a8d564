//! Where decisions are made: the module's RL.* commands, or Lua scripts with the same
//! contract on a server that cannot load the module (most managed Redis). Both work on
//! the same keys, so a fleet can deploy the kit first and load the module later.

use std::sync::atomic::{AtomicU8, Ordering};

use redis::{Cmd, Script};

/// Which commands a limiter sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// The module where the server has it, else the scripts: the first `unknown
    /// command 'RL.…'` reply switches to scripts (and that call is retried on them, so
    /// no decision is lost); a lost connection makes the next call try the module again,
    /// so a module loaded later, or a failover to a server that has it, is picked up.
    #[default]
    Auto,
    /// Only the module's commands.
    Module,
    /// Only the scripts (`EVALSHA`, reloaded on `NOSCRIPT`).
    Scripts,
}

/// A script of the module's contract: `KEYS` = the command's keys, `ARGV` = its
/// arguments after the name, unchanged.
pub(crate) struct LimiterScript {
    pub source: &'static str,
    pub sha: String,
}

fn script(name: &str) -> Option<&'static str> {
    Some(match name {
        "RL.FIXED" => include_str!("../scripts/fixed.lua"),
        "RL.COUNTER" => include_str!("../scripts/counter.lua"),
        "RL.SLIDECOUNT" => include_str!("../scripts/slidecount.lua"),
        "RL.SLIDELOG" => include_str!("../scripts/slidelog.lua"),
        "RL.SLIDEWINDOW" => include_str!("../scripts/slidewindow.lua"),
        "RL.TOKENBUCKET" => include_str!("../scripts/tokenbucket.lua"),
        "RL.GCRA" => include_str!("../scripts/gcra.lua"),
        "RL.CONCURRENCY" => include_str!("../scripts/concurrency.lua"),
        "RL.THROTTLE" => include_str!("../scripts/throttle.lua"),
        "RL.ALL" => include_str!("../scripts/all.lua"),
        _ => return None,
    })
}

/// `EVALSHA <sha> <numkeys> <keys…> <the command's arguments>` for a module command,
/// and the script, to load on `NOSCRIPT`. `None` for a command without a script
/// (RL.PSEUDONYM).
pub(crate) fn as_script(cmd: &Cmd, keys: &[&str]) -> Option<(Cmd, LimiterScript)> {
    let mut args = cmd.args_iter().filter_map(|a| match a {
        redis::Arg::Simple(bytes) => Some(bytes),
        _ => None,
    });
    let name = std::str::from_utf8(args.next()?).ok()?.to_ascii_uppercase();
    let source = script(&name)?;
    let sha = Script::new(source).get_hash().to_string();
    let mut eval = redis::cmd("EVALSHA");
    eval.arg(&sha).arg(keys.len());
    for key in keys {
        eval.arg(*key);
    }
    for arg in args {
        eval.arg(arg);
    }
    Some((eval, LimiterScript { source, sha }))
}

/// What `Auto` has learnt about the connection's server.
#[derive(Debug, Default)]
pub(crate) struct Detected(AtomicU8);

const UNKNOWN: u8 = 0;
const SCRIPTS: u8 = 1;

impl Detected {
    pub fn scripts(&self) -> bool {
        self.0.load(Ordering::Relaxed) == SCRIPTS
    }
    pub fn found_no_module(&self) {
        self.0.store(SCRIPTS, Ordering::Relaxed);
    }
    /// After a lost connection the server may be another one, or have the module now.
    pub fn forget(&self) {
        self.0.store(UNKNOWN, Ordering::Relaxed);
    }
}

/// Whether a server's error says it has no such RL.* command (Redis 7+ quotes the name
/// with ', Redis 6.2 with `).
pub(crate) fn is_unknown_rl_command(error: &redis::RedisError) -> bool {
    let text = error.to_string().to_ascii_lowercase();
    text.contains("unknown command") && (text.contains("'rl.") || text.contains("`rl."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_becomes_its_script_with_the_same_arguments() {
        let mut cmd = redis::cmd("RL.FIXED");
        cmd.arg("rl:{u}").arg(10).arg("60").arg("COST").arg(2);
        let (eval, script) = as_script(&cmd, &["rl:{u}"]).unwrap();
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b.to_vec()),
                _ => None,
            })
            .collect();
        let text: Vec<String> = args
            .iter()
            .map(|a| String::from_utf8_lossy(a).into())
            .collect();
        assert_eq!(
            text,
            [
                "EVALSHA",
                &script.sha,
                "1",
                "rl:{u}",
                "rl:{u}",
                "10",
                "60",
                "COST",
                "2"
            ]
        );
        assert_eq!(script.sha.len(), 40);
        assert!(as_script(&redis::cmd("RL.PSEUDONYM"), &[]).is_none());
        // RL.COUNTER has its own script, with the key at KEYS[1] as for every limiter.
        let mut counter = redis::cmd("RL.COUNTER");
        counter.arg("rl:{u}").arg(2).arg("60");
        let (_, script) = as_script(&counter, &["rl:{u}"]).unwrap();
        assert!(script.source.contains("return main('counter')"));
    }

    #[test]
    fn unknown_command_is_read_in_both_quotings() {
        // Only the text is read: the kind stands in for the server's.
        let reply = |text: &str| {
            redis::RedisError::from((redis::ErrorKind::Extension, "reply", text.to_string()))
        };
        // Redis 7+ and Valkey quote the name with ', Redis 6.2 with `.
        assert!(is_unknown_rl_command(&reply(
            "unknown command 'RL.FIXED', with args beginning with: 'k' "
        )));
        assert!(is_unknown_rl_command(&reply(
            "unknown command `RL.FIXED`, with args beginning with: `k`, "
        )));
        assert!(!is_unknown_rl_command(&reply(
            "unknown command `FOO`, with args beginning with: "
        )));
        assert!(!is_unknown_rl_command(&reply(
            "ERR syntax error: unknown option 'RL.X'"
        )));
    }
}
