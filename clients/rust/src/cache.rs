//! In-process caches: denials (opt-in) and pseudonyms (used by the tower layer).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use crate::decision::{Decision, Source};
use crate::limit::Limit;

const US_PER_DAY: i64 = 86_400_000_000;

/// A request as the deny cache knows it: the same limits with the same costs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub limits: Vec<Limit>,
    pub costs: Vec<u64>,
    pub all: bool,
}

struct Remembered {
    decided_at: i64,
    until: i64,
    decision: Decision,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock leaves a map that is still consistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Remembers denials until their retry time, so a client hammering a closed limiter
/// costs no Redis round trip.
///
/// Safe by construction: the module's `retry_after_ms` is the smallest wait after which
/// the same request passes *if nothing else arrives*; anything else arriving only spends
/// more, so until then Redis would deny it too. What can make Redis admit earlier is
/// handled: a REFUND or RESET through this limiter forgets every entry on its keys, and
/// a different cost or set of limits is a different entry. Denials that never pass
/// (`-1`), denials involving a concurrency limit (a release frees a slot at any time),
/// and denials of a counter that counts them (`count_all`, `escalate`: each denied call
/// writes) are not cached. A REFUND or RESET from another process is not seen: keep the cache
/// off where that matters.
pub struct DenyCache {
    max_entries: usize,
    entries: Mutex<HashMap<Entry, Remembered>>,
}

impl Default for DenyCache {
    fn default() -> Self {
        Self::new(10_000)
    }
}

impl DenyCache {
    pub fn new(max_entries: usize) -> Self {
        DenyCache {
            max_entries: max_entries.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The remembered denial as it reads at `now` (µs on the limiter's timeline).
    pub(crate) fn lookup(&self, entry: &Entry, now: i64) -> Option<Decision> {
        let mut entries = lock(&self.entries);
        let hit = entries.get(entry)?;
        if now >= hit.until {
            entries.remove(entry);
            return None;
        }
        Some(aged(&hit.decision, now - hit.decided_at))
    }

    pub(crate) fn remember(&self, entry: Entry, now: i64, decision: &Decision) {
        let concurrency = entry
            .limits
            .iter()
            .any(|l| l.algorithm == crate::Algorithm::Concurrency);
        // A call while such a block holds moves its end: answered here, it would not.
        let growing = entry.limits.iter().any(|l| {
            l.block
                .is_some_and(|b| b.growth != crate::limit::Growth::Fixed)
        });
        // A counter that counts denials (COUNTALL, ESCALATE) writes on each: answered
        // here, the count would fall behind and ESCALATE's wait would not grow.
        let counting = entry.limits.iter().any(Limit::counts_denials);
        if decision.allowed
            || decision.retry_after_ms <= 0
            || decision.source != Source::Redis
            || concurrency
            || growing
            || counting
        {
            return;
        }
        let mut entries = lock(&self.entries);
        if entries.len() >= self.max_entries {
            entries.retain(|_, r| r.until > now);
            if entries.len() >= self.max_entries {
                // Still full of live denials: dropping them all only costs round trips.
                entries.clear();
            }
        }
        let until = now.saturating_add(decision.retry_after_ms.saturating_mul(1000));
        entries.insert(
            entry,
            Remembered {
                decided_at: now,
                until,
                decision: decision.clone(),
            },
        );
    }

    /// Forget every denial that involves one of `limits`' keys (after a REFUND or RESET).
    pub(crate) fn forget(&self, limits: &[Limit]) {
        lock(&self.entries).retain(|entry, _| {
            !entry
                .limits
                .iter()
                .any(|l| limits.iter().any(|f| f.key == l.key))
        });
    }
}

/// The decision as it reads `elapsed_us` later: waits shrink, counts stay.
fn aged(decision: &Decision, elapsed_us: i64) -> Decision {
    let shrink = |ms: i64| {
        if ms <= 0 {
            ms
        } else {
            ((ms.saturating_mul(1000) - elapsed_us).max(0) + 999) / 1000
        }
    };
    Decision {
        retry_after_ms: shrink(decision.retry_after_ms),
        reset_after_ms: shrink(decision.reset_after_ms),
        parts: decision.parts.iter().map(|p| aged(p, elapsed_us)).collect(),
        source: Source::Cache,
        ..decision.clone()
    }
}

/// RL.PSEUDONYM answers per identity and UTC day. The pseudonym only changes at UTC
/// midnight, so one lookup per client per day is enough; the day comes from the clock
/// whose time is sent as `NOW`, so the cached day and the module's day agree.
pub struct PseudonymCache {
    max_entries: usize,
    state: Mutex<(i64, HashMap<String, String>)>,
}

impl Default for PseudonymCache {
    fn default() -> Self {
        Self::new(100_000)
    }
}

impl PseudonymCache {
    pub fn new(max_entries: usize) -> Self {
        PseudonymCache {
            max_entries: max_entries.max(1),
            state: Mutex::new((i64::MIN, HashMap::new())),
        }
    }

    pub fn get(&self, identity: &str, now_us: i64) -> Option<String> {
        let mut state = lock(&self.state);
        roll(&mut state, now_us);
        state.1.get(identity).cloned()
    }

    pub fn put(&self, identity: &str, now_us: i64, pseudonym: String) {
        let mut state = lock(&self.state);
        roll(&mut state, now_us);
        if state.1.len() >= self.max_entries {
            state.1.clear();
        }
        state.1.insert(identity.to_string(), pseudonym);
    }
}

fn roll(state: &mut (i64, HashMap<String, String>), now_us: i64) {
    let day = now_us.div_euclid(US_PER_DAY);
    if day != state.0 {
        *state = (day, HashMap::new());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn entry(key: &str) -> Entry {
        Entry {
            limits: vec![Limit::fixed("f", key, 1, Duration::from_secs(10))],
            costs: vec![1],
            all: false,
        }
    }

    fn denial(retry: i64) -> Decision {
        Decision {
            allowed: false,
            remaining: 0,
            retry_after_ms: retry,
            reset_after_ms: 9000,
            limit: None,
            parts: vec![],
            source: Source::Redis,
            error: None,
        }
    }

    #[test]
    fn denials_count_down_and_expire() {
        let cache = DenyCache::new(10);
        cache.remember(entry("a"), 0, &denial(1500));
        let hit = cache.lookup(&entry("a"), 400_000).unwrap();
        assert_eq!(
            (hit.retry_after_ms, hit.reset_after_ms, hit.source),
            (1100, 8600, Source::Cache)
        );
        assert!(cache.lookup(&entry("a"), 1_500_000).is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn never_and_forgotten_are_not_answered() {
        let cache = DenyCache::new(10);
        cache.remember(entry("a"), 0, &denial(-1));
        assert!(cache.lookup(&entry("a"), 1).is_none());
        cache.remember(entry("b"), 0, &denial(1000));
        cache.forget(&entry("b").limits);
        assert!(cache.lookup(&entry("b"), 1).is_none());
    }

    #[test]
    fn a_block_that_grows_while_held_is_not_remembered() {
        let cache = DenyCache::new(10);
        let boxed = |block: crate::Block| Entry {
            limits: vec![Limit::counter("c", "k", 1, Duration::from_secs(10)).block(block)],
            costs: vec![1],
            all: false,
        };
        let thirty = crate::Block::new(Duration::from_secs(30));
        // A plain block ends where it said: its denial holds until then.
        cache.remember(boxed(thirty), 0, &denial(30_000));
        assert!(cache.lookup(&boxed(thirty), 1).is_some());
        // EXTEND: the server would restart the block on this call; only it can.
        cache.remember(boxed(thirty.extend()), 0, &denial(30_000));
        assert!(cache.lookup(&boxed(thirty.extend()), 1).is_none());
    }

    #[test]
    fn pseudonyms_roll_over_at_midnight() {
        let cache = PseudonymCache::new(10);
        cache.put("1.2.3.4", US_PER_DAY - 1, "p".into());
        assert_eq!(cache.get("1.2.3.4", US_PER_DAY - 1).as_deref(), Some("p"));
        assert_eq!(cache.get("1.2.3.4", US_PER_DAY), None);
    }
}
