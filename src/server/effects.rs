//! What a command changed, told to the rest of Redis: replicas and the AOF get the
//! effects as plain core commands with absolute times (never the limiter command,
//! which would decide again with another clock), and keyspace subscribers get the
//! events the equivalent script's commands would have fired.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw;

use super::key::{Ctx, OwnedString, RString};

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

    pub fn replicate(self, command: &CStr) {
        // SAFETY: every argument is a live string; "v" passes them as an array.
        unsafe {
            if let Some(replicate) = raw::RedisModule_Replicate {
                replicate(
                    self.ctx,
                    command.as_ptr(),
                    c"v".as_ptr(),
                    self.args.as_ptr(),
                    self.args.len(),
                );
            }
        }
    }
}

/// `<command> <key> <n>` (PEXPIREAT, INCRBY), formatted by Redis itself: no strings
/// for the module to build and free on the hot path.
pub fn replicate_int(ctx: Ctx, command: &CStr, key: RString, n: i64) {
    // SAFETY: "sl" takes a live string and a long long.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(ctx, command.as_ptr(), c"sl".as_ptr(), key, n);
        }
    }
}

/// `ZREMRANGEBYSCORE <key> -inf <max>`: the script's trim, as one command.
pub fn replicate_trim(ctx: Ctx, key: RString, max: i64) {
    // SAFETY: "scl": a live string, a C string, a long long.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(
                ctx,
                c"ZREMRANGEBYSCORE".as_ptr(),
                c"scl".as_ptr(),
                key,
                c"-inf".as_ptr(),
                max,
            );
        }
    }
}

/// `SET <key> <value> PXAT <at>`.
pub fn replicate_set_pxat(ctx: Ctx, key: RString, value: i64, at_ms: i64) {
    // SAFETY: "slcl": a live string, a long long, a C string, a long long.
    unsafe {
        if let Some(replicate) = raw::RedisModule_Replicate {
            replicate(
                ctx,
                c"SET".as_ptr(),
                c"slcl".as_ptr(),
                key,
                value,
                c"PXAT".as_ptr(),
                at_ms,
            );
        }
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

/// `ZREMRANGEBYSCORE <key> -inf <max>` run by Redis itself (RM_Call with "!"): it
/// removes a long run of members in one pass, where the key API removes them one
/// lookup at a time, and it replicates and announces itself exactly as the script's
/// call does.
pub fn apply_trim(ctx: Ctx, key: RString, max: i64) -> crate::error::Result<()> {
    use crate::error::Error;
    // SAFETY: "!scl": a live string, a C string, a long long; the reply is freed here.
    unsafe {
        let (Some(call), Some(kind), Some(free)) = (
            raw::RedisModule_Call,
            raw::RedisModule_CallReplyType,
            raw::RedisModule_FreeCallReply,
        ) else {
            return Err(Error::Internal("RM_Call is unavailable"));
        };
        let reply = call(
            ctx,
            c"ZREMRANGEBYSCORE".as_ptr(),
            c"!scl".as_ptr(),
            key,
            c"-inf".as_ptr(),
            max,
        );
        if reply.is_null() {
            return Err(Error::Internal("ZREMRANGEBYSCORE failed"));
        }
        let failed = kind(reply) == raw::REDISMODULE_REPLY_ERROR as c_int;
        free(reply);
        if failed {
            return Err(Error::Internal("ZREMRANGEBYSCORE failed"));
        }
    }
    Ok(())
}
