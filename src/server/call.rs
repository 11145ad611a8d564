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
use super::stats::Outcome;
use crate::algo::{Decision, Ints};
use crate::commands::Command;
use crate::error::{Error, Result};
use crate::limit::Mode;

/// More arguments than any single limiter command accepts: `<limit> <window>` and
/// every option once is 9; RL.PSEUDONYM takes at most 6.
pub const MAX_ARGS: usize = 12;

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

pub enum Reply {
    /// Whether the call was admitted, and the integers it replies.
    Ints(bool, Ints),
    /// RL.ALL: the aggregate, then each limit's integers.
    All(Decision, Vec<Ints>),
    Bulk(Vec<u8>),
    /// RL.TOP: worst first.
    Top(Vec<super::top::Row>),
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

thread_local! {
    /// What the panic hook saw of the last panic: message and place.
    static PANIC: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Keeps each panic's message for the Redis log and the error reply (stderr, where
/// Rust prints it, is usually discarded by Redis), then lets the default hook print it.
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()));
        previous(info);
    }));
}

/// Runs a command with everything a handler must not have to think about.
pub fn run(ctx: Ctx, argv: *mut RString, argc: c_int, command: &'static Command) -> c_int {
    let stats = &command.stats;
    let name = command.name;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let argc = usize::try_from(argc).unwrap_or(0);
        // RL.TOP alone is a whole command; every other one needs arguments.
        let least = if command.docs.arity == -1 { 1 } else { 2 };
        if argv.is_null() || argc < least {
            return Err(Error::WrongArity(name));
        }
        // SAFETY: Redis passes `argc` valid argument strings that outlive the call.
        let argv = unsafe { std::slice::from_raw_parts(argv, argc) };
        let call = Call {
            ctx,
            name,
            argv,
            clock: OnceCell::new(),
            flags: OnceCell::new(),
            caller: OnceCell::new(),
        };
        (command.handler)(&call, command)
    }));
    let result = outcome.unwrap_or_else(|_| {
        let what = PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "unknown panic".into());
        let what = what.replace('\n', " ");
        log_warning(ctx, &format!("{name} {what}"));
        Err(Error::Panic(what))
    });
    stats.record(match &result {
        Ok(Reply::Ints(true, _)) => Outcome::Allowed,
        Ok(Reply::All(d, _)) if d.allowed => Outcome::Allowed,
        Ok(Reply::Ints(..) | Reply::All(..)) => Outcome::Denied,
        Ok(Reply::Bulk(_) | Reply::Top(_)) => Outcome::Answered,
        Err(_) => Outcome::Error,
    });
    reply(ctx, result);
    raw::Status::Ok as c_int
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

fn reply_ints(ctx: Ctx, ints: &Ints) {
    let values = ints.as_slice();
    // SAFETY: the reply functions only append to the calling client's reply buffer.
    unsafe {
        if let (Some(array), Some(int)) = (
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithLongLong,
        ) {
            array(ctx, values.len() as std::os::raw::c_long);
            for &v in values {
                int(ctx, v);
            }
        }
    }
}

fn reply(ctx: Ctx, result: Result<Reply>) {
    // SAFETY: the reply functions only append to the calling client's reply buffer.
    unsafe {
        match result {
            Ok(Reply::Ints(_, ints)) => reply_ints(ctx, &ints),
            Ok(Reply::All(total, each)) => {
                if let (Some(array), Some(int)) = (
                    raw::RedisModule_ReplyWithArray,
                    raw::RedisModule_ReplyWithLongLong,
                ) {
                    array(ctx, 5);
                    int(ctx, i64::from(total.allowed));
                    int(ctx, i64::try_from(total.remaining).unwrap_or(i64::MAX));
                    int(ctx, total.retry_after_ms);
                    int(ctx, i64::try_from(total.reset_after_ms).unwrap_or(i64::MAX));
                    array(ctx, each.len() as std::os::raw::c_long);
                    for ints in &each {
                        reply_ints(ctx, ints);
                    }
                }
            }
            Ok(Reply::Top(rows)) => reply_top(ctx, &rows),
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

/// Each row as a map: a RESP3 map, or a flat field/value array in RESP2, which
/// redis-cli shows one field per line.
fn reply_top(ctx: Ctx, rows: &[super::top::Row]) {
    // SAFETY: the reply functions only append to the calling client's reply buffer.
    unsafe {
        let (Some(array), Some(int), Some(text)) = (
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithLongLong,
            raw::RedisModule_ReplyWithStringBuffer,
        ) else {
            return;
        };
        let bulk = |b: &[u8]| {
            text(ctx, b.as_ptr().cast(), b.len());
        };
        array(ctx, rows.len() as std::os::raw::c_long);
        for row in rows {
            match raw::RedisModule_ReplyWithMap {
                Some(map) => map(ctx, 7),
                None => array(ctx, 14),
            };
            bulk(b"key");
            bulk(&row.key);
            bulk(b"denied");
            int(ctx, i64::try_from(row.denied).unwrap_or(i64::MAX));
            bulk(b"admitted");
            int(ctx, i64::try_from(row.admitted).unwrap_or(i64::MAX));
            bulk(b"error");
            int(ctx, i64::try_from(row.error).unwrap_or(i64::MAX));
            bulk(b"last_denied_ms");
            int(ctx, row.last_denied_ms);
            bulk(b"command");
            bulk(row.kind.command.as_bytes());
            bulk(b"algorithm");
            bulk(row.kind.algorithm.to_ascii_lowercase().as_bytes());
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
