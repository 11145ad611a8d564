//! The module options (`RedisModule_SetModuleOptions`) the module declares: each one
//! tells the server that a feature it would otherwise switch off while the module is
//! loaded is safe with it. Each is declared only where the server is known to read
//! its bit that way, and only after a test showed the module correct under it.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::raw;

use super::key::Ctx;

/// The module signals every key it writes itself (`Slot::announce`), so that a call
/// that writes nothing (a denial, a PEEK) leaves other clients' WATCH and client-side
/// caching alone. Without it, closing a key opened for writing signals it whether or
/// not anything changed. Redis 6.2+ and every Valkey read this bit this way.
/// Proven by `tests/good_citizen.rs` (WATCH and CLIENT TRACKING per limiter).
pub const NO_IMPLICIT_SIGNAL_MODIFIED: c_int = 1 << 1;

/// Replicas may keep serving their old data while a full sync loads
/// (`repl-diskless-load swapdb`). The promise: the module keeps no state outside the
/// keyspace that a load in the background could leave inconsistent. It holds: the
/// limiters' state is plain strings and sorted sets, and the only module-side state,
/// the importing-slot cache, is never used on a replica (replicas run no limiter
/// writes) and is marked stale on any role change. Redis 7.0+ and every Valkey.
/// Proven by `tests/good_citizen.rs::replica_loads_a_full_sync_asynchronously`.
pub const HANDLE_REPL_ASYNC_LOAD: c_int = 1 << 2;

/// Valkey 9's atomic slot migration (`CLUSTER MIGRATESLOTS`). The promise: the module
/// copes with a slot's keys arriving on the target before it owns the slot, and with
/// the target dropping them if the migration is cancelled. It holds: every write is
/// replicated as its effects (core commands), which is exactly what the migration
/// streams to the target, and the target serves no command on the slot before it owns
/// it, so no limiter ever decides on a half-copied slot. Valkey 9+ only: Redis gives
/// bit 5 no meaning today and may give it another one.
/// Proven by `tests/good_citizen.rs::atomic_slot_migration_*` on Valkey 9.1.2.
pub const HANDLE_ATOMIC_SLOT_MIGRATION: c_int = 1 << 5;

/// The server the module was loaded into, as far as the options depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    pub valkey: bool,
    /// `(major, minor)` of the server's own version (`valkey_version` on Valkey).
    pub version: (u32, u32),
    /// The options the server knows (`GetModuleOptionsAll`, Redis 7.2+ and Valkey);
    /// `None` on servers that cannot say (Redis 7.0).
    pub known: Option<c_int>,
}

/// The options to declare on `server`: a pure function, tested for every server kind.
pub fn wanted(server: Server) -> c_int {
    let mut options = NO_IMPLICIT_SIGNAL_MODIFIED;
    if server.valkey || server.version >= (7, 0) {
        options |= HANDLE_REPL_ASYNC_LOAD;
    }
    if server.valkey && server.version >= (9, 0) {
        options |= HANDLE_ATOMIC_SLOT_MIGRATION;
    }
    // A bit the server says it does not know is not declared, whatever the version.
    match server.known {
        Some(known) => options & known,
        None => options,
    }
}

/// Declares the options on the running server; returns what was declared.
pub fn declare(ctx: Ctx) -> c_int {
    let options = wanted(detect(ctx));
    // SAFETY: called from OnLoad with its context.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(ctx, options);
        }
    }
    options
}

fn detect(ctx: Ctx) -> Server {
    // SAFETY: GetModuleOptionsAll takes no argument; its absence is checked.
    let known = unsafe { raw::RedisModule_GetModuleOptionsAll.map(|f| f()) };
    let valkey_version = server_field(ctx, c"valkey_version");
    let version = valkey_version
        .as_deref()
        .or(server_field(ctx, c"redis_version").as_deref())
        .map_or((0, 0), parse_version);
    Server {
        valkey: valkey_version.is_some(),
        version,
        known,
    }
}

/// One field of `INFO server`, read through the module API.
fn server_field(ctx: Ctx, field: &CStr) -> Option<String> {
    // SAFETY: the info data is freed before returning; the field's string is copied
    // out while it is alive.
    unsafe {
        let get = raw::RedisModule_GetServerInfo?;
        let field_of = raw::RedisModule_ServerInfoGetFieldC?;
        let free = raw::RedisModule_FreeServerInfo?;
        let data = get(ctx, c"server".as_ptr());
        if data.is_null() {
            return None;
        }
        let value = field_of(data, field.as_ptr());
        let out = (!value.is_null()).then(|| CStr::from_ptr(value).to_string_lossy().into_owned());
        free(ctx, data);
        out
    }
}

fn parse_version(text: &str) -> (u32, u32) {
    let mut parts = text.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REDIS_70: Server = Server {
        valkey: false,
        version: (7, 0),
        known: None,
    };

    #[test]
    fn redis_7_0_gets_async_load_and_explicit_signals_only() {
        assert_eq!(
            wanted(REDIS_70),
            NO_IMPLICIT_SIGNAL_MODIFIED | HANDLE_REPL_ASYNC_LOAD
        );
    }

    #[test]
    fn atomic_slot_migration_only_on_valkey_9_and_later() {
        let all = Some(0x3f);
        let redis = Server {
            valkey: false,
            version: (9, 9),
            known: all,
        };
        assert_eq!(wanted(redis) & HANDLE_ATOMIC_SLOT_MIGRATION, 0);
        let valkey8 = Server {
            valkey: true,
            version: (8, 1),
            known: all,
        };
        assert_eq!(wanted(valkey8) & HANDLE_ATOMIC_SLOT_MIGRATION, 0);
        let valkey9 = Server {
            valkey: true,
            version: (9, 1),
            known: all,
        };
        assert_eq!(
            wanted(valkey9),
            NO_IMPLICIT_SIGNAL_MODIFIED | HANDLE_REPL_ASYNC_LOAD | HANDLE_ATOMIC_SLOT_MIGRATION
        );
    }

    #[test]
    fn a_bit_the_server_does_not_know_is_never_declared() {
        let valkey9_without_asm = Server {
            valkey: true,
            version: (9, 0),
            known: Some(0x1f),
        };
        assert_eq!(
            wanted(valkey9_without_asm),
            NO_IMPLICIT_SIGNAL_MODIFIED | HANDLE_REPL_ASYNC_LOAD
        );
    }

    #[test]
    fn versions_parse_leniently() {
        assert_eq!(parse_version("9.1.2"), (9, 1));
        assert_eq!(parse_version("7.0.15"), (7, 0));
        assert_eq!(parse_version("junk"), (0, 0));
    }
}
