//! The module's answer, read from its reply, or what the failure policy decided instead.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::error::Error;
use crate::limit::Limit;

/// Who decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The module.
    Redis,
    /// The local deny cache, from an earlier denial of the module.
    Cache,
    /// The failure policy: Redis could not decide (see `Decision::error`).
    Failure,
}

/// A decision. `retry_after_ms` is signed, as the module says: 0 when allowed, the wait
/// otherwise, and **-1 when the request can never pass** (its cost is above the limit or
/// the burst); [`Decision::never`] and [`Decision::retry_after`] read it without sign
/// tricks.
#[derive(Debug, Clone)]
pub struct Decision {
    pub allowed: bool,
    /// Units left after this request (RL.ALL: the smallest over the limits).
    pub remaining: i64,
    pub retry_after_ms: i64,
    /// Until the full budget is back if nothing else arrives (RL.ALL: the largest).
    pub reset_after_ms: i64,
    /// The limit decided on; `None` on RL.ALL's aggregate and on a failure.
    pub limit: Option<Limit>,
    /// RL.ALL: what each limit alone says, in order, each with its `limit`.
    pub parts: Vec<Decision>,
    pub source: Source,
    /// Set when the failure policy decided; the numbers then mean nothing.
    pub error: Option<Arc<Error>>,
}

impl Decision {
    /// Denied, and waiting will not help.
    pub fn never(&self) -> bool {
        !self.allowed && self.retry_after_ms < 0
    }

    /// How long to wait: zero when allowed, `None` when the request never passes.
    pub fn retry_after(&self) -> Option<Duration> {
        if self.never() {
            None
        } else {
            Some(Duration::from_millis(
                self.retry_after_ms.max(0).unsigned_abs(),
            ))
        }
    }

    /// Until the full budget is back.
    pub fn reset_after(&self) -> Duration {
        Duration::from_millis(self.reset_after_ms.max(0).unsigned_abs())
    }

    /// The per-limit decisions: RL.ALL's parts, or this one.
    pub fn limits(&self) -> &[Decision] {
        if self.parts.is_empty() {
            std::slice::from_ref(self)
        } else {
            &self.parts
        }
    }

    pub(crate) fn failure(allowed: bool, error: Error) -> Self {
        Decision {
            allowed,
            remaining: 0,
            retry_after_ms: 0,
            reset_after_ms: 0,
            limit: None,
            parts: Vec::new(),
            source: Source::Failure,
            error: Some(Arc::new(error)),
        }
    }
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// `[allowed, remaining, retry_after_ms, reset_after_ms]`.
pub(crate) fn parse(command: &str, reply: &Value, limit: &Limit) -> Result<Decision, Error> {
    let four = match reply {
        Value::Array(items) if items.len() >= 4 => &items[..4],
        _ => return Err(Error::unexpected(command, reply)),
    };
    let numbers: Option<Vec<i64>> = four.iter().map(int).collect();
    match numbers.as_deref() {
        Some(&[allowed @ (0 | 1), remaining, retry, reset]) => Ok(Decision {
            allowed: allowed == 1,
            remaining,
            retry_after_ms: retry,
            reset_after_ms: reset,
            limit: Some(limit.clone()),
            parts: Vec::new(),
            source: Source::Redis,
            error: None,
        }),
        _ => Err(Error::unexpected(command, reply)),
    }
}

/// `[allowed, remaining, retry, reset, [[…per limit…], …]]`.
pub(crate) fn parse_all(reply: &Value, limits: &[Limit]) -> Result<Decision, Error> {
    let (Value::Array(items), Some(first)) = (reply, limits.first()) else {
        return Err(Error::unexpected("RL.ALL", reply));
    };
    let parts = match items.get(4) {
        Some(Value::Array(parts)) if items.len() == 5 && parts.len() == limits.len() => parts,
        _ => return Err(Error::unexpected("RL.ALL", reply)),
    };
    let parts = parts
        .iter()
        .zip(limits)
        .map(|(part, limit)| parse("RL.ALL", part, limit))
        .collect::<Result<Vec<_>, _>>()?;
    let mut aggregate = parse("RL.ALL", reply, first)?;
    aggregate.limit = None;
    aggregate.parts = parts;
    Ok(aggregate)
}

/// RL.THROTTLE's answer, in redis-cell's shape: whole seconds, `limited` rather than
/// allowed, and `retry_after_s = -1` when allowed. With `Source::Failure` only `limited`
/// (the failure policy's answer) and `error` mean anything.
#[derive(Debug, Clone)]
pub struct Throttle {
    pub limited: bool,
    /// `max_burst + 1`.
    pub limit: i64,
    pub remaining: i64,
    pub retry_after_s: i64,
    pub reset_after_s: i64,
    pub source: Source,
    pub error: Option<Arc<Error>>,
}

pub(crate) fn parse_throttle(reply: &Value) -> Result<Throttle, Error> {
    let numbers: Option<Vec<i64>> = match reply {
        Value::Array(items) => items.iter().map(int).collect(),
        _ => None,
    };
    match numbers.as_deref() {
        Some(&[limited @ (0 | 1), limit, remaining, retry, reset]) => Ok(Throttle {
            limited: limited == 1,
            limit,
            remaining,
            retry_after_s: retry,
            reset_after_s: reset,
            source: Source::Redis,
            error: None,
        }),
        _ => Err(Error::unexpected("RL.THROTTLE", reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(v: &[i64]) -> Value {
        Value::Array(v.iter().map(|&n| Value::Int(n)).collect())
    }

    fn limit() -> Limit {
        Limit::fixed("f", "k", 2, Duration::from_secs(10))
    }

    #[test]
    fn signed_retry() {
        let denied = parse("RL.FIXED", &arr(&[0, 0, 1500, 9000]), &limit()).unwrap();
        assert!(!denied.never());
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(1500)));
        let never = parse("RL.FIXED", &arr(&[0, 2, -1, 0]), &limit()).unwrap();
        assert!(never.never());
        assert_eq!(never.retry_after(), None);
        let allowed = parse("RL.FIXED", &arr(&[1, 1, 0, 10000]), &limit()).unwrap();
        assert_eq!(allowed.retry_after(), Some(Duration::ZERO));
    }

    #[test]
    fn bad_replies_are_errors() {
        for bad in [arr(&[2, 0, 0, 0]), arr(&[1, 0, 0]), Value::Okay, Value::Nil] {
            assert!(matches!(
                parse("RL.FIXED", &bad, &limit()),
                Err(Error::UnexpectedReply { .. })
            ));
        }
        let wrong_parts = Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            Value::Int(0),
            Value::Int(0),
            Value::Array(vec![arr(&[1, 1, 0, 0]), arr(&[1, 1, 0, 0])]),
        ]);
        assert!(parse_all(&wrong_parts, &[limit()]).is_err());
        assert_eq!(
            parse_all(&wrong_parts, &[limit(), limit()])
                .unwrap()
                .parts
                .len(),
            2
        );
        assert!(parse_throttle(&arr(&[0, 16, 15, -1])).is_err());
        assert!(parse_throttle(&arr(&[0, 16, 15, -1, 2])).is_ok());
    }
}
