//! Client for the [redis-rl](../../README.md) module: typed calls for every command, a
//! decision type with a signed retry, the IETF `RateLimit` headers, an explicit failure
//! policy, cluster routing that never redirects, an opt-in deny cache, RL.PSEUDONYM,
//! RL.TOP merged over a cluster's primaries, and (feature `tower`, on by default) a tower
//! layer for axum. It decides nothing itself: every decision is the module's.

pub mod backend;
pub mod cache;
pub mod connection;
pub mod decision;
pub mod error;
pub mod headers;
#[cfg(feature = "tower")]
pub mod key;
#[cfg(feature = "tower")]
pub mod layer;
pub mod limit;
pub mod limiter;
pub mod metrics;
mod pseudonym;
pub mod top;

pub use backend::Backend;
pub use cache::{DenyCache, PseudonymCache};
pub use connection::{connect, connect_cluster, Connection};
pub use decision::{Decision, Source, Throttle};
pub use error::Error;
pub use headers::{ratelimit_headers, Headers};
#[cfg(feature = "tower")]
pub use key::{GlobalKeyExtractor, KeyExtractor, PeerIpKeyExtractor, SmartIpKeyExtractor};
#[cfg(feature = "tower")]
pub use layer::{RateLimit, RateLimitLayer, RequestId, ShadowHandler};
pub use limit::{Algorithm, Block, Growth, LeaseOp, Limit, Mode};
pub use limiter::{
    Clock, Cost, FailureHandler, FailurePolicy, RateLimiter, Unavailable, DEFAULT_TIMEOUT,
};
pub use top::{TopEntry, TopQuery};
