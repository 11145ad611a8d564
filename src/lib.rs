//! redis-rl: rate limiters as native Redis commands.
//!
//! `commands` lists the commands; `algo` decides; `server` reads and writes keys.

pub mod algo;
pub mod args;
pub mod command;
pub mod commands;
pub mod error;
#[cfg(test)]
mod fuzz;
pub mod layout;
pub mod limit;
pub mod pseudonym;
pub mod server;
pub mod top;

#[cfg(not(test))]
mod module {
    use redis_module::configuration::{
        register_bool_configuration, register_i64_configuration, register_string_configuration,
        ConfigurationFlags,
    };
    use redis_module::{raw, redis_module, Context, RedisString, Status};

    use crate::server::call::log_warning;
    use crate::server::dispatch::install_panic_hook;
    use crate::server::effects::INTEGER_VALUES;
    use crate::server::register::{missing_functions, register};
    use crate::server::secret::{load_environment, SECRET_FILE};
    use crate::server::{cluster, info, options, top};

    fn init(ctx: &Context, args: &[RedisString]) -> Status {
        let missing = missing_functions();
        if !missing.is_empty() {
            log_warning(
                ctx.ctx,
                &format!(
                    "rl: this server lacks module API functions the commands need, not loading: {}",
                    missing.join(", ")
                ),
            );
            return Status::Err;
        }
        install_panic_hook();
        // Before the commands exist: the server reads some options when a command or
        // a sync starts.
        options::declare(ctx.ctx);
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
        register_bool_configuration(
            ctx,
            "integer-values",
            &INTEGER_VALUES,
            true,
            ConfigurationFlags::DEFAULT,
            None,
        );
        register_i64_configuration(
            ctx,
            "top-size",
            &top::TOP_SIZE,
            top::DEFAULT_SIZE,
            0,
            top::MAX_SIZE,
            ConfigurationFlags::DEFAULT,
            None,
        );
        // SAFETY: called from OnLoad, after the configs are registered.
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
        // `loadmodule libredis_rl.so debug-commands` adds rl.debug-panic for the
        // tests; `cl-throttle` adds CL.THROTTLE.
        let module_args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        if let Err(e) = register(ctx.ctx, &module_args) {
            log_warning(ctx.ctx, &format!("rl: {e}"));
            return Status::Err;
        }
        // In cluster mode: what keeps the importing-slot cache fresh.
        if !cluster::register(ctx.ctx) {
            log_warning(ctx.ctx, "rl: the server refused the cluster command filter");
            return Status::Err;
        }
        Status::Ok
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
