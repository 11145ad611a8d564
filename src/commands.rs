//! The commands the module adds: one table drives registration, command docs,
//! key specs, INFO and RL.ALL's list of algorithms. A new limiter algorithm is a file
//! in `algo/` and one `limiter(...)` row here.

use std::ffi::CStr;

use crate::algo::{
    concurrency::Concurrency, counter::Counter, fixed::Fixed, gcra::Gcra, slidecount::SlideCount,
    slidelog::SlideLog, slidewindow::SlideWindow, throttle::Throttle, tokenbucket::TokenBucket,
    Algorithm,
};
use crate::command::{Arg, ArgType, Command, Docs, Keys, State};
use crate::server::stats::Stats;
use crate::server::{handlers, top};

const fn arg(name: &'static CStr, kind: ArgType) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        subargs: &[],
    }
}

const fn option(name: &'static CStr, token: &'static CStr, kind: ArgType) -> Arg {
    Arg {
        token: Some(token),
        optional: true,
        ..arg(name, kind)
    }
}

/// One of a `oneof`'s choices: a bare keyword.
const fn token(name: &'static CStr, token: &'static CStr) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, ArgType::PureToken)
    }
}

const MODE: Arg = Arg {
    optional: true,
    subargs: &[
        token(c"peek", c"PEEK"),
        token(c"refund", c"REFUND"),
        token(c"reset", c"RESET"),
        token(c"impose", c"IMPOSE"),
    ],
    ..arg(c"mode", ArgType::OneOf)
};

/// `BLOCK <duration> [EXTEND | BACKOFF <max>] [STRIKES]`.
const BLOCK: Arg = Arg {
    token: Some(c"BLOCK"),
    optional: true,
    subargs: &[
        arg(c"duration", ArgType::String),
        Arg {
            optional: true,
            subargs: &[token(c"extend", c"EXTEND"), keyed(c"max", c"BACKOFF")],
            ..arg(c"growth", ArgType::OneOf)
        },
        option(c"strikes", c"STRIKES", ArgType::PureToken),
    ],
    ..arg(c"block", ArgType::Block)
};

const LIMITER_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"limit", ArgType::Integer),
    arg(c"window", ArgType::String),
    option(c"cost", c"COST", ArgType::Integer),
    BLOCK,
    option(c"now", c"NOW", ArgType::UnixTime),
    MODE,
];

/// RL.COUNTER's: the common ones, and COUNTALL, RENEW and ESCALATE.
const COUNTER_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"limit", ArgType::Integer),
    arg(c"window", ArgType::String),
    option(c"cost", c"COST", ArgType::Integer),
    option(c"countall", c"COUNTALL", ArgType::PureToken),
    option(c"renew", c"RENEW", ArgType::PureToken),
    option(c"escalate", c"ESCALATE", ArgType::PureToken),
    BLOCK,
    option(c"now", c"NOW", ArgType::UnixTime),
    MODE,
];

const GCRA_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"limit", ArgType::Integer),
    arg(c"window", ArgType::String),
    option(c"burst", c"BURST", ArgType::Integer),
    option(c"cost", c"COST", ArgType::Integer),
    BLOCK,
    option(c"now", c"NOW", ArgType::UnixTime),
    MODE,
];

const TOKENBUCKET_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"capacity", ArgType::Integer),
    arg(c"interval", ArgType::String),
    option(c"refill", c"REFILL", ArgType::Integer),
    option(c"cost", c"COST", ArgType::Integer),
    BLOCK,
    option(c"now", c"NOW", ArgType::UnixTime),
    MODE,
];

/// A keyword with a value, as one choice of a `oneof`: `ACQUIRE <id>`.
const fn keyed(name: &'static CStr, token: &'static CStr) -> Arg {
    Arg {
        token: Some(token),
        ..arg(name, ArgType::String)
    }
}

const CONCURRENCY_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"limit", ArgType::Integer),
    arg(c"ttl", ArgType::String),
    Arg {
        subargs: &[
            keyed(c"acquire", c"ACQUIRE"),
            keyed(c"release", c"RELEASE"),
            keyed(c"heartbeat", c"HEARTBEAT"),
            token(c"peek", c"PEEK"),
            token(c"reset", c"RESET"),
        ],
        ..arg(c"operation", ArgType::OneOf)
    },
    option(c"now", c"NOW", ArgType::UnixTime),
];

const THROTTLE_ARGS: &[Arg] = &[
    arg(c"key", ArgType::Key),
    arg(c"max_burst", ArgType::Integer),
    arg(c"count", ArgType::Integer),
    arg(c"period", ArgType::Integer),
    Arg {
        optional: true,
        ..arg(c"quantity", ArgType::Integer)
    },
    option(c"now", c"NOW", ArgType::UnixTime),
];

const THROTTLE_SUMMARY: &CStr =
    c"redis-cell's CL.THROTTLE: GCRA with its arguments, reply, rounding and key layout (the TAT in nanoseconds)";

const fn limiter(
    name: &'static str,
    flags: &'static CStr,
    algorithm: &'static dyn Algorithm,
    summary: &'static CStr,
    complexity: &'static CStr,
    args: &'static [Arg],
) -> Command {
    Command {
        name,
        flags,
        keys: Keys::First,
        handler: handlers::limiter,
        algorithm: Some(algorithm),
        docs: Docs {
            summary,
            complexity,
            arity: -4,
            args,
        },
        requires: None,
        stats: Stats::new(),
        state: State::new(),
    }
}

/// A limiter row registered only when the module gets `argument` at load.
const fn optional(argument: &'static str, command: Command) -> Command {
    Command {
        requires: Some(argument),
        ..command
    }
}

pub static COMMANDS: [Command; 14] = [
    limiter(
        "rl.slidelog",
        c"write",
        &SlideLog,
        c"Sliding-window log limiter: exact, one sorted-set entry per admitted unit",
        c"O(log(N)) with N the entries in the log, plus O(M) for M expired entries removed (at most 1000), plus O(COST * log(N)) for the COST entries added (COST at most 1000000)",
        LIMITER_ARGS,
    ),
    limiter(
        "rl.slidecount",
        c"write fast",
        &SlideCount,
        c"Sliding-window counter limiter: the current and previous window's counters",
        c"O(1)",
        LIMITER_ARGS,
    ),
    limiter(
        "rl.slidewindow",
        c"write fast",
        &SlideWindow,
        c"Sliding-window limiter anchored at the first admitted call (Symfony's): its window, its count and the previous window's, in one key",
        c"O(1)",
        LIMITER_ARGS,
    ),
    limiter(
        "rl.fixed",
        c"write fast",
        &Fixed,
        c"Fixed-window limiter: one counter per clock-aligned window",
        c"O(1)",
        LIMITER_ARGS,
    ),
    limiter(
        "rl.counter",
        c"write fast",
        &Counter,
        c"Counter limiter: one counter at the key, whose TTL is the window, started by the first hit",
        c"O(1)",
        COUNTER_ARGS,
    ),
    limiter(
        "rl.gcra",
        c"write fast",
        &Gcra,
        c"GCRA limiter: smooth spacing with a burst allowance, one theoretical arrival time",
        c"O(1)",
        GCRA_ARGS,
    ),
    limiter(
        "rl.tokenbucket",
        c"write fast",
        &TokenBucket,
        c"Token bucket refilled in steps: REFILL tokens at each whole interval, up to the capacity, as Symfony's token_bucket",
        c"O(1)",
        TOKENBUCKET_ARGS,
    ),
    limiter(
        "rl.concurrency",
        c"write",
        &Concurrency,
        c"Concurrency limiter: leases of requests in flight, each expiring on its own",
        c"O(log(N)) with N the leases held, plus O(M) for M expired leases removed (at most 1000)",
        CONCURRENCY_ARGS,
    ),
    limiter(
        "rl.throttle",
        c"write fast",
        &Throttle,
        THROTTLE_SUMMARY,
        c"O(1)",
        THROTTLE_ARGS,
    ),
    // `loadmodule libredis_rl.so cl-throttle`: the same command under redis-cell's
    // name, so that apps keep calling CL.THROTTLE.
    optional(
        "cl-throttle",
        limiter(
            "cl.throttle",
            c"write fast",
            &Throttle,
            THROTTLE_SUMMARY,
            c"O(1)",
            THROTTLE_ARGS,
        ),
    ),
    Command {
        name: "rl.all",
        flags: c"write getkeys-api",
        keys: Keys::Parsed,
        handler: handlers::all,
        algorithm: None,
        docs: Docs {
            summary: c"Checks several limits at once: spends on all of them only if all admit",
            complexity: c"The sum of the limits' complexities",
            arity: -6,
            args: &[
                arg(c"numlimits", ArgType::Integer),
                Arg {
                    multiple: true,
                    subargs: &[
                        Arg {
                            subargs: &[
                                token(c"slidelog", c"SLIDELOG"),
                                token(c"slidecount", c"SLIDECOUNT"),
                                token(c"slidewindow", c"SLIDEWINDOW"),
                                token(c"fixed", c"FIXED"),
                                token(c"counter", c"COUNTER"),
                                token(c"gcra", c"GCRA"),
                                token(c"tokenbucket", c"TOKENBUCKET"),
                                token(c"concurrency", c"CONCURRENCY"),
                            ],
                            ..arg(c"algorithm", ArgType::OneOf)
                        },
                        arg(c"key", ArgType::Key),
                        arg(c"limit", ArgType::Integer),
                        arg(c"window", ArgType::String),
                        option(c"burst", c"BURST", ArgType::Integer),
                        option(c"refill", c"REFILL", ArgType::Integer),
                        option(c"cost", c"COST", ArgType::Integer),
                        BLOCK,
                    ],
                    ..arg(c"limits", ArgType::Block)
                },
                option(c"now", c"NOW", ArgType::UnixTime),
                option(c"lease", c"LEASE", ArgType::String),
                MODE,
            ],
        },
        requires: None,
        stats: Stats::new(),
        state: State::new(),
    },
    Command {
        name: "rl.pseudonym",
        flags: c"readonly fast",
        keys: Keys::None,
        handler: handlers::pseudonym,
        algorithm: None,
        docs: Docs {
            summary: c"A daily-rotating keyed hash of an identity (an IP address, an API key), for limiter keys without personal data",
            complexity: c"O(N) with N the length of the identity",
            arity: -2,
            args: &[
                arg(c"identity", ArgType::String),
                Arg {
                    optional: true,
                    ..arg(c"scope", ArgType::String)
                },
                option(c"bits", c"PREFIX6", ArgType::Integer),
                option(c"now", c"NOW", ArgType::UnixTime),
            ],
        },
        requires: None,
        stats: Stats::new(),
        state: State::new(),
    },
    // Local to each server, like INFO: it reads the module's own summary, never a key,
    // so it runs on replicas and every cluster node alike.
    Command {
        name: "rl.top",
        flags: c"readonly allow-loading allow-stale",
        keys: Keys::None,
        handler: top::handler,
        algorithm: None,
        docs: Docs {
            summary: c"The keys this server denied most, worst first: denials, admissions since tracked, error bound, last denial and what denied it",
            complexity: c"O(N) with N the entries in the summary (at most rl.top-size)",
            arity: -1,
            args: &[
                option(c"count", c"COUNT", ArgType::Integer),
                option(c"algorithm", c"ALGORITHM", ArgType::String),
                Arg {
                    optional: true,
                    ..token(c"reset", c"RESET")
                },
            ],
        },
        requires: None,
        stats: Stats::new(),
        state: State::new(),
    },
    // Lets the tests prove that a panic inside a command becomes an error reply
    // instead of a dead server.
    Command {
        name: "rl.debug-panic",
        flags: c"readonly",
        keys: Keys::None,
        handler: handlers::debug_panic,
        algorithm: None,
        docs: Docs {
            summary: c"Panics on purpose (tests only)",
            complexity: c"O(1)",
            arity: -1,
            args: &[],
        },
        requires: Some("debug-commands"),
        stats: Stats::new(),
        state: State::new(),
    },
];
