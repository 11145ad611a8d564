//! redis-rl: rate limiters as native Redis commands.
//!
//! This file only lists the commands; `algo` decides, `server` reads and writes keys.

pub mod algo;
pub mod args;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod layout;
pub mod pseudonym;
pub mod server;

#[cfg(not(test))]
mod module {
    use std::ffi::CStr;
    use std::os::raw::c_int;

    use redis_module::configuration::{register_string_configuration, ConfigurationFlags};
    use redis_module::{raw, redis_module, Context, RedisString, Status};

    use crate::error::Result;
    use crate::server::call::{run, Call, Reply};
    use crate::server::secret::{load_environment, SECRET_FILE};
    use crate::server::stats::{self, Stats};
    use crate::server::{cluster, debug, fixed, gcra, info, pseudonym, slidecount, slidelog};

    type Handler = fn(&Call) -> Result<Reply>;

    /// name, handler, counters, flags, first key, last key, key step.
    macro_rules! commands {
        ($register:ident: $([$name:literal, $handler:path, $stats:path, $flags:literal, $first:literal, $last:literal, $step:literal]),* $(,)?) => {
            fn $register(ctx: *mut raw::RedisModuleCtx) -> Status {
                $({
                    extern "C" fn entry(
                        ctx: *mut raw::RedisModuleCtx,
                        argv: *mut *mut raw::RedisModuleString,
                        argc: c_int,
                    ) -> c_int {
                        const HANDLER: Handler = $handler;
                        static STATS: &Stats = &$stats;
                        run(ctx, argv, argc, STATS, HANDLER)
                    }
                    let name: &CStr = match CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                        Ok(name) => name,
                        Err(_) => return Status::Err,
                    };
                    let flags: &CStr = match CStr::from_bytes_with_nul(concat!($flags, "\0").as_bytes()) {
                        Ok(flags) => flags,
                        Err(_) => return Status::Err,
                    };
                    // SAFETY: called from OnLoad with its context and static strings.
                    let rc = unsafe {
                        raw::RedisModule_CreateCommand.map_or(1, |create| {
                            create(ctx, name.as_ptr(), Some(entry), flags.as_ptr(), $first, $last, $step)
                        })
                    };
                    if rc != 0 {
                        return Status::Err;
                    }
                })*
                Status::Ok
            }
        };
    }

    commands! {
        register:
        ["rl.slidelog", slidelog::command, stats::SLIDELOG, "write", 1, 1, 1],
        ["rl.slidecount", slidecount::command, stats::SLIDECOUNT, "write fast", 1, 1, 1],
        ["rl.fixed", fixed::command, stats::FIXED, "write fast", 1, 1, 1],
        ["rl.gcra", gcra::command, stats::GCRA, "write fast", 1, 1, 1],
        ["rl.pseudonym", pseudonym::command, stats::PSEUDONYM, "readonly fast", 0, 0, 0],
    }

    // Only with `loadmodule libredis_rl.so debug-commands`: lets the tests prove that a
    // panic inside a command becomes an error reply instead of a dead server.
    commands! {
        register_debug:
        ["rl.debug-panic", debug::panic, stats::DEBUG, "readonly", 0, 0, 0],
    }

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        let debug_commands = args.iter().any(|a| a.as_slice() == b"debug-commands");
        if debug_commands && register_debug(ctx.ctx) == Status::Err {
            return Status::Err;
        }
        load_environment();
        // Registered here rather than in the macro, whose configuration list does not
        // compile with string configs alone.
        register_string_configuration(
            ctx,
            "secret-file",
            &SECRET_FILE,
            "",
            ConfigurationFlags::DEFAULT,
            None,
        );
        // SAFETY: called from OnLoad, after the config is registered.
        unsafe {
            if let Some(load_configs) = raw::RedisModule_LoadConfigs {
                if load_configs(ctx.ctx) != 0 {
                    return Status::Err;
                }
            }
        }
        // Replaces the crate's default INFO callback with the `rl` section.
        // SAFETY: called from OnLoad with its context.
        unsafe {
            if let Some(register_info) = raw::RedisModule_RegisterInfoFunc {
                register_info(ctx.ctx, Some(info::info));
            }
        }
        // In cluster mode: what keeps the importing-slot cache fresh.
        if !cluster::register(ctx.ctx) {
            return Status::Err;
        }
        register(ctx.ctx)
    }

    redis_module! {
        name: "rl",
        version: 1,
        allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
        data_types: [],
        init: init,
        commands: [],
    }
}
