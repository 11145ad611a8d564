//! Runs one command for Redis: the guard that turns any failure, a panic included,
//! into an error reply instead of a dead server, the command's counters, and the
//! reply itself.

use std::ffi::CString;
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::raw;

use super::call::{log_warning, Call, Reply};
use super::key::{Ctx, RString};
use super::stats::Outcome;
use crate::algo::Ints;
use crate::command::Command;
use crate::commands::COMMANDS;
use crate::error::{Error, Result};
use crate::top::Row;

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
        (command.handler)(&Call::new(ctx, name, argv), command, &COMMANDS)
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
fn reply_top(ctx: Ctx, rows: &[Row]) {
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
