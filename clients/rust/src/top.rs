//! RL.TOP across a deployment: the keys the servers denied most, merged.
//!
//! Each server keeps its own summary (RL.TOP is not replicated), so on a cluster every
//! primary is asked and the answers are merged: a key lives on one primary, so merging
//! is a union sorted by denials (after a slot migration a key may appear on two, and its
//! counts add, errors included).

use std::collections::HashMap;

use redis::{Cmd, Value};

use crate::error::Error;

/// One key of RL.TOP's answer (see the module's docs/top.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopEntry {
    /// The limiter's base key, as the caller passed it.
    pub key: String,
    /// Denials counted for it: an upper bound of the true count.
    pub denied: u64,
    /// Admitted calls of the key since it entered the summary.
    pub admitted: u64,
    /// The true denial count is between `denied - error` and `denied`.
    pub error: u64,
    /// Unix time in ms of its last denial, on the call's clock (its `NOW`).
    pub last_denied_ms: i64,
    /// The command of the last denial: `rl.fixed`, `rl.all`, `cl.throttle`...
    pub command: String,
    /// The algorithm of the limit that denied it last: `fixed`, `gcra`...
    pub algorithm: String,
}

/// What [`crate::RateLimiter::top`] asks: at most `count` entries (default 10), only
/// those whose last denial came from `algorithm`, and whether to empty the summaries
/// after reading them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopQuery {
    count: u32,
    algorithm: Option<String>,
    reset: bool,
}

impl Default for TopQuery {
    fn default() -> Self {
        TopQuery {
            count: 10,
            algorithm: None,
            reset: false,
        }
    }
}

impl TopQuery {
    /// The 10 worst keys, of every algorithm.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most `count` entries, after merging (1 to 1,048,576).
    pub fn count(mut self, count: u32) -> Self {
        self.count = count;
        self
    }

    /// Only entries whose last denial came from this algorithm (`slidelog`,
    /// `slidecount`, `fixed`, `gcra`, `concurrency`, `throttle`; any case).
    pub fn algorithm(mut self, algorithm: impl Into<String>) -> Self {
        self.algorithm = Some(algorithm.into());
        self
    }

    /// Empty each server's summary after its reply (all of it, whatever the algorithm).
    pub fn reset(mut self, reset: bool) -> Self {
        self.reset = reset;
        self
    }

    pub(crate) fn command(&self) -> Result<Cmd, Error> {
        if self.count == 0 {
            return Err(Error::InvalidCall("RL.TOP's count must be at least 1"));
        }
        let mut cmd = redis::cmd("RL.TOP");
        cmd.arg("COUNT").arg(self.count);
        if let Some(algorithm) = &self.algorithm {
            cmd.arg("ALGORITHM").arg(algorithm);
        }
        if self.reset {
            cmd.arg("RESET");
        }
        Ok(cmd)
    }

    pub(crate) fn limit(&self) -> usize {
        usize::try_from(self.count).unwrap_or(usize::MAX)
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

fn entry(row: &Value) -> Option<TopEntry> {
    let pairs: Vec<(&Value, &Value)> = match row {
        // RESP2: field, value, field, value...
        Value::Array(items) if items.len() % 2 == 0 => {
            items.chunks(2).map(|pair| (&pair[0], &pair[1])).collect()
        }
        // RESP3
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    let fields: HashMap<String, &Value> = pairs
        .into_iter()
        .filter_map(|(k, v)| Some((text(k)?, v)))
        .collect();
    let int = |name: &str| match fields.get(name) {
        Some(Value::Int(n)) => Some(*n),
        _ => None,
    };
    let count = |name: &str| int(name).and_then(|n| u64::try_from(n).ok());
    let string = |name: &str| fields.get(name).and_then(|v| text(v));
    Some(TopEntry {
        key: string("key")?,
        denied: count("denied")?,
        admitted: count("admitted")?,
        error: count("error")?,
        last_denied_ms: int("last_denied_ms")?,
        command: string("command")?,
        algorithm: string("algorithm")?,
    })
}

/// One server's reply: its entries, worst first.
pub(crate) fn parse(reply: &Value) -> Result<Vec<TopEntry>, Error> {
    let rows = match reply {
        Value::Array(rows) => rows,
        other => return Err(Error::unexpected("RL.TOP", other)),
    };
    rows.iter()
        .map(|row| entry(row).ok_or_else(|| Error::unexpected("RL.TOP", row)))
        .collect()
}

/// The servers' answers as one list, worst first (equal counts by key), at most
/// `count`. A key on two servers gets the sum of its counts and errors, and the time,
/// command and algorithm of its latest denial.
pub fn merge(answers: Vec<Vec<TopEntry>>, count: usize) -> Vec<TopEntry> {
    let mut by_key: HashMap<String, TopEntry> = HashMap::new();
    for e in answers.into_iter().flatten() {
        match by_key.remove(&e.key) {
            None => {
                by_key.insert(e.key.clone(), e);
            }
            Some(seen) => {
                let (denied, admitted, error) = (
                    seen.denied.saturating_add(e.denied),
                    seen.admitted.saturating_add(e.admitted),
                    seen.error.saturating_add(e.error),
                );
                let latest = if e.last_denied_ms >= seen.last_denied_ms {
                    e
                } else {
                    seen
                };
                let merged = TopEntry {
                    denied,
                    admitted,
                    error,
                    ..latest
                };
                by_key.insert(merged.key.clone(), merged);
            }
        }
    }
    let mut merged: Vec<TopEntry> = by_key.into_values().collect();
    merged.sort_by(|a, b| b.denied.cmp(&a.denied).then_with(|| a.key.cmp(&b.key)));
    merged.truncate(count);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(
        key: &str,
        denied: u64,
        admitted: u64,
        error: u64,
        last: i64,
        cmd: &str,
        algo: &str,
    ) -> TopEntry {
        TopEntry {
            key: key.into(),
            denied,
            admitted,
            error,
            last_denied_ms: last,
            command: cmd.into(),
            algorithm: algo.into(),
        }
    }

    #[test]
    fn merge_adds_a_key_seen_on_two_servers_and_keeps_its_latest_denial() {
        let a = vec![
            e("k", 5, 1, 1, 10, "rl.fixed", "fixed"),
            e("x", 9, 0, 0, 1, "rl.gcra", "gcra"),
        ];
        let b = vec![
            e("k", 6, 2, 0, 20, "rl.all", "gcra"),
            e("b", 1, 0, 0, 1, "rl.fixed", "fixed"),
            e("a", 1, 0, 0, 1, "rl.fixed", "fixed"),
        ];
        assert_eq!(
            merge(vec![a.clone(), b.clone()], 10),
            [
                e("k", 11, 3, 1, 20, "rl.all", "gcra"),
                e("x", 9, 0, 0, 1, "rl.gcra", "gcra"),
                e("a", 1, 0, 0, 1, "rl.fixed", "fixed"),
                e("b", 1, 0, 0, 1, "rl.fixed", "fixed"),
            ]
        );
        assert_eq!(
            merge(vec![a, b], 1),
            [e("k", 11, 3, 1, 20, "rl.all", "gcra")]
        );
    }

    #[test]
    fn a_reply_that_is_not_entries_is_unexpected() {
        let row = Value::Array(vec![Value::BulkString(b"key".to_vec())]);
        assert!(matches!(
            parse(&Value::Array(vec![row])),
            Err(Error::UnexpectedReply { .. })
        ));
        assert!(matches!(
            parse(&Value::Int(1)),
            Err(Error::UnexpectedReply { .. })
        ));
    }
}
