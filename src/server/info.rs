//! The `INFO rl` section.

use std::ffi::CString;
use std::os::raw::c_int;

use redis_module::raw;

use crate::command::{Command, Registration};
use crate::commands::COMMANDS;

/// The build id (see build.rs and tools/source_hash.rs), as a C string.
const BUILD_ID: &std::ffi::CStr =
    match std::ffi::CStr::from_bytes_with_nul(concat!(env!("RL_BUILD_ID"), "\0").as_bytes()) {
        Ok(id) => id,
        Err(_) => c"unknown",
    };

/// The first field is `rl_build:<hex>`, then fields read `rl_<command>_<counter>`, e.g.
/// `rl_slidelog_denied:12`; Redis adds the `rl_` prefix itself.
pub extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: called by Redis with a live info context; field names are C strings that
    // outlive each call.
    unsafe {
        let (Some(section), Some(field)) = (
            raw::RedisModule_InfoAddSection,
            raw::RedisModule_InfoAddFieldULongLong,
        ) else {
            return;
        };
        if section(ctx, std::ptr::null_mut()) != 0 {
            return;
        }
        // `rl_build:<16 hex>`: the hash of the sources this module was built from
        // (build.rs), so that a stale build can be told from the current one.
        if let Some(text) = raw::RedisModule_InfoAddFieldCString {
            text(ctx, c"build".as_ptr(), BUILD_ID.as_ptr());
        }
        // Commands the server already had, left to it: `rl_skipped:cl.throttle`.
        let skipped: Vec<&str> = COMMANDS
            .iter()
            .filter(|c| c.state.get() == Registration::Skipped)
            .map(|c| c.name)
            .collect();
        if !skipped.is_empty() {
            if let (Some(text), Ok(list)) = (
                raw::RedisModule_InfoAddFieldCString,
                CString::new(skipped.join(",")),
            ) {
                text(ctx, c"skipped".as_ptr(), list.as_ptr().cast_mut());
            }
        }
        // RL.TOP's own fields are the summary's size, not call counters.
        let shown = |c: &&Command| {
            c.requires != Some("debug-commands")
                && c.name != "rl.top"
                && c.state.get() == Registration::Registered
        };
        for command in COMMANDS.iter().filter(shown) {
            // `rl_gcra_calls`, `rl_cl_throttle_calls`.
            let command_name = command.name.trim_start_matches("rl.").replace('.', "_");
            for (counter, value) in command.stats.fields() {
                if let Ok(name) = CString::new(format!("{command_name}_{counter}")) {
                    field(ctx, name.as_ptr().cast_mut(), value);
                }
            }
        }
        let (entries, bytes) = super::top::info();
        field(ctx, c"top_entries".as_ptr().cast_mut(), entries);
        field(ctx, c"top_bytes".as_ptr().cast_mut(), bytes);
    }
}
