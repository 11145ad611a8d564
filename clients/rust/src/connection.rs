//! redis-rs connections with limiter-friendly defaults, and routing that names the node.
//!
//! A limiter sits in front of every request, so a Redis that is down or stuck must cost
//! milliseconds, not the seconds of redis-rs's defaults: short connect and response
//! timeouts, few retries, and the limiter's own timeout around every call.

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
};
use redis::{Cmd, Value};

/// Seconds to open a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// To wait for a reply; a limiter call normally takes well under 1 ms.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_millis(250);

/// A connection to a standalone server (redis-rs's `ConnectionManager`, which
/// reconnects by itself) or to a cluster (redis-rs's async cluster client). Cheap to
/// clone; clones share the connection.
#[derive(Clone)]
pub enum Connection {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl From<ConnectionManager> for Connection {
    fn from(manager: ConnectionManager) -> Self {
        Connection::Standalone(manager)
    }
}

impl From<ClusterConnection> for Connection {
    fn from(cluster: ClusterConnection) -> Self {
        Connection::Cluster(cluster)
    }
}

/// A `ConnectionManager` on `url` with short timeouts that connects on first use, so an
/// app starts while Redis is away (its calls then go through the failure policy). Must
/// be called inside a Tokio runtime.
pub fn connect(url: &str) -> redis::RedisResult<Connection> {
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(RESPONSE_TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    let client = redis::Client::open(url)?;
    Ok(Connection::Standalone(
        ConnectionManager::new_lazy_with_config(client, config)?,
    ))
}

/// A cluster connection from any of its nodes' URLs, with short timeouts, that learns
/// the slot map in the background (the first calls may go through the failure policy
/// until it has). Must be called inside a Tokio runtime.
pub fn connect_cluster<I, S>(urls: I) -> redis::RedisResult<Connection>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let nodes: Vec<String> = urls.into_iter().map(|u| u.as_ref().to_string()).collect();
    let client = redis::cluster::ClusterClient::builder(nodes)
        .retries(2)
        .build()?;
    let config = redis::cluster::ClusterConfig::new()
        .set_connection_timeout(CONNECT_TIMEOUT)
        .set_response_timeout(RESPONSE_TIMEOUT);
    Ok(Connection::Cluster(
        client.get_pending_async_connection_with_config(config),
    ))
}

/// Where a command must go in a cluster.
#[derive(Clone, Copy)]
pub(crate) enum Target<'a> {
    /// The node that serves this key's slot.
    Key(&'a str),
    /// Any primary (keyless commands).
    Any,
}

impl Connection {
    /// Sends `cmd`. In a cluster it names the node itself: redis-rs routes unknown
    /// commands by their first argument, which is RL.ALL's count of limits (two thirds
    /// of them would come back MOVED) and RL.PSEUDONYM's identity.
    pub(crate) async fn send(&self, cmd: Cmd, target: Target<'_>) -> redis::RedisResult<Value> {
        match self {
            Connection::Standalone(manager) => cmd.query_async(&mut manager.clone()).await,
            Connection::Cluster(cluster) => {
                let node = match target {
                    Target::Key(key) => SingleNodeRoutingInfo::SpecificNode(Route::with_slot(
                        Slot::for_key(key),
                        SlotAddr::Master,
                    )),
                    Target::Any => SingleNodeRoutingInfo::RandomPrimary,
                };
                cluster
                    .clone()
                    .route_command(cmd, RoutingInfo::SingleNode(node))
                    .await
            }
        }
    }

    /// Sends a keyless `cmd` to every primary (a standalone server: to it) and returns
    /// each one's reply, for what a node answers about itself (RL.TOP). An error reply
    /// of a node is its `Value::ServerError`.
    pub(crate) async fn send_to_primaries(&self, cmd: Cmd) -> redis::RedisResult<Vec<Value>> {
        match self {
            Connection::Standalone(manager) => {
                Ok(vec![cmd.query_async(&mut manager.clone()).await?])
            }
            Connection::Cluster(cluster) => {
                let every = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                // Without a response policy redis-rs answers a map: node address => reply.
                match cluster.clone().route_command(cmd, every).await? {
                    Value::Map(replies) => {
                        Ok(replies.into_iter().map(|(_, reply)| reply).collect())
                    }
                    other => Ok(vec![other]),
                }
            }
        }
    }
}
