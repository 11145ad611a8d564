//! What a row of the command table is: a command's name, flags, keys, handler, docs
//! and counters. The rows themselves are in `commands.rs`; this type sits below both
//! the table and the handlers it names, so that neither imports the other.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::algo::Algorithm;
use crate::error::Result;
use crate::server::call::{Call, Reply};
use crate::server::stats::Stats;

/// A command's handler: the call, its own row, and the table the row is in (RL.ALL and
/// RL.TOP name algorithms, which the table's rows list).
pub type Handler = fn(&Call, &'static Command, &'static [Command]) -> Result<Reply>;

/// Where a command's keys are.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    None,
    /// Argument 1 only.
    First,
    /// Found by parsing the arguments (`getkeys-api`): RL.ALL.
    Parsed,
}

/// What `COMMAND DOCS` shows and `redis-cli` hints from.
pub struct Docs {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Arity as Redis counts it (the name included); negative: at least that many.
    pub arity: i32,
    pub args: &'static [Arg],
}

#[derive(Clone, Copy)]
pub enum ArgType {
    Key,
    String,
    Integer,
    UnixTime,
    PureToken,
    OneOf,
    Block,
}

pub struct Arg {
    pub name: &'static CStr,
    pub kind: ArgType,
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
    pub subargs: &'static [Arg],
}

pub struct Command {
    /// As Redis shows it, `rl.fixed`.
    pub name: &'static str,
    pub flags: &'static CStr,
    pub keys: Keys,
    pub handler: Handler,
    /// The limiter algorithm a command runs (and RL.ALL can name).
    pub algorithm: Option<&'static dyn Algorithm>,
    pub docs: Docs,
    /// Registered only when the module is loaded with this argument
    /// (`debug-commands`, `cl-throttle`).
    pub requires: Option<&'static str>,
    pub stats: Stats,
    pub state: State,
}

/// What became of a command when the module loaded.
pub struct State(AtomicU8);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// Not asked for (a module argument it requires was not given).
    Absent,
    Registered,
    /// The server already had a command of that name (redis-cell loaded first, a
    /// future core command): left to it.
    Skipped,
}

impl State {
    pub const fn new() -> State {
        State(AtomicU8::new(0))
    }

    pub fn set(&self, r: Registration) {
        let n = match r {
            Registration::Absent => 0,
            Registration::Registered => 1,
            Registration::Skipped => 2,
        };
        self.0.store(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> Registration {
        match self.0.load(Ordering::Relaxed) {
            1 => Registration::Registered,
            2 => Registration::Skipped,
            _ => Registration::Absent,
        }
    }
}

impl Default for State {
    fn default() -> State {
        State::new()
    }
}

/// The algorithm RL.ALL names `name` among the table's rows (case-insensitive).
pub fn joinable(table: &'static [Command], name: &[u8]) -> Option<&'static dyn Algorithm> {
    algorithms(table)
        .filter(|a| a.joins_all())
        .find(|a| name.eq_ignore_ascii_case(a.name().as_bytes()))
}

/// Every algorithm the table's commands run.
pub fn algorithms(table: &'static [Command]) -> impl Iterator<Item = &'static dyn Algorithm> {
    table.iter().filter_map(|c| c.algorithm)
}
