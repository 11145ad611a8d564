//! Per-command counters for `INFO rl`: a relaxed atomic add per call, nothing more.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Stats {
    pub command: &'static str,
    calls: AtomicU64,
    allowed: AtomicU64,
    denied: AtomicU64,
    errors: AtomicU64,
}

pub enum Outcome {
    Allowed,
    Denied,
    Answered,
    Error,
}

impl Stats {
    pub const fn new(command: &'static str) -> Stats {
        Stats {
            command,
            calls: AtomicU64::new(0),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            errors: AtomicU64::new(0),
        }
    }

    pub fn record(&self, outcome: Outcome) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let counter = match outcome {
            Outcome::Allowed => &self.allowed,
            Outcome::Denied => &self.denied,
            Outcome::Error => &self.errors,
            Outcome::Answered => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// (field suffix, value) pairs, in the order INFO shows them.
    pub fn fields(&self) -> [(&'static str, u64); 4] {
        [
            ("calls", self.calls.load(Ordering::Relaxed)),
            ("allowed", self.allowed.load(Ordering::Relaxed)),
            ("denied", self.denied.load(Ordering::Relaxed)),
            ("errors", self.errors.load(Ordering::Relaxed)),
        ]
    }
}

pub static SLIDELOG: Stats = Stats::new("rl.slidelog");
pub static SLIDECOUNT: Stats = Stats::new("rl.slidecount");
pub static FIXED: Stats = Stats::new("rl.fixed");
pub static GCRA: Stats = Stats::new("rl.gcra");
pub static PSEUDONYM: Stats = Stats::new("rl.pseudonym");

pub static DEBUG: Stats = Stats::new("rl.debug-panic");

pub static ALL: [&Stats; 5] = [&SLIDELOG, &SLIDECOUNT, &FIXED, &GCRA, &PSEUDONYM];
