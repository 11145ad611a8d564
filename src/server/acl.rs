//! Derived keys (`<key>:<n>`) are not arguments, so Redis cannot check them against
//! the caller's ACL key patterns; the module does, as it would for the base key.

use std::os::raw::c_int;

use redis_module::raw;

use super::key::{bytes, free_string, Ctx, RString};
use crate::error::{Error, Result};

/// Refuses with NOPERM unless the calling user may read (and, if `write`, write) `key`.
pub fn check_key(ctx: Ctx, key: RString, write: bool) -> Result<()> {
    let mut flags = raw::REDISMODULE_CMD_KEY_ACCESS;
    if write {
        flags |= raw::REDISMODULE_CMD_KEY_UPDATE | raw::REDISMODULE_CMD_KEY_INSERT;
    }
    // SAFETY: the user name and user handle are freed before returning; a null name
    // means no client is attached (nothing to check).
    let allowed = unsafe {
        let (Some(current), Some(lookup), Some(check), Some(free_user)) = (
            raw::RedisModule_GetCurrentUserName,
            raw::RedisModule_GetModuleUserFromUserName,
            raw::RedisModule_ACLCheckKeyPermissions,
            raw::RedisModule_FreeModuleUser,
        ) else {
            return Ok(());
        };
        let name = current(ctx);
        if name.is_null() {
            return Ok(());
        }
        let user = lookup(name);
        free_string(ctx, name);
        if user.is_null() {
            return Err(Error::NoPermission(lossy(key)));
        }
        let rc = check(user, key, flags as c_int);
        free_user(user);
        rc == 0
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::NoPermission(lossy(key)))
    }
}

fn lossy(key: RString) -> String {
    String::from_utf8_lossy(bytes(key)).into_owned()
}
