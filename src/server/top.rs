//! RL.TOP: the server's summary of the most-denied keys, its `rl.top-size`
//! configuration, and the two hooks the limiter handlers call.
//!
//! Local to this server like INFO: nothing here is replicated or persisted.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::RedisError;

use super::call::{Call, Reply};
use super::key::{bytes, RString};
use crate::algo::Algorithm;
use crate::args::parse_u64;
use crate::command::{algorithms, Command};
use crate::error::{Error, Result};
use crate::top::{Kind, Row, Summary};

pub const DEFAULT_SIZE: i64 = 1024;
pub const MAX_SIZE: i64 = 1 << 20;

static SUMMARY: Mutex<Option<Summary>> = Mutex::new(None);
/// The summary's entry count, read without the lock: an allowed call looks no further
/// while nothing has been denied.
static ENTRIES: AtomicUsize = AtomicUsize::new(0);

/// `rl.top-size`: setting it resizes the summary in place (see `Summary::resize`).
pub struct TopSize(AtomicI64);

pub static TOP_SIZE: TopSize = TopSize(AtomicI64::new(DEFAULT_SIZE));

impl ConfigurationValue<i64> for TopSize {
    fn get(&self, _ctx: &ConfigurationContext) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, _ctx: &ConfigurationContext, value: i64) -> std::result::Result<(), RedisError> {
        self.0.store(value, Ordering::Relaxed);
        let mut guard = summary();
        match usize::try_from(value).unwrap_or(0) {
            // Off: the memory goes too.
            0 => *guard = None,
            size => {
                if let Some(s) = guard.as_mut() {
                    s.resize(size);
                }
            }
        }
        ENTRIES.store(guard.as_ref().map_or(0, Summary::len), Ordering::Relaxed);
        Ok(())
    }
}

fn summary() -> MutexGuard<'static, Option<Summary>> {
    // A panic while holding it (caught by the command guard) leaves a summary that is
    // still memory-safe; keep using it.
    SUMMARY.lock().unwrap_or_else(|e| e.into_inner())
}

fn size() -> usize {
    usize::try_from(TOP_SIZE.0.load(Ordering::Relaxed)).unwrap_or(0)
}

/// A spending call's verdict on `key`, from the handler that decided it. An allowed
/// call costs one load and a branch while nothing is denied, and a lookup of its key
/// while the summary has entries.
#[inline(always)]
pub fn record(
    key: RString,
    allowed: bool,
    command: &'static Command,
    algorithm: &'static dyn Algorithm,
    now_us: u64,
) {
    if allowed {
        if ENTRIES.load(Ordering::Relaxed) != 0 {
            admitted(bytes(key));
        }
        return;
    }
    if size() == 0 {
        return;
    }
    denied(
        bytes(key),
        Kind {
            command: command.name,
            algorithm: algorithm.name(),
        },
        now_us,
    );
}

#[cold]
fn admitted(key: &[u8]) {
    if let Some(s) = summary().as_mut() {
        s.admitted(key);
    }
}

#[inline(never)]
fn denied(key: &[u8], kind: Kind, now_us: u64) {
    let size = size();
    let mut guard = summary();
    let s = guard.get_or_insert_with(|| Summary::new(size));
    s.denied(key, kind, i64::try_from(now_us / 1000).unwrap_or(i64::MAX));
    ENTRIES.store(s.len(), Ordering::Relaxed);
}

/// (`rl_top_entries`, `rl_top_bytes`) for INFO.
pub fn info() -> (u64, u64) {
    // A crash report may ask while a command holds the lock: then it shows nothing.
    let Ok(guard) = SUMMARY.try_lock() else {
        return (0, 0);
    };
    guard
        .as_ref()
        .map_or((0, 0), |s| (s.len() as u64, s.bytes() as u64))
}

const DEFAULT_COUNT: u64 = 10;

/// `RL.TOP [COUNT n] [ALGORITHM name] [RESET]`.
pub fn handler(
    call: &Call,
    _command: &'static Command,
    table: &'static [Command],
) -> Result<Reply> {
    let args = call.all_args();
    let mut count = None;
    let mut only: Option<&'static str> = None;
    let mut reset = false;
    let mut rest = args.iter();
    while let Some(word) = rest.next() {
        if word.eq_ignore_ascii_case(b"COUNT") {
            if count.is_some() {
                return Err(Error::RepeatedOption("COUNT"));
            }
            let value = rest.next().ok_or(Error::MissingValue("COUNT"))?;
            let n = parse_u64(value)
                .filter(|n| (1..=MAX_SIZE as u64).contains(n))
                .ok_or(Error::NotPositive {
                    name: "COUNT",
                    max: MAX_SIZE as u64,
                })?;
            count = Some(n);
        } else if word.eq_ignore_ascii_case(b"ALGORITHM") {
            if only.is_some() {
                return Err(Error::RepeatedOption("ALGORITHM"));
            }
            let value = rest.next().ok_or(Error::MissingValue("ALGORITHM"))?;
            only = Some(known_algorithm(table, value)?);
        } else if word.eq_ignore_ascii_case(b"RESET") {
            if reset {
                return Err(Error::RepeatedOption("RESET"));
            }
            reset = true;
        } else {
            return Err(Error::UnknownOption(
                String::from_utf8_lossy(word).into_owned(),
            ));
        }
    }
    let count = usize::try_from(count.unwrap_or(DEFAULT_COUNT)).unwrap_or(usize::MAX);
    let mut guard = summary();
    let rows = guard.as_ref().map_or_else(Vec::new, |s| {
        s.iter()
            .filter(|e| only.is_none_or(|a| e.kind.algorithm == a))
            .take(count)
            .map(|e| Row {
                key: e.key.clone(),
                denied: e.count,
                admitted: e.admitted,
                error: e.error,
                last_denied_ms: e.last_ms,
                kind: e.kind,
            })
            .collect()
    });
    if reset {
        // Dropped, memory and all: the next denial starts a new summary.
        *guard = None;
        ENTRIES.store(0, Ordering::Relaxed);
    }
    Ok(Reply::Top(rows))
}

/// Any limiter's algorithm (RL.ALL's, and THROTTLE), case-insensitive.
fn known_algorithm(table: &'static [Command], name: &[u8]) -> Result<&'static str> {
    algorithms(table)
        .map(|a| a.name())
        .find(|a| name.eq_ignore_ascii_case(a.as_bytes()))
        .ok_or_else(|| {
            let mut known: Vec<String> = Vec::new();
            for a in algorithms(table) {
                let name = a.name().to_ascii_lowercase();
                if !known.contains(&name) {
                    known.push(name);
                }
            }
            Error::TopUnknownAlgorithm(String::from_utf8_lossy(name).into_owned(), known.join(", "))
        })
}
