//! One command invocation: its arguments, its single clock read, its caller, and
//! what it replies.

use std::cell::OnceCell;
use std::ffi::CString;
use std::time::{SystemTime, UNIX_EPOCH};

use redis_module::raw;

use super::acl::Caller;
use super::key::{bytes, Ctx, RString};
use crate::algo::{Decision, Ints};
use crate::error::{Error, Result};
use crate::limit::Mode;
use crate::top::Row;

/// The most arguments after the key a limiter command accepts: RL.COUNTER's
/// `<limit> <window>` and every option once (COST n, NOW t, a mode, BLOCK d,
/// BACKOFF max, STRIKES, COUNTALL, RENEW, ESCALATE) is 15 (RENEW and ESCALATE exclude
/// each other, which the parser says); RL.PSEUDONYM takes at most 6.
pub const MAX_ARGS: usize = 15;

pub struct Call<'a> {
    pub ctx: Ctx,
    name: &'static str,
    argv: &'a [RString],
    /// The server's wall clock, read at most once for the whole command: every
    /// decision and every expiry instant of this call derives from this one reading.
    /// A call that names its NOW and writes nothing (a denial) never reads it.
    clock: OnceCell<u64>,
    flags: OnceCell<u32>,
    caller: OnceCell<Caller>,
}

impl<'a> Call<'a> {
    pub fn new(ctx: Ctx, name: &'static str, argv: &'a [RString]) -> Call<'a> {
        Call {
            ctx,
            name,
            argv,
            clock: OnceCell::new(),
            flags: OnceCell::new(),
            caller: OnceCell::new(),
        }
    }
}

pub enum Reply {
    /// Whether the call was admitted, and the integers it replies.
    Ints(bool, Ints),
    /// RL.ALL: the aggregate, then each limit's integers.
    All(Decision, Vec<Ints>),
    Bulk(Vec<u8>),
    /// RL.TOP: worst first.
    Top(Vec<Row>),
}

impl Call<'_> {
    /// The base key (argument 1), which Redis already routed and ACL-checked.
    pub fn key(&self) -> RString {
        self.argv.get(1).copied().unwrap_or(std::ptr::null_mut())
    }

    pub fn key_bytes(&self) -> &[u8] {
        bytes(self.key())
    }

    /// Arguments from position `from` on, as byte strings, in `buf` (no allocation on
    /// the hot path). More than fit are reported as a syntax error by the caller,
    /// since no command takes that many.
    pub fn args_from<'b>(
        &self,
        from: usize,
        buf: &'b mut [&'b [u8]; MAX_ARGS],
    ) -> Result<&'b [&'b [u8]]> {
        let rest = self.argv.get(from..).unwrap_or(&[]);
        if rest.len() > MAX_ARGS {
            return Err(Error::TooManyArguments(self.name));
        }
        for (slot, &s) in buf.iter_mut().zip(rest) {
            *slot = bytes(s);
        }
        Ok(buf.get(..rest.len()).unwrap_or(&[]))
    }

    /// Every argument after the command name, as byte strings.
    pub fn all_args(&self) -> Vec<&[u8]> {
        self.argv.iter().skip(1).map(|&s| bytes(s)).collect()
    }

    /// The argument at `index` (0 is the command name).
    pub fn arg(&self, index: usize) -> RString {
        self.argv
            .get(index)
            .copied()
            .unwrap_or(std::ptr::null_mut())
    }

    pub fn server_now_us(&self) -> u64 {
        *self.clock.get_or_init(wall_clock_us)
    }

    pub fn server_now_ms(&self) -> i64 {
        i64::try_from(self.server_now_us() / 1000).unwrap_or(i64::MAX)
    }

    /// The context flags, read once per call: Redis computes them all (memory state
    /// included) on every read.
    fn flags(&self) -> u32 {
        *self.flags.get_or_init(|| {
            // SAFETY: GetContextFlags only reads the context.
            unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(self.ctx)) as u32 }
        })
    }

    /// Refuses a call that may add data while Redis is over `maxmemory`. The
    /// commands are not flagged deny-oom so that PEEK, which writes nothing, and
    /// REFUND and RESET, which only free memory, still answer.
    pub fn check_memory(&self, mode: Mode) -> Result<()> {
        if matches!(mode, Mode::Spend | Mode::Impose)
            && self.flags() & raw::REDISMODULE_CTX_FLAGS_OOM != 0
        {
            return Err(Error::OutOfMemory);
        }
        Ok(())
    }

    /// The calling user, for checking derived keys.
    pub fn caller(&self) -> &Caller {
        self.caller.get_or_init(|| Caller::lookup(self.ctx))
    }

    pub fn in_cluster(&self) -> bool {
        self.flags() & raw::REDISMODULE_CTX_FLAGS_CLUSTER != 0
    }
}

fn wall_clock_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// A line in the Redis log at the warning level.
pub fn log_warning(ctx: Ctx, text: &str) {
    let Ok(text) = CString::new(text.replace('\0', "?")) else {
        return;
    };
    // SAFETY: a "%s" format with one C string.
    unsafe {
        if let Some(log) = raw::RedisModule_Log {
            log(ctx, c"warning".as_ptr(), c"%s".as_ptr(), text.as_ptr());
        }
    }
}
