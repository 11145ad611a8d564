//! redis-rl: rate limiters as native Redis commands.
//!
//! This file only lists the commands; `algo` decides, `server` reads and writes keys.

pub mod algo;
pub mod args;
pub mod error;
pub mod layout;
pub mod server;

#[cfg(not(test))]
mod module {
    use std::ffi::CStr;
    use std::os::raw::c_int;

    use redis_module::{raw, redis_module, Context, RedisString, Status};

    use crate::error::Result;
    use crate::server::call::{run, Call, Reply};
    use crate::server::{fixed, slidecount, slidelog};

    type Handler = fn(&Call) -> Result<Reply>;

    /// name, handler, flags, first key, last key, key step.
    macro_rules! commands {
        ($([$name:literal, $handler:path, $flags:literal, $first:literal, $last:literal, $step:literal]),* $(,)?) => {
            fn register(ctx: *mut raw::RedisModuleCtx) -> Status {
                $({
                    extern "C" fn entry(
                        ctx: *mut raw::RedisModuleCtx,
                        argv: *mut *mut raw::RedisModuleString,
                        argc: c_int,
                    ) -> c_int {
                        const HANDLER: Handler = $handler;
                        run(ctx, argv, argc, $name, HANDLER)
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
        ["rl.slidelog", slidelog::command, "write deny-oom", 1, 1, 1],
        ["rl.slidecount", slidecount::command, "write deny-oom fast", 1, 1, 1],
        ["rl.fixed", fixed::command, "write deny-oom fast", 1, 1, 1],
    }

    fn init(ctx: &Context, _args: &[RedisString]) -> Status {
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
