//! The few key-API operations the limiters need, as a small safe wrapper.
//!
//! The key API works on the value in place (no command lookup, no argument
//! re-parsing), which is most of why a native limiter beats a script. It fires no
//! keyspace events and replicates nothing: `effects` does both explicitly.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use crate::error::{Error, Result};

pub type Ctx = *mut raw::RedisModuleCtx;
pub type RString = *mut raw::RedisModuleString;

/// The bytes of a Redis string. The slice lives as long as the string, which for
/// command arguments is the whole command.
pub fn bytes<'a>(s: RString) -> &'a [u8] {
    let mut len = 0;
    // SAFETY: StringPtrLen returns a pointer into the string's buffer of `len` bytes.
    unsafe {
        let p = raw::RedisModule_StringPtrLen.map_or(ptr::null(), |f| f(s, &mut len));
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// A Redis string the module created; freed when dropped.
pub struct OwnedString {
    ctx: Ctx,
    pub ptr: RString,
}

impl OwnedString {
    pub fn new(ctx: Ctx, data: &[u8]) -> Result<OwnedString> {
        // SAFETY: CreateString copies `data`.
        let ptr = unsafe {
            raw::RedisModule_CreateString.map_or(ptr::null_mut(), |f| {
                f(ctx, data.as_ptr().cast(), data.len())
            })
        };
        if ptr.is_null() {
            return Err(Error::Internal("could not create a string"));
        }
        Ok(OwnedString { ctx, ptr })
    }
}

impl OwnedString {
    pub fn from_i64(ctx: Ctx, n: i64) -> Result<OwnedString> {
        // SAFETY: CreateStringFromLongLong formats `n` into a new string.
        let ptr = unsafe {
            raw::RedisModule_CreateStringFromLongLong.map_or(ptr::null_mut(), |f| f(ctx, n))
        };
        if ptr.is_null() {
            return Err(Error::Internal("could not create a string"));
        }
        Ok(OwnedString { ctx, ptr })
    }

    /// Takes ownership of a string Redis handed over (range iterator elements).
    pub fn adopt(ctx: Ctx, ptr: RString) -> OwnedString {
        OwnedString { ctx, ptr }
    }
}

impl Drop for OwnedString {
    fn drop(&mut self) {
        // SAFETY: we own the string and free it once.
        unsafe {
            if let Some(free) = raw::RedisModule_FreeString {
                free(self.ctx, self.ptr);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    String,
    Zset,
    Other,
}

/// An open key; closed when dropped.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// A handle that holds no key (one closed before a command that writes it).
    pub fn closed() -> Key {
        Key {
            ptr: ptr::null_mut(),
        }
    }

    pub fn open(ctx: Ctx, name: RString, writable: bool) -> Result<Key> {
        let mode = if writable {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: OpenKey takes the context and a live string; the key is closed on drop.
        let ptr = unsafe {
            raw::RedisModule_OpenKey.map_or(ptr::null_mut(), |f| f(ctx, name, mode as c_int))
        };
        Ok(Key { ptr: ptr.cast() })
    }

    pub fn kind(&self) -> Kind {
        if self.ptr.is_null() {
            return Kind::Empty;
        }
        // SAFETY: a non-null key opened by OpenKey.
        let t = unsafe { raw::RedisModule_KeyType.map_or(0, |f| f(self.ptr)) };
        match t as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => Kind::Empty,
            raw::REDISMODULE_KEYTYPE_STRING => Kind::String,
            raw::REDISMODULE_KEYTYPE_ZSET => Kind::Zset,
            _ => Kind::Other,
        }
    }

    /// The value of a string key, or `None` for an empty key.
    pub fn read_string(&self) -> Result<Option<&[u8]>> {
        match self.kind() {
            Kind::Empty => Ok(None),
            Kind::String => {
                let mut len = 0;
                // SAFETY: a string key; DMA in read mode gives `len` readable bytes that
                // stay valid until the key is modified or closed.
                let p = unsafe {
                    raw::RedisModule_StringDMA.map_or(ptr::null_mut(), |f| {
                        f(self.ptr, &mut len, raw::REDISMODULE_READ as c_int)
                    })
                };
                if p.is_null() {
                    return Ok(Some(&[]));
                }
                Ok(Some(unsafe {
                    std::slice::from_raw_parts(p.cast::<u8>(), len)
                }))
            }
            _ => Err(Error::WrongType),
        }
    }

    /// A string holding a non-negative integer, as INCRBY keeps one (a counter, a
    /// TAT), or `None` for an empty key. `name` is the key's, for the error.
    ///
    /// The key API decodes a value that is not a raw string (INCRBY and SET store
    /// integers encoded) as it reads it, which changes its encoding. A PEEK, which
    /// must leave everything as it found it, reads through GET instead: slower, but
    /// PEEK is a query, not the limiter's hot path. (The module's own writes are raw
    /// strings, which the key API reads without a change.)
    pub fn read_counter(&self, ctx: Ctx, name: RString, preserve: bool) -> Result<Option<u64>> {
        self.read_parsed(ctx, name, preserve, |text| {
            crate::args::parse_counter(text)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| Error::NotACounter(lossy(name)))
        })
    }

    /// A string key's value as `parse` reads it, or `None` for an empty key; with
    /// `preserve`, without changing its encoding (as `read_counter`).
    pub fn read_parsed<T>(
        &self,
        ctx: Ctx,
        name: RString,
        preserve: bool,
        parse: impl Fn(&[u8]) -> Result<T>,
    ) -> Result<Option<T>> {
        if !preserve || self.kind() != Kind::String {
            let Some(text) = self.read_string()? else {
                return Ok(None);
            };
            return parse(text).map(Some);
        }
        call_command(ctx, c"GET", &[name], Propagate::No, |reply| {
            let mut len = 0;
            // SAFETY: a live reply; its bytes are parsed before it is freed.
            unsafe {
                let p = raw::RedisModule_CallReplyStringPtr?(reply, &mut len);
                if p.is_null() {
                    return None;
                }
                Some(parse(std::slice::from_raw_parts(p.cast::<u8>(), len)))
            }
        })?
        .transpose()
    }

    /// Replaces a string's value in place, which keeps its TTL (SET would drop it),
    /// or creates the key. Either way the value is a plain (raw) string, the one
    /// encoding a later read leaves as it is.
    pub fn write_string(&self, value: &[u8]) -> Result<()> {
        let failed = Err(Error::Internal("could not write a string key"));
        let dma = || {
            let mut len = 0;
            // SAFETY: a writable key that is empty or a string: DMA in write mode gives
            // `len` writable bytes (0 for an empty key, whose pointer is not written).
            let p = unsafe {
                raw::RedisModule_StringDMA.map_or(ptr::null_mut(), |f| {
                    f(self.ptr, &mut len, raw::REDISMODULE_WRITE as c_int)
                })
            };
            (p, len)
        };
        // Most writes keep the length (a counter from 41 to 42, a TAT): then the
        // string is written in place, without a truncation.
        let (mut p, mut len) = dma();
        if p.is_null() || len != value.len() {
            // SAFETY: as above; truncating an empty key creates it as a raw string.
            let rc =
                unsafe { raw::RedisModule_StringTruncate.map_or(1, |f| f(self.ptr, value.len())) };
            if rc != 0 {
                return failed;
            }
            (p, len) = dma();
        }
        if p.is_null() || len != value.len() {
            return failed;
        }
        // SAFETY: `p` points to exactly `len` writable bytes of the key's string.
        unsafe { ptr::copy_nonoverlapping(value.as_ptr(), p.cast::<u8>(), len) };
        Ok(())
    }

    /// Deletes the key (it stays open, empty).
    pub fn delete(&self) -> Result<()> {
        // SAFETY: a writable key.
        let rc = unsafe { raw::RedisModule_DeleteKey.map_or(1, |f| f(self.ptr)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Internal("could not delete a key"))
        }
    }

    /// Removes one member of a sorted set.
    pub fn zrem(&self, member: RString) -> Result<()> {
        let mut deleted: c_int = 0;
        // SAFETY: a writable sorted-set key whose range iterator is stopped.
        let rc =
            unsafe { raw::RedisModule_ZsetRem.map_or(1, |f| f(self.ptr, member, &mut deleted)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Internal("could not remove from a sorted set"))
        }
    }

    /// Sets the key to expire at an absolute unix time in milliseconds.
    pub fn expire_at(&self, at_ms: i64) -> Result<()> {
        // SAFETY: a writable, non-empty key.
        let rc = unsafe { raw::RedisModule_SetAbsExpire.map_or(1, |f| f(self.ptr, at_ms)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Internal("could not set an expiry"))
        }
    }

    /// The key's absolute expiry instant (unix ms), `None` without a TTL or key.
    pub fn expires_at_ms(&self) -> Option<u64> {
        if self.ptr.is_null() {
            return None;
        }
        // SAFETY: a key opened by OpenKey; GetAbsExpire only reads it.
        let at = unsafe { raw::RedisModule_GetAbsExpire.map_or(-1, |f| f(self.ptr)) };
        u64::try_from(at).ok()
    }

    pub fn value_length(&self) -> u64 {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: a key opened by OpenKey.
        unsafe { raw::RedisModule_ValueLength.map_or(0, |f| f(self.ptr)) as u64 }
    }

    /// Adds `member` at `score` unless it is already there. Returns whether it was added.
    pub fn zadd_new(&self, score: f64, member: RString) -> Result<bool> {
        let mut flags = raw::REDISMODULE_ZADD_NX as c_int;
        // SAFETY: a writable key that is empty or a sorted set.
        let rc = unsafe {
            raw::RedisModule_ZsetAdd.map_or(1, |f| f(self.ptr, score, member, &mut flags))
        };
        if rc != 0 {
            return Err(Error::Internal("could not add to a sorted set"));
        }
        Ok(flags & raw::REDISMODULE_ZADD_ADDED as c_int != 0)
    }

    /// Adds `member` at `score`, or moves it there if it is in the set.
    pub fn zadd(&self, score: f64, member: RString) -> Result<()> {
        let mut flags: c_int = 0;
        // SAFETY: a writable key that is empty or a sorted set.
        let rc = unsafe {
            raw::RedisModule_ZsetAdd.map_or(1, |f| f(self.ptr, score, member, &mut flags))
        };
        if rc != 0 {
            return Err(Error::Internal("could not add to a sorted set"));
        }
        Ok(())
    }

    /// The score of `member`, if the key is a sorted set holding it.
    pub fn score(&self, member: RString) -> Option<f64> {
        if self.kind() != Kind::Zset {
            return None;
        }
        let mut score = 0.0;
        // SAFETY: a sorted-set key and a live member string.
        let rc = unsafe { raw::RedisModule_ZsetScore?(self.ptr, member, &mut score) };
        (rc == 0).then_some(score)
    }

    /// The lowest-scored members with a score at or below `max`, at most `most` of
    /// them, and whether that was all of them.
    pub fn members_up_to(&self, ctx: Ctx, max: f64, most: usize) -> (Vec<OwnedString>, bool) {
        let mut found = Vec::new();
        let mut complete = true;
        self.for_each_in_range(f64::NEG_INFINITY, max, false, false, |member, _| {
            let member = OwnedString::adopt(ctx, member);
            if found.len() == most {
                complete = false;
                return false;
            }
            found.push(member);
            true
        });
        (found, complete)
    }

    /// Calls `visit(member, score)` for members with scores in `[min, max]` (or
    /// `(min, max]` when `exclude_min`), lowest first (highest first when
    /// `from_top`), while it returns true. The member is the caller's to free. A key
    /// that is not a sorted set visits nothing.
    pub fn for_each_in_range(
        &self,
        min: f64,
        max: f64,
        exclude_min: bool,
        from_top: bool,
        mut visit: impl FnMut(RString, f64) -> bool,
    ) {
        if self.kind() != Kind::Zset {
            return;
        }
        // SAFETY: a sorted-set key; the range is stopped before returning and the
        // iterator is only advanced while it has not reached its end.
        unsafe {
            let (
                Some(first),
                Some(last),
                Some(current),
                Some(next),
                Some(prev),
                Some(end),
                Some(stop),
            ) = (
                raw::RedisModule_ZsetFirstInScoreRange,
                raw::RedisModule_ZsetLastInScoreRange,
                raw::RedisModule_ZsetRangeCurrentElement,
                raw::RedisModule_ZsetRangeNext,
                raw::RedisModule_ZsetRangePrev,
                raw::RedisModule_ZsetRangeEndReached,
                raw::RedisModule_ZsetRangeStop,
            )
            else {
                return;
            };
            let (start, next) = if from_top {
                (last, prev)
            } else {
                (first, next)
            };
            if start(self.ptr, min, max, c_int::from(exclude_min), 0) != 0 {
                return;
            }
            while end(self.ptr) == 0 {
                let mut score = 0.0;
                let member = current(self.ptr, &mut score);
                if member.is_null() || !visit(member, score) {
                    break;
                }
                if next(self.ptr) == 0 {
                    break;
                }
            }
            stop(self.ptr);
        }
    }

    /// The highest score in `(min, +inf)`, if any.
    pub fn last_score_above(&self, ctx: Ctx, min: f64) -> Option<f64> {
        if self.kind() != Kind::Zset {
            return None;
        }
        // SAFETY: as in `for_each_in_range`, iterating from the top of the range.
        unsafe {
            let last = raw::RedisModule_ZsetLastInScoreRange?;
            let current = raw::RedisModule_ZsetRangeCurrentElement?;
            let end = raw::RedisModule_ZsetRangeEndReached?;
            let stop = raw::RedisModule_ZsetRangeStop?;
            if last(self.ptr, min, f64::INFINITY, 1, 0) != 0 {
                return None;
            }
            let mut found = None;
            if end(self.ptr) == 0 {
                let mut score = 0.0;
                let member = current(self.ptr, &mut score);
                if !member.is_null() {
                    found = Some(score);
                    if let Some(free) = raw::RedisModule_FreeString {
                        free(ctx, member);
                    }
                }
            }
            stop(self.ptr);
            found
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: the key was opened by OpenKey and is closed once.
        unsafe {
            if let Some(close) = raw::RedisModule_CloseKey {
                close(self.ptr);
            }
        }
    }
}

/// The number of members with a score above `min`: ZCOUNT is O(log n), where
/// walking the key API's range would be O(n).
pub fn zcount_above(ctx: Ctx, key: RString, min: u64) -> Result<u64> {
    zcount(ctx, key, format!("({min}").as_bytes(), b"+inf")
}

/// How many members have a score at or below `max`.
pub fn zcount_up_to(ctx: Ctx, key: RString, max: u64) -> Result<u64> {
    zcount(ctx, key, b"-inf", max.to_string().as_bytes())
}

/// ZCOUNT through RM_Call: the key API can only count by walking the range.
fn zcount(ctx: Ctx, key: RString, min: &[u8], max: &[u8]) -> Result<u64> {
    let min = OwnedString::new(ctx, min)?;
    let max = OwnedString::new(ctx, max)?;
    let n = call_command(
        ctx,
        c"ZCOUNT",
        &[key, min.ptr, max.ptr],
        Propagate::No,
        |reply| {
            // SAFETY: a live reply.
            unsafe { raw::RedisModule_CallReplyInteger.map_or(0, |f| f(reply)) }
        },
    )?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Whether Redis itself replicates a command the module runs (RM_Call's "!").
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Propagate {
    Yes,
    No,
}

/// Runs a core command with one to four string arguments through RM_Call and lets
/// `read` look at its reply, which is freed afterwards. An error reply is an error.
pub fn call_command<T>(
    ctx: Ctx,
    command: &CStr,
    args: &[RString],
    propagate: Propagate,
    read: impl FnOnce(*mut raw::RedisModuleCallReply) -> T,
) -> Result<T> {
    let failed = Err(Error::Internal("a core command failed"));
    let format = match (args.len(), propagate) {
        (1, Propagate::No) => c"s",
        (2, Propagate::No) => c"ss",
        (3, Propagate::No) => c"sss",
        (4, Propagate::No) => c"ssss",
        (1, Propagate::Yes) => c"!s",
        (2, Propagate::Yes) => c"!ss",
        (3, Propagate::Yes) => c"!sss",
        (4, Propagate::Yes) => c"!ssss",
        _ => return failed,
    };
    let c = command.as_ptr();
    // SAFETY: the format has one "s" per live string passed.
    let reply = unsafe {
        let Some(call) = raw::RedisModule_Call else {
            return failed;
        };
        match *args {
            [a] => call(ctx, c, format.as_ptr(), a),
            [a, b] => call(ctx, c, format.as_ptr(), a, b),
            [a, b, d] => call(ctx, c, format.as_ptr(), a, b, d),
            [a, b, d, e] => call(ctx, c, format.as_ptr(), a, b, d, e),
            _ => return failed,
        }
    };
    take_reply(reply, read)
}

/// What an RM_Call returned: `read` looks at the reply, which is freed afterwards. No
/// reply or an error reply is an error.
pub fn take_reply<T>(
    reply: *mut raw::RedisModuleCallReply,
    read: impl FnOnce(*mut raw::RedisModuleCallReply) -> T,
) -> Result<T> {
    let failed = Err(Error::Internal("a core command failed"));
    if reply.is_null() {
        return failed;
    }
    // SAFETY: a live reply, freed once here after `read` and not used again.
    unsafe {
        let (Some(kind), Some(free)) = (
            raw::RedisModule_CallReplyType,
            raw::RedisModule_FreeCallReply,
        ) else {
            return failed;
        };
        let result = if kind(reply) == raw::REDISMODULE_REPLY_ERROR as c_int {
            failed
        } else {
            Ok(read(reply))
        };
        free(reply);
        result
    }
}

/// A key name (or any string) for an error message.
pub fn lossy(s: RString) -> String {
    String::from_utf8_lossy(bytes(s)).into_owned()
}

/// Frees a string the module was handed ownership of (range iterator elements).
pub fn free_string(ctx: Ctx, s: RString) {
    // SAFETY: `s` is owned by the caller and not used after this.
    unsafe {
        if let Some(free) = raw::RedisModule_FreeString {
            free(ctx, s);
        }
    }
}
