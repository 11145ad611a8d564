//! What the module needs to know of Redis Cluster that 7.0's module API does not say.

use redis_module::raw;

use super::key::{call_command, Ctx, OwnedString, Propagate};

/// Whether this node is importing `slot` from another node. `CLUSTER NODES` marks an
/// importing slot as `[<slot>-<-<node id>]` on the `myself` line. Only consulted when
/// a counter is missing in cluster mode, so its cost (a few µs) is rare.
pub fn importing(ctx: Ctx, slot: u16) -> bool {
    let Some(nodes) = cluster_nodes(ctx) else {
        return false;
    };
    let marker = format!("[{slot}-<-");
    nodes
        .lines()
        .find(|line| line.split(' ').nth(2).is_some_and(|f| f.contains("myself")))
        .is_some_and(|line| line.contains(&marker))
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
