//! Derived keys (`<key>:<n>`) are not arguments, so Redis cannot check them against
//! the caller's ACL key patterns; the module does, as it would for the base key.

use std::os::raw::c_int;

use redis_module::raw;

use super::key::{free_string, lossy, Ctx, RString};
use crate::error::{Error, Result};

/// Who is calling, as far as key permissions go. Looked up at most once per call
/// (SLIDECOUNT checks two keys) and never kept longer: a user can be changed or
/// deleted between calls.
pub enum Caller {
    /// No client is attached (nothing to check against).
    Anyone,
    /// The client's user no longer exists.
    Unknown,
    User(*mut raw::RedisModuleUser),
}

impl Caller {
    pub fn lookup(ctx: Ctx) -> Caller {
        // SAFETY: the name string is freed here; the user handle by Drop.
        unsafe {
            let (Some(current), Some(lookup)) = (
                raw::RedisModule_GetCurrentUserName,
                raw::RedisModule_GetModuleUserFromUserName,
            ) else {
                return Caller::Anyone;
            };
            let name = current(ctx);
            if name.is_null() {
                return Caller::Anyone;
            }
            let user = lookup(name);
            free_string(ctx, name);
            if user.is_null() {
                Caller::Unknown
            } else {
                Caller::User(user)
            }
        }
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        if let Caller::User(user) = *self {
            // SAFETY: the handle came from GetModuleUserFromUserName and is freed once.
            unsafe {
                if let Some(free) = raw::RedisModule_FreeModuleUser {
                    free(user);
                }
            }
        }
    }
}

/// Refuses with NOPERM unless the calling user may read (and, if `write`, write) `key`.
pub fn check_key(ctx: Ctx, caller: &Caller, key: RString, write: bool) -> Result<()> {
    let mut flags = raw::REDISMODULE_CMD_KEY_ACCESS;
    if write {
        flags |= raw::REDISMODULE_CMD_KEY_UPDATE | raw::REDISMODULE_CMD_KEY_INSERT;
    }
    let allowed = match *caller {
        Caller::Anyone => true,
        Caller::Unknown => false,
        // SAFETY: a live user handle and key string.
        Caller::User(user) => unsafe {
            raw::RedisModule_ACLCheckKeyPermissions
                .is_none_or(|check| check(user, key, flags as c_int) == 0)
        },
    };
    if allowed {
        Ok(())
    } else {
        log_refusal(ctx, key);
        Err(Error::NoPermission(lossy(key)))
    }
}

/// Adds the refusal to the server's `ACL LOG`, as the server logs its own refusals of
/// argument keys, so that an auditor sees derived keys refused too: reason `key`,
/// context `module`, the key as the object, the command in the client info. Only
/// where the server has `ACLAddLogEntryByUserName` (Redis 7.2+, Valkey, which copy
/// the key); on Redis 7.0 the refusal is not logged, the call is refused all the same.
fn log_refusal(ctx: Ctx, key: RString) {
    // SAFETY: the user name string is freed here; the server copies the name and the key.
    unsafe {
        let (Some(current), Some(log)) = (
            raw::RedisModule_GetCurrentUserName,
            raw::RedisModule_ACLAddLogEntryByUserName,
        ) else {
            return;
        };
        let name = current(ctx);
        if name.is_null() {
            return;
        }
        log(
            ctx,
            name,
            key,
            raw::RedisModuleACLLogEntryReason_REDISMODULE_ACL_LOG_KEY,
        );
        free_string(ctx, name);
    }
}
