//! One command invocation: its arguments, its single clock read, and the guard that
//! turns any failure, a panic included, into an error reply instead of a dead server.

use std::cell::OnceCell;
use std::ffi::CString;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{SystemTime, UNIX_EPOCH};

use redis_module::raw;

use super::acl::Caller;
use super::key::{bytes, Ctx, RString};
use super::stats::{Outcome, Stats};
use crate::algo::Decision;
use crate::error::{Error, Result};

/// More arguments than any command accepts: `<limit> <window>` and every option once
/// is 9; RL.PSEUDONYM takes at most 6.
pub const MAX_ARGS: usize = 12;

pub struct Call<'a> {
    pub ctx: Ctx,
    name: &'static str,
    argv: &'a [RString],
    /// The server's wall clock, read once for the whole command: every decision and
    /// every expiry instant of this call derives from this one reading.
    pub server_now_us: u64,
    flags: OnceCell<u32>,
    caller: OnceCell<Caller>,
}

pub enum Reply {
    Decision(Decision),
    Bulk(Vec<u8>),
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

    pub fn server_now_ms(&self) -> i64 {
        i64::try_from(self.server_now_us / 1000).unwrap_or(i64::MAX)
    }

    /// The context flags, read once per call: Redis computes them all (memory state
    /// included) on every read.
    fn flags(&self) -> u32 {
        *self.flags.get_or_init(|| {
            // SAFETY: GetContextFlags only reads the context.
            unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(self.ctx)) as u32 }
        })
    }

    /// Refuses a call that may write while Redis is over `maxmemory`. The commands
    /// are not flagged deny-oom so that PEEK, which writes nothing, still answers.
    pub fn check_memory(&self, peek: bool) -> Result<()> {
        if !peek && self.flags() & raw::REDISMODULE_CTX_FLAGS_OOM != 0 {
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

/// Runs a command handler with everything a handler must not have to think about.
pub fn run(
    ctx: Ctx,
    argv: *mut RString,
    argc: c_int,
    stats: &'static Stats,
    handler: fn(&Call) -> Result<Reply>,
) -> c_int {
    let name = stats.command;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let argc = usize::try_from(argc).unwrap_or(0);
        if argv.is_null() || argc < 2 {
            return Err(Error::WrongArity(name));
        }
        // SAFETY: Redis passes `argc` valid argument strings that outlive the call.
        let argv = unsafe { std::slice::from_raw_parts(argv, argc) };
        let call = Call {
            ctx,
            name,
            argv,
            server_now_us: wall_clock_us(),
            flags: OnceCell::new(),
            caller: OnceCell::new(),
        };
        handler(&call)
    }));
    let result = outcome.unwrap_or(Err(Error::Internal(
        "the command failed unexpectedly; nothing was written after the failure",
    )));
    stats.record(match &result {
        Ok(Reply::Decision(d)) if d.allowed => Outcome::Allowed,
        Ok(Reply::Decision(_)) => Outcome::Denied,
        Ok(Reply::Bulk(_)) => Outcome::Answered,
        Err(_) => Outcome::Error,
    });
    reply(ctx, result);
    raw::Status::Ok as c_int
}

fn reply(ctx: Ctx, result: Result<Reply>) {
    // SAFETY: the reply functions only append to the calling client's reply buffer.
    unsafe {
        match result {
            Ok(Reply::Decision(d)) => {
                if let (Some(array), Some(int)) = (
                    raw::RedisModule_ReplyWithArray,
                    raw::RedisModule_ReplyWithLongLong,
                ) {
                    array(ctx, 4);
                    int(ctx, i64::from(d.allowed));
                    int(ctx, i64::try_from(d.remaining).unwrap_or(i64::MAX));
                    int(ctx, d.retry_after_ms);
                    int(ctx, i64::try_from(d.reset_after_ms).unwrap_or(i64::MAX));
                }
            }
            Ok(Reply::Bulk(b)) => {
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(ctx, b.as_ptr().cast(), b.len());
                }
            }
            Err(e) => {
                let text = error_text(&e);
                if let Some(f) = raw::RedisModule_ReplyWithError {
                    f(ctx, text.as_ptr());
                }
            }
        }
    }
}

/// An error reply is one protocol line: key names quoted in it may hold any byte, so
/// control characters are replaced, and the line is kept short.
fn error_text(e: &Error) -> CString {
    let text: String = e
        .to_string()
        .chars()
        .take(512)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    CString::new(text).unwrap_or_default()
}
