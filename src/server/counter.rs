//! String counters as INCRBY keeps them: shared by RL.FIXED and RL.SLIDECOUNT.

use super::acl::check_key;
use super::call::Call;
use super::effects::{notify, replicate_int, Event};
use super::key::{lossy, Key, Kind, OwnedString};
use crate::error::{Error, Result};

pub struct Counter {
    pub name: OwnedString,
    key: Key,
    pub value: u64,
}

impl Counter {
    /// Opens `<name>` and reads it; an absent key counts 0.
    pub fn open(call: &Call, name: &[u8], writable: bool) -> Result<Counter> {
        let name = OwnedString::new(call.ctx, name)?;
        check_key(call, name.ptr, writable)?;
        let key = Key::open(call.ctx, name.ptr, writable)?;
        let value = key.read_counter(name.ptr)?.unwrap_or(0);
        Ok(Counter { name, key, value })
    }

    pub fn exists(&self) -> bool {
        self.key.kind() != Kind::Empty
    }

    /// Checks that `cost` can be added without overflowing, before anything is written.
    pub fn check_add(&self, cost: u64) -> Result<i64> {
        self.value
            .checked_add(cost)
            .and_then(|n| i64::try_from(n).ok())
            .ok_or_else(|| Error::Overflow(lossy(self.name.ptr)))
    }

    /// INCRBY `cost`, and a TTL of `ttl_ms` when that creates the counter, exactly as
    /// the scripts do, replicated as INCRBY and PEXPIREAT.
    pub fn add(&self, call: &Call, cost: u64, ttl_ms: u64) -> Result<()> {
        let new_value = self.check_add(cost)?;
        let created = self.key.kind() == Kind::Empty;
        let mut buf = [0; 20];
        let digits = crate::layout::decimal(new_value.unsigned_abs(), &mut buf);
        self.key.write_string(call.ctx, digits)?;
        replicate_int(
            call.ctx,
            c"INCRBY",
            self.name.ptr,
            i64::try_from(cost).unwrap_or(i64::MAX),
        );
        notify(call.ctx, Event::String, c"incrby", self.name.ptr);
        if created {
            let at = call
                .server_now_ms()
                .saturating_add(i64::try_from(ttl_ms).unwrap_or(i64::MAX));
            self.key.expire_at(at)?;
            replicate_int(call.ctx, c"PEXPIREAT", self.name.ptr, at);
            notify(call.ctx, Event::Generic, c"expire", self.name.ptr);
        }
        Ok(())
    }
}

/// While a slot moves between nodes, Redis sends a call to the importing node as
/// soon as the base key (which these limiters never write) is missing on the old one,
/// before the counters have moved. Deciding there would start from zero, so, like
/// Redis for a multi-key command whose keys are split, the call gets TRYAGAIN until
/// every counter it reads has arrived.
pub fn check_migration(call: &Call, counters: &[&Counter]) -> Result<()> {
    if call.in_cluster()
        && counters.iter().any(|c| !c.exists())
        && super::cluster::importing(call.ctx, crate::layout::key_slot(call.key_bytes()))
    {
        return Err(Error::TryAgain);
    }
    Ok(())
}

/// Derived keys must share the base key's slot, which only a hash tag guarantees.
pub fn check_cluster_key(call: &Call) -> Result<()> {
    if call.in_cluster() && !crate::layout::has_hash_tag(call.key_bytes()) {
        return Err(Error::NeedsHashTag(lossy(call.key())));
    }
    Ok(())
}
