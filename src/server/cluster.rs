//! What the module needs to know of Redis Cluster that 7.0's module API does not say:
//! which slots this node is importing (`check_migration` answers TRYAGAIN there).
//!
//! Asking `CLUSTER NODES` costs ~300,000 instructions, 20 times a limiter call, so the
//! answer is cached: a 16384-bit set read from the `myself` line's `[<slot>-<-<id>]`
//! entries, refreshed by the first limiter call that needs it after it went stale.
//!
//! Why a cache is sound. A node's importing state changes only when a `CLUSTER`
//! command runs on it (SETSLOT IMPORTING/MIGRATING/STABLE/NODE, ADDSLOTS, RESET,
//! REPLICATE, FAILOVER, …; on Valkey 8+ also SETSLOT replicated from the primary,
//! which arrives as a command too), when it loads nodes.conf (before the module), or
//! when it changes role (a primary turned replica closes its slots; the gossip does
//! not open an import). So the cache starts stale, and goes stale when
//! - a `CLUSTER` command other than a read-only subcommand reaches the command filter
//!   registered in cluster mode only (standalone pays nothing). Filters see a command
//!   just before it runs, from a client or a script (`redis.call`) alike, so the next
//!   limiter call refreshes after it ran;
//! - the role changes (the replication-role server event);
//! - EXEC arrives for a transaction that may hold a queued `CLUSTER` command: a
//!   filter sees a queued command when it is queued, not when EXEC runs it, so a
//!   limiter call in between (another client's, or one earlier in the same
//!   transaction) would cache the state from before it. Where the server tells a
//!   filter the client (Redis 7.2+, Valkey) the EXEC of exactly those clients marks
//!   the cache stale; on Redis 7.0, once a `CLUSTER` command arrived after a MULTI,
//!   every EXEC does. Inside such a transaction a refresh does not make the cache
//!   fresh (a later queued command may still change the state), the next limiter
//!   call after it does.
//!
//! Valkey 9's atomic slot migration (CLUSTER MIGRATESLOTS) sets no importing state:
//! the target serves none of the slot's keys until it owns the slot, so nothing is
//! refused there, and the cache needs none of its server events (nor the trim after
//! it): `tests/good_citizen.rs` moves and cancels a busy slot under traffic with zero
//! TRYAGAIN.

use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use redis_module::raw;

use super::key::{bytes, call_command, Ctx, OwnedString, Propagate};

const SLOTS: usize = 16384;
const WORDS: usize = SLOTS / 64;

/// The importing slots as last read, one bit each.
static IMPORTING: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
/// The set must be read again before it is used.
static STALE: AtomicBool = AtomicBool::new(true);
/// A MULTI reached the filter (Redis 7.0: a later `CLUSTER` command may be queued).
static MULTI_SEEN: AtomicBool = AtomicBool::new(false);
/// Redis 7.0: a `CLUSTER` command may sit in a transaction, so every EXEC may run one.
static EXEC_MAY_CHANGE: AtomicBool = AtomicBool::new(false);
/// Redis 7.2+ and Valkey: the clients that queued a `CLUSTER` command in MULTI.
static QUEUED_BY: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// The transaction now running may run a queued `CLUSTER` command.
static IN_CHANGING_EXEC: AtomicBool = AtomicBool::new(false);

/// Whether this node is importing `slot` from another node.
pub fn importing(ctx: Ctx, slot: u16) -> bool {
    if STALE.load(Relaxed) {
        refresh(ctx);
    }
    let slot = usize::from(slot);
    IMPORTING
        .get(slot / 64)
        .is_some_and(|w| w.load(Relaxed) & (1 << (slot % 64)) != 0)
}

/// In cluster mode, registers the filter and the event that keep the cache honest.
/// Returns false if the server refused either.
pub fn register(ctx: Ctx) -> bool {
    // SAFETY: called from OnLoad with its context; the callbacks are `extern "C"`
    // functions that live as long as the module.
    unsafe {
        let flags = raw::RedisModule_GetContextFlags.map_or(0, |f| f(ctx)) as u32;
        if flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER == 0 {
            return true;
        }
        let (Some(filter), Some(subscribe)) = (
            raw::RedisModule_RegisterCommandFilter,
            raw::RedisModule_SubscribeToServerEvent,
        ) else {
            return false;
        };
        if filter(
            ctx,
            Some(on_command),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        )
        .is_null()
        {
            return false;
        }
        let role = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
            dataver: 1,
        };
        subscribe(ctx, role, Some(on_role_change)) == 0
    }
}

/// Reads the importing slots from `CLUSTER NODES`. On failure the old set stays in use
/// and stays stale.
fn refresh(ctx: Ctx) {
    let Some(slots) = cluster_nodes(ctx).and_then(|text| parse_importing(&text)) else {
        return;
    };
    for (word, bits) in IMPORTING.iter().zip(slots) {
        word.store(bits, Relaxed);
    }
    // SAFETY: GetContextFlags only reads the context.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(ctx)) } as u32;
    let in_exec = flags & raw::REDISMODULE_CTX_FLAGS_MULTI != 0;
    if !in_exec {
        IN_CHANGING_EXEC.store(false, Relaxed);
    }
    if !(in_exec && IN_CHANGING_EXEC.load(Relaxed)) {
        STALE.store(false, Relaxed);
    }
}

/// The importing slots named on the `myself` line of `CLUSTER NODES`, or None if there
/// is no such line.
fn parse_importing(nodes: &str) -> Option<[u64; WORDS]> {
    let line = nodes.lines().find(|line| {
        line.split(' ')
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    })?;
    let mut slots = [0u64; WORDS];
    for field in line.split(' ').skip(8) {
        let Some(slot) = field
            .strip_prefix('[')
            .and_then(|f| f.split_once("-<-"))
            .and_then(|(slot, _)| slot.parse::<usize>().ok())
        else {
            continue;
        };
        if let Some(word) = slots.get_mut(slot / 64) {
            *word |= 1 << (slot % 64);
        }
    }
    Some(slots)
}

fn cluster_nodes(ctx: Ctx) -> Option<String> {
    let nodes = OwnedString::new(ctx, b"NODES").ok()?;
    call_command(ctx, c"CLUSTER", &[nodes.ptr], Propagate::No, |reply| {
        let mut len = 0;
        // SAFETY: a live reply; the bytes are copied out before it is freed.
        unsafe {
            let p = raw::RedisModule_CallReplyStringPtr?(reply, &mut len);
            if p.is_null() {
                return None;
            }
            let bytes = std::slice::from_raw_parts(p.cast::<u8>(), len);
            Some(String::from_utf8_lossy(bytes).into_owned())
        }
    })
    .ok()
    .flatten()
}

/// `CLUSTER` subcommands that change nothing on this node.
fn read_only(subcommand: &[u8]) -> bool {
    const READ_ONLY: [&[u8]; 16] = [
        b"nodes",
        b"slots",
        b"shards",
        b"info",
        b"myid",
        b"myshardid",
        b"keyslot",
        b"countkeysinslot",
        b"getkeysinslot",
        b"links",
        b"replicas",
        b"slaves",
        b"count-failure-reports",
        b"help",
        b"slot-stats",
        b"saveconfig",
    ];
    READ_ONLY.iter().any(|r| r.eq_ignore_ascii_case(subcommand))
}

/// The command filter: runs before every command in cluster mode, so it looks at the
/// length of the name first and at most three names.
extern "C" fn on_command(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: the filter context and its arguments are live during the callback.
    unsafe {
        let Some(arg) = raw::RedisModule_CommandFilterArgGet else {
            return;
        };
        let name = arg(fctx, 0);
        if name.is_null() {
            return;
        }
        let name = bytes(name);
        if name.eq_ignore_ascii_case(b"cluster") {
            let sub = arg(fctx, 1);
            if sub.is_null() || read_only(bytes(sub)) {
                return;
            }
            STALE.store(true, Relaxed);
            match client_id(fctx).map(|id| (id, in_multi(id))) {
                Some((id, Some(true))) => {
                    if let Ok(mut queued) = QUEUED_BY.lock() {
                        if !queued.contains(&id) {
                            queued.push(id);
                        }
                    } else {
                        EXEC_MAY_CHANGE.store(true, Relaxed);
                    }
                }
                Some((_, Some(false))) => {}
                _ => {
                    if MULTI_SEEN.load(Relaxed) {
                        EXEC_MAY_CHANGE.store(true, Relaxed);
                    }
                }
            }
        } else if name.eq_ignore_ascii_case(b"exec") {
            let mut changing = EXEC_MAY_CHANGE.load(Relaxed);
            if let Some(id) = client_id(fctx) {
                if let Ok(mut queued) = QUEUED_BY.lock() {
                    if let Some(at) = queued.iter().position(|&q| q == id) {
                        queued.swap_remove(at);
                        changing = true;
                    }
                }
            }
            // EXEC runs alone: the transaction before it has ended.
            IN_CHANGING_EXEC.store(changing, Relaxed);
            if changing {
                STALE.store(true, Relaxed);
            }
        } else if name.eq_ignore_ascii_case(b"multi") {
            MULTI_SEEN.store(true, Relaxed);
        }
    }
}

/// The filtered command's client, where the server can say (Redis 7.2+, Valkey).
///
/// SAFETY: `fctx` must be the live filter context.
unsafe fn client_id(fctx: *mut raw::RedisModuleCommandFilterCtx) -> Option<u64> {
    // SAFETY: as the caller promises.
    unsafe { Some(raw::RedisModule_CommandFilterGetClientId?(fctx)) }
}

/// Whether a client is in MULTI, so that its command is being queued.
fn in_multi(id: u64) -> Option<bool> {
    /// RedisModuleClientInfoV1.
    #[repr(C)]
    struct ClientInfo {
        version: u64,
        flags: u64,
        id: u64,
        addr: [c_char; 46],
        port: u16,
        db: u16,
    }
    let mut info = ClientInfo {
        version: 1,
        flags: 0,
        id: 0,
        addr: [0; 46],
        port: 0,
        db: 0,
    };
    // SAFETY: `info` is a V1 client info the call fills in.
    let found = unsafe { raw::RedisModule_GetClientInfoById?((&raw mut info).cast(), id) } == 0;
    found.then_some(info.flags & u64::from(raw::REDISMODULE_CLIENTINFO_FLAG_MULTI) != 0)
}

extern "C" fn on_role_change(
    _ctx: *mut raw::RedisModuleCtx,
    _event: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut std::ffi::c_void,
) {
    STALE.store(true, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bit(slots: &[u64; WORDS], slot: usize) -> bool {
        slots[slot / 64] & (1 << (slot % 64)) != 0
    }

    #[test]
    fn reads_importing_slots_from_the_myself_line_only() {
        let nodes = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [93->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f]
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [93-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [16383-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [77->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 master - 0 0 1 connected 10923-16383 [5-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
";
        let Some(slots) = parse_importing(nodes) else {
            panic!("no myself line found");
        };
        let set: Vec<usize> = (0..SLOTS).filter(|&s| bit(&slots, s)).collect();
        assert_eq!(set, [93, 16383]);
    }

    #[test]
    fn odd_lines_import_nothing() {
        assert!(parse_importing("").is_none());
        assert!(parse_importing("garbage").is_none());
        let Some(slots) = parse_importing(
            "a b myself,master - 0 0 1 connected [x-<-a] [99999-<-a] [-<-a] [7->-a] 0-16383",
        ) else {
            panic!("no myself line found");
        };
        assert!(slots.iter().all(|&w| w == 0));
        // "myself" must be a whole flag.
        assert!(parse_importing("a b notmyself,master - 0 0 1 connected [1-<-a]").is_none());
    }

    #[test]
    fn read_only_subcommands_ignore_case_and_others_do_not_pass() {
        assert!(read_only(b"NODES"));
        assert!(read_only(b"CountKeysInSlot"));
        for changing in [
            &b"SETSLOT"[..],
            b"reset",
            b"addslots",
            b"failover",
            b"nodesx",
            b"",
        ] {
            assert!(!read_only(changing), "{changing:?}");
        }
    }
}
