//! What the module needs to know of Redis Cluster that 7.0's module API does not say.

use super::key::Ctx;

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
    use redis_module::raw;
    // SAFETY: RM_Call with a static command and argument; the reply is freed here.
    unsafe {
        let call = raw::RedisModule_Call?;
        let string = raw::RedisModule_CallReplyStringPtr?;
        let free = raw::RedisModule_FreeCallReply?;
        let reply = call(ctx, c"CLUSTER".as_ptr(), c"c".as_ptr(), c"NODES".as_ptr());
        if reply.is_null() {
            return None;
        }
        let mut len = 0;
        let p = string(reply, &mut len);
        let text = if p.is_null() {
            None
        } else {
            let bytes = std::slice::from_raw_parts(p.cast::<u8>(), len);
            Some(String::from_utf8_lossy(bytes).into_owned())
        };
        free(reply);
        text
    }
}
