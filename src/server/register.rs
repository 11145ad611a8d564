//! Telling Redis about the commands of `commands::COMMANDS`: create each one,
//! describe it (`COMMAND DOCS`, `COMMAND INFO`, redis-cli's hints, key specs), give
//! it an ACL category where the server has them, and find RL.ALL's keys for it.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::call::log_warning;
use super::dispatch::run;
use super::handlers::all_key_positions;
use super::key::{bytes, call_command, Ctx, OwnedString, Propagate, RString};
use crate::command::{Arg, ArgType, Command, Keys, Registration};
use crate::commands::COMMANDS;

/// Every module API function the commands call. A server without one of them would
/// make a check pass open (an ACL check, a replication), so the module refuses to
/// load instead. Functions with a documented fallback are not listed: ACL
/// categories (7.2 and 7.4) and LoadConfigs.
macro_rules! required {
    ($($f:ident),* $(,)?) => {
        /// The names of the required functions this server lacks.
        pub fn missing_functions() -> Vec<&'static str> {
            let mut missing = Vec::new();
            // SAFETY: the function pointers are only read, after Redis filled them in.
            unsafe {
                $(if std::ptr::addr_of!(raw::$f).read().is_none() {
                    missing.push(stringify!($f));
                })*
            }
            missing
        }
    };
}

required![
    RedisModule_ACLCheckKeyPermissions,
    RedisModule_Call,
    RedisModule_CallReplyArrayElement,
    RedisModule_CallReplyInteger,
    RedisModule_CallReplyStringPtr,
    RedisModule_CallReplyType,
    RedisModule_CloseKey,
    RedisModule_CreateCommand,
    RedisModule_CreateString,
    RedisModule_CreateStringFromLongLong,
    RedisModule_DeleteKey,
    RedisModule_FreeCallReply,
    RedisModule_FreeModuleUser,
    RedisModule_FreeString,
    RedisModule_GetAbsExpire,
    RedisModule_GetCommand,
    RedisModule_GetContextFlags,
    RedisModule_GetCurrentUserName,
    RedisModule_GetModuleUserFromUserName,
    RedisModule_GetRandomBytes,
    RedisModule_InfoAddFieldCString,
    RedisModule_InfoAddFieldULongLong,
    RedisModule_InfoAddSection,
    RedisModule_IsKeysPositionRequest,
    RedisModule_KeyAtPos,
    RedisModule_KeyType,
    RedisModule_Log,
    RedisModule_NotifyKeyspaceEvent,
    RedisModule_OpenKey,
    RedisModule_RegisterCommandFilter,
    RedisModule_CommandFilterArgsCount,
    RedisModule_CommandFilterArgGet,
    RedisModule_RegisterInfoFunc,
    RedisModule_Replicate,
    RedisModule_ReplyWithArray,
    RedisModule_ReplyWithError,
    RedisModule_ReplyWithLongLong,
    RedisModule_ReplyWithStringBuffer,
    RedisModule_SetAbsExpire,
    RedisModule_SetModuleOptions,
    RedisModule_SignalModifiedKey,
    RedisModule_SetCommandInfo,
    RedisModule_StringDMA,
    RedisModule_StringPtrLen,
    RedisModule_StringTruncate,
    RedisModule_ValueLength,
    RedisModule_ZsetAdd,
    RedisModule_ZsetFirstInScoreRange,
    RedisModule_ZsetLastInScoreRange,
    RedisModule_ZsetRangeCurrentElement,
    RedisModule_ZsetRangeEndReached,
    RedisModule_ZsetRangeNext,
    RedisModule_ZsetRangePrev,
    RedisModule_ZsetRangeStop,
    RedisModule_ZsetRem,
    RedisModule_ZsetScore,
];

/// The ACL category the commands join where the server lets modules add one (7.4+),
/// so that `+@ratelimit` grants them all.
const CATEGORY: &CStr = c"ratelimit";

type Entry = extern "C" fn(Ctx, *mut RString, c_int) -> c_int;

/// Redis calls a plain C function per command; this one finds its row of the table.
extern "C" fn entry<const I: usize>(ctx: Ctx, argv: *mut RString, argc: c_int) -> c_int {
    let Some(command) = COMMANDS.get(I) else {
        return raw::REDISMODULE_ERR as c_int;
    };
    if command.keys == Keys::Parsed && keys_position_request(ctx) {
        declare_keys(ctx, argv, argc);
        return raw::REDISMODULE_OK as c_int;
    }
    run(ctx, argv, argc, command)
}

/// One per row of the table, and a few spare: an entry past the table answers an error
/// and is never registered.
const ENTRIES: [Entry; 16] = [
    entry::<0>,
    entry::<1>,
    entry::<2>,
    entry::<3>,
    entry::<4>,
    entry::<5>,
    entry::<6>,
    entry::<7>,
    entry::<8>,
    entry::<9>,
    entry::<10>,
    entry::<11>,
    entry::<12>,
    entry::<13>,
    entry::<14>,
    entry::<15>,
];

fn keys_position_request(ctx: Ctx) -> bool {
    // SAFETY: only reads the context.
    unsafe { raw::RedisModule_IsKeysPositionRequest.is_some_and(|f| f(ctx) != 0) }
}

fn declare_keys(ctx: Ctx, argv: *mut RString, argc: c_int) {
    let argc = usize::try_from(argc).unwrap_or(0);
    if argv.is_null() || argc < 2 {
        return;
    }
    // SAFETY: Redis passes `argc` valid argument strings.
    let argv = unsafe { std::slice::from_raw_parts(argv, argc) };
    let args: Vec<&[u8]> = argv.iter().skip(1).map(|&s| bytes(s)).collect();
    for position in all_key_positions(&COMMANDS, &args) {
        // SAFETY: a keys-position request context and a position inside argv.
        unsafe {
            if let (Some(at), Ok(position)) = (raw::RedisModule_KeyAtPos, c_int::try_from(position))
            {
                at(ctx, position);
            }
        }
    }
}

/// Creates every command of the table (those that require a module argument only
/// when it was given). A name the server already has is left to it, with a line
/// in the log (and `rl_skipped` in `INFO rl`): the module still loads.
pub fn register(ctx: Ctx, module_args: &[&[u8]]) -> Result<(), String> {
    if COMMANDS.len() > ENTRIES.len() {
        return Err("more commands than entry points".into());
    }
    // SAFETY: called from OnLoad, the only place categories may be added.
    let category = unsafe {
        raw::RedisModule_AddACLCategory.is_some_and(|add| add(ctx, CATEGORY.as_ptr()) == 0)
    };
    for (command, entry) in COMMANDS.iter().zip(ENTRIES) {
        let asked = command
            .requires
            .is_none_or(|a| module_args.contains(&a.as_bytes()));
        if !asked {
            command.state.set(Registration::Absent);
            continue;
        }
        if exists(ctx, command.name) {
            log_warning(
                ctx,
                &format!(
                    "rl: the server already has a command named {}: not adding the module's",
                    command.name
                ),
            );
            command.state.set(Registration::Skipped);
            continue;
        }
        create(ctx, command, entry, category)?;
        command.state.set(Registration::Registered);
    }
    Ok(())
}

/// Whether the server knows a command of this name (core or another module's):
/// `COMMAND INFO <name>` answers a null entry for an unknown one.
fn exists(ctx: Ctx, name: &str) -> bool {
    let (Ok(info), Ok(name)) = (
        OwnedString::new(ctx, b"INFO"),
        OwnedString::new(ctx, name.as_bytes()),
    ) else {
        return false;
    };
    call_command(
        ctx,
        c"COMMAND",
        &[info.ptr, name.ptr],
        Propagate::No,
        |reply| {
            // SAFETY: a live array reply; its element is only inspected.
            unsafe {
                let (Some(element), Some(kind)) = (
                    raw::RedisModule_CallReplyArrayElement,
                    raw::RedisModule_CallReplyType,
                ) else {
                    return false;
                };
                let first = element(reply, 0);
                !first.is_null() && kind(first) == raw::REDISMODULE_REPLY_ARRAY as c_int
            }
        },
    )
    .unwrap_or(false)
}

fn create(ctx: Ctx, command: &Command, entry: Entry, category: bool) -> Result<(), String> {
    let name = command.name;
    let c_name = std::ffi::CString::new(name).map_err(|_| format!("{name}: a NUL in the name"))?;
    let (first, last) = match command.keys {
        Keys::First => (1, 1),
        Keys::None | Keys::Parsed => (0, 0),
    };
    // SAFETY: called from OnLoad with its context and static C strings.
    unsafe {
        let create = raw::RedisModule_CreateCommand.ok_or("no CreateCommand")?;
        let rc = create(
            ctx,
            c_name.as_ptr(),
            Some(entry),
            command.flags.as_ptr(),
            first,
            last,
            first,
        );
        if rc != 0 {
            return Err(format!("could not create {name}"));
        }
        let handle = raw::RedisModule_GetCommand.ok_or("no GetCommand")?(ctx, c_name.as_ptr());
        if handle.is_null() {
            return Err(format!("could not find {name} after creating it"));
        }
        describe(handle, command).map_err(|e| format!("{name}: {e}"))?;
        if category && command.requires != Some("debug-commands") {
            if let Some(set) = raw::RedisModule_SetCommandACLCategories {
                if set(handle, CATEGORY.as_ptr()) != 0 {
                    return Err(format!("could not set the ACL category of {name}"));
                }
            }
        }
    }
    Ok(())
}

fn arg_type(kind: ArgType) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgType::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgType::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgType::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgType::UnixTime => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_UNIX_TIME,
        ArgType::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        ArgType::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        ArgType::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
    }
}

/// The arguments as Redis reads them: arrays ending in a zeroed entry. `keep` owns
/// every nested array until Redis has copied them.
fn raw_args(
    args: &[Arg],
    keep: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let mut flags = 0;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            raw::RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_: arg_type(a.kind),
                key_spec_index: if matches!(a.kind, ArgType::Key) {
                    0
                } else {
                    -1
                },
                token: a.token.map_or(ptr::null(), CStr::as_ptr),
                summary: ptr::null(),
                since: ptr::null(),
                flags: flags as c_int,
                deprecated_since: ptr::null(),
                subargs: if a.subargs.is_empty() {
                    ptr::null_mut()
                } else {
                    raw_args(a.subargs, keep)
                },
                display_text: ptr::null(),
            }
        })
        .collect();
    // SAFETY: an all-zero argument (null pointers, zero numbers) ends the array.
    out.push(unsafe { std::mem::zeroed() });
    let p = out.as_mut_ptr();
    keep.push(out);
    p
}

fn describe(handle: *mut raw::RedisModuleCommand, command: &Command) -> Result<(), &'static str> {
    static VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut keep = Vec::new();
    let args = raw_args(command.docs.args, &mut keep);
    // SAFETY: all-zero key specs are valid "absent" values; the last one ends the array.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    let [spec, _end] = &mut specs;
    // Like INCRBY's: reads the value and writes it back changed.
    spec.flags = u64::from(
        raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE,
    );
    match command.keys {
        Keys::First => {
            spec.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
            spec.bs.index.pos = 1;
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            // The union's `range` member, the one FK_RANGE reads.
            spec.fk.range.lastkey = 0;
            spec.fk.range.keystep = 1;
            spec.fk.range.limit = 0;
        }
        Keys::Parsed => {
            // Where the keys are depends on each limit's options: the command finds
            // them itself (getkeys-api).
            spec.notes = c"one key per limit, after its algorithm name".as_ptr();
            spec.begin_search_type =
                raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_UNKNOWN;
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_UNKNOWN;
        }
        Keys::None => {}
    }
    let info = raw::RedisModuleCommandInfo {
        version: &VERSION,
        summary: command.docs.summary.as_ptr(),
        complexity: command.docs.complexity.as_ptr(),
        since: c"0.2.0".as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: command.docs.arity,
        key_specs: if command.keys == Keys::None {
            ptr::null_mut()
        } else {
            specs.as_mut_ptr()
        },
        args,
    };
    // SAFETY: every pointer in `info` is live until this returns; Redis copies them.
    let rc = unsafe { raw::RedisModule_SetCommandInfo.map_or(1, |f| f(handle, &info)) };
    drop(keep);
    if rc == 0 {
        Ok(())
    } else {
        Err("the server refused the command's description")
    }
}
