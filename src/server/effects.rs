//! What a command changed, told to the rest of Redis: replicas and the AOF get the
//! effects as plain core commands with absolute times (never the limiter command,
//! which would decide again with another clock), and keyspace subscribers get the
//! events the equivalent script's commands would have fired.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use redis_module::raw;

use super::key::{call_command, take_reply, Ctx, OwnedString, Propagate, RString};
use crate::error::{Error, Result};

/// Arguments of one replicated command: borrowed strings (the key, members) and
/// numbers the module formats.
pub struct Effect {
    ctx: Ctx,
    owned: Vec<OwnedString>,
    args: Vec<RString>,
}

impl Effect {
    pub fn new(ctx: Ctx, key: RString) -> Effect {
        Effect {
            ctx,
            owned: Vec::new(),
            args: vec![key],
        }
    }

    pub fn string(mut self, s: RString) -> Effect {
        self.args.push(s);
        self
    }

    /// Keeps a string alive until the effect is replicated.
    pub fn keep(mut self, s: OwnedString) -> Effect {
        self.owned.push(s);
        self
    }

    pub fn replicate(self, command: &CStr) -> Result<()> {
        replicate(self.ctx, command, &self.args)
    }
}

/// Words the replicated commands use on every call, made once and never freed: Redis
/// only takes a reference to a string it is handed ("s"), where a C string or a
/// number ("c", "l") costs it an allocation, formatting and a free each time.
#[derive(Clone, Copy)]
pub enum Word {
    One,
    NegInf,
    Pxat,
}

fn word(w: Word) -> RString {
    static WORDS: [AtomicPtr<raw::RedisModuleString>; 3] = [
        AtomicPtr::new(ptr::null_mut()),
        AtomicPtr::new(ptr::null_mut()),
        AtomicPtr::new(ptr::null_mut()),
    ];
    let (slot, text): (_, &[u8]) = match w {
        Word::One => (&WORDS[0], b"1"),
        Word::NegInf => (&WORDS[1], b"-inf"),
        Word::Pxat => (&WORDS[2], b"PXAT"),
    };
    let mut s = slot.load(Ordering::Relaxed);
    if s.is_null() {
        // SAFETY: a string without a context is not freed with any call; it lives as
        // long as the module. Commands run on Redis's main thread only.
        s = unsafe {
            raw::RedisModule_CreateString.map_or(ptr::null_mut(), |f| {
                f(ptr::null_mut(), text.as_ptr().cast(), text.len())
            })
        };
        slot.store(s, Ordering::Relaxed);
    }
    s
}

/// `n` as a Redis string; 1 (the usual COST) without allocating.
enum Number {
    Word(RString),
    Made(OwnedString),
}

impl Number {
    fn new(ctx: Ctx, n: i64) -> Result<Number> {
        if n == 1 {
            return Ok(Number::Word(word(Word::One)));
        }
        OwnedString::from_i64(ctx, n).map(Number::Made)
    }

    fn ptr(&self) -> RString {
        match self {
            Number::Word(s) => *s,
            Number::Made(s) => s.ptr,
        }
    }
}

/// `<command> <key>` (DEL).
pub fn replicate_key(ctx: Ctx, command: &CStr, key: RString) -> Result<()> {
    replicate(ctx, command, &[key])
}

/// `<command> <key> <n>` (PEXPIREAT, INCRBY, DECRBY).
pub fn replicate_int(ctx: Ctx, command: &CStr, key: RString, n: i64) -> Result<()> {
    let n = Number::new(ctx, n)?;
    replicate(ctx, command, &[key, n.ptr()])
}

/// `ZREMRANGEBYSCORE <key> -inf <max>`: the script's trim, as one command.
pub fn replicate_trim(ctx: Ctx, key: RString, max: i64) -> Result<()> {
    let max = Number::new(ctx, max)?;
    replicate(
        ctx,
        c"ZREMRANGEBYSCORE",
        &[key, word(Word::NegInf), max.ptr()],
    )
}

/// `SET <key> <value> PXAT <at>`.
pub fn replicate_set_pxat(ctx: Ctx, key: RString, value: RString, at_ms: i64) -> Result<()> {
    let at = Number::new(ctx, at_ms)?;
    replicate(ctx, c"SET", &[key, value, word(Word::Pxat), at.ptr()])
}

/// One command. Up to four arguments go as "s" each (referenced, not copied); more
/// as one "v" array, which costs Redis a reallocation. A failure here means a
/// replica would miss a write the primary made: it is an error, never ignored.
pub fn replicate(ctx: Ctx, command: &CStr, args: &[RString]) -> Result<()> {
    // SAFETY: the function pointer is only read; presence is checked at load.
    let Some(f) = (unsafe { raw::RedisModule_Replicate }) else {
        return Err(Error::Internal("RedisModule_Replicate is missing"));
    };
    let c = command.as_ptr();
    // SAFETY: each format has as many "s" as strings passed, all live; "v" takes the
    // array and its length.
    let rc = unsafe {
        match *args {
            [a] => f(ctx, c, c"s".as_ptr(), a),
            [a, b] => f(ctx, c, c"ss".as_ptr(), a, b),
            [a, b, d] => f(ctx, c, c"sss".as_ptr(), a, b, d),
            [a, b, d, e] => f(ctx, c, c"ssss".as_ptr(), a, b, d, e),
            _ => f(ctx, c, c"v".as_ptr(), args.as_ptr(), args.len()),
        }
    };
    if rc == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(Error::Internal("a write could not be replicated"))
    }
}

#[derive(Clone, Copy)]
pub enum Event {
    Generic,
    String,
    Zset,
}

pub fn notify(ctx: Ctx, kind: Event, event: &CStr, key: RString) {
    let class = match kind {
        Event::Generic => raw::REDISMODULE_NOTIFY_GENERIC,
        Event::String => raw::REDISMODULE_NOTIFY_STRING,
        Event::Zset => raw::REDISMODULE_NOTIFY_ZSET,
    };
    // SAFETY: a live key name and a static event name.
    unsafe {
        if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
            f(ctx, class as c_int, event.as_ptr(), key);
        }
    }
}

/// Tells WATCH and client-side caching that `key` changed. The module declares
/// `NO_IMPLICIT_SIGNAL_MODIFIED`, so this is the only way a key it wrote is signalled,
/// and a key it opened for writing but left alone is not.
pub fn signal_modified(ctx: Ctx, key: RString) {
    // SAFETY: a live key name, in a command's context.
    unsafe {
        if let Some(f) = raw::RedisModule_SignalModifiedKey {
            f(ctx, key);
        }
    }
}

/// `rl.integer-values`: counters and TATs are written by Redis's own INCRBY and SET,
/// which store them as the scripts' INCR and SET do (an integer, shared below
/// 10,000), 23 to 32 bytes per identity less than the raw strings the key API writes,
/// for an RM_Call per write (README, "Memory per identity"). A REFUND still writes
/// through the key API: Redis's DECRBY would announce itself as `incrby`.
pub static INTEGER_VALUES: AtomicBool = AtomicBool::new(true);

pub fn integers() -> bool {
    INTEGER_VALUES.load(Ordering::Relaxed)
}

/// `<command> <key> <n>` run by Redis itself (INCRBY, PEXPIREAT): it writes,
/// replicates, announces and signals itself, as the script's call does.
pub fn run_replicated(ctx: Ctx, command: &CStr, key: RString, n: i64) -> Result<()> {
    let n = Number::new(ctx, n)?;
    call_command(ctx, command, &[key, n.ptr()], Propagate::Yes, |_| ())
}

/// `SET <key> <value> PXAT <at>` run by Redis itself. The value goes as a number
/// ("l"): SET stores as an integer only an argument no one else holds, so not a
/// string of the module's.
pub fn run_set_pxat(ctx: Ctx, key: RString, value: i64, at_ms: i64) -> Result<()> {
    // SAFETY: the format's "s" are live strings, its "l" long longs.
    let reply = unsafe {
        let Some(call) = raw::RedisModule_Call else {
            return Err(Error::Internal("RedisModule_Call is missing"));
        };
        call(
            ctx,
            c"SET".as_ptr(),
            c"!slsl".as_ptr(),
            key,
            value as std::os::raw::c_longlong,
            word(Word::Pxat),
            at_ms as std::os::raw::c_longlong,
        )
    };
    take_reply(reply, |_| ())
}

/// `ZREMRANGEBYSCORE <key> -inf <max>` run by Redis itself (RM_Call with "!"): it
/// removes a long run of members in one pass, where the key API removes them one
/// lookup at a time, and it replicates and announces itself exactly as the script's
/// call does.
pub fn apply_trim(ctx: Ctx, key: RString, max: i64) -> Result<()> {
    let max = OwnedString::from_i64(ctx, max)?;
    call_command(
        ctx,
        c"ZREMRANGEBYSCORE",
        &[key, word(Word::NegInf), max.ptr],
        Propagate::Yes,
        |_| (),
    )
}
