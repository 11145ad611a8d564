//! What the engine read from a limiter's keys, as the decisions see it: below the
//! algorithms, which decide on it, and the engine, which fills it in.

use crate::layout::decimal;
use crate::limit::{MAX_AMOUNT, MAX_END_US};

/// The most strikes a block counts. A strike is a denied call: 10^15 of them is thirty
/// years at a million a second. Counting stops here, so every block written reads back.
pub const MAX_STRIKES: u64 = MAX_AMOUNT;

/// What one key holds, as the engine read it.
#[derive(Clone, Copy)]
pub enum Stored<'a> {
    Integer(Option<u64>),
    /// An integer and the key's expiry instant (unix ms on the server clock), `None`
    /// for a key without a TTL.
    Expiring {
        value: Option<u64>,
        expires_ms: Option<u64>,
    },
    Log(&'a dyn Log),
    /// `<first>:<second>`, or `None` for no key.
    Pair(Option<(u64, u64)>),
}

impl Stored<'_> {
    pub fn integer(&self) -> Option<u64> {
        match self {
            Stored::Integer(n) => *n,
            Stored::Expiring { value, .. } => *value,
            Stored::Log(_) | Stored::Pair(_) => None,
        }
    }
}

/// The entries of a log that are still inside the window, oldest first.
pub trait Log {
    fn count(&self) -> u64;
    /// Timestamp (µs) of the `n`-th oldest entry in the window, counting from 1.
    fn nth_oldest(&self, n: u64) -> Option<i64>;
    fn newest(&self) -> Option<i64>;
    /// The score of the call's member, if the set holds it inside the window.
    fn member_score(&self) -> Option<i64> {
        None
    }
    /// The newest entry's timestamp among those other than the call's member.
    fn newest_except_member(&self) -> Option<i64> {
        self.newest()
    }
}

/// What a block key holds: `<end-µs>`, or `<end-µs>:<strikes>` when counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Unix µs; the block holds while now is before it.
    pub end: u64,
    pub strikes: u64,
}

impl Held {
    /// `None` when the bytes are not a block (a foreign writer's value), an end past
    /// `MAX_END_US` or strikes past `MAX_STRIKES` included: no block call writes those.
    pub fn parse(value: &[u8]) -> Option<Held> {
        let (end, strikes) = match value.iter().position(|&b| b == b':') {
            Some(at) => (value.get(..at)?, Some(value.get(at + 1..)?)),
            None => (value, None),
        };
        let held = Held {
            end: crate::args::parse_u64(end)?,
            // A block written without a count was started by one denial.
            strikes: match strikes {
                Some(s) => crate::args::parse_u64(s)?,
                None => 1,
            },
        };
        (held.end <= MAX_END_US && held.strikes <= MAX_STRIKES).then_some(held)
    }

    /// The value to store: with the count when `counted`, or when it is not the one
    /// a missing count reads as (IMPOSE's 0).
    pub fn format(self, counted: bool) -> Vec<u8> {
        let mut out = decimal(self.end, &mut [0; 20]).to_vec();
        if counted || self.strikes != 1 {
            out.push(b':');
            out.extend_from_slice(decimal(self.strikes, &mut [0; 20]));
        }
        out
    }

    /// Whether the block still holds at `now`.
    pub fn holds(self, now: u64) -> bool {
        self.end > now
    }
}
