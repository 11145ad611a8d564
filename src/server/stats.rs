//! Per-command counters for `INFO rl`: a relaxed atomic add per call, nothing more.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Stats {
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

impl Default for Stats {
    fn default() -> Stats {
        Stats::new()
    }
}

impl Stats {
    pub const fn new() -> Stats {
        Stats {
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
