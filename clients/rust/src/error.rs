//! Why Redis did not decide. Every variant but `InvalidLimit` and `InvalidCall` (the
//! app's own mistakes, raised where they are made) goes through the failure policy.

use std::time::Duration;

/// An error of this crate: what went wrong between the app and the module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection failed, or Redis answered with an error (`unknown command` when the
    /// module is not loaded, a bad argument, `CROSSSLOT`, the module's cluster refusals).
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    /// The server has no RL.* commands: the module is not loaded there.
    #[error("{0} (the redis-rl module is not loaded on this server: add `loadmodule /path/to/libredis_rl.so` to its redis.conf, or run MODULE LOAD; or use Backend::Auto, which decides through scripts there)")]
    ModuleNotLoaded(String),
    /// A command only the module has (RL.TOP: the scripts keep no denial summary) on
    /// `Backend::Scripts`, or on a server without the module.
    #[error("{command} needs the redis-rl module: {why}")]
    ModuleRequired { command: &'static str, why: String },
    /// RL.PSEUDONYM on the scripts backend without [`crate::RateLimiter::pseudonym_secret`].
    #[error("RL.PSEUDONYM on a server without the module needs the secret in the app: RateLimiter::pseudonym_secret")]
    NoSecret,
    /// No answer within the limiter's timeout.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// Redis answered, but not with what the command returns.
    #[error("unexpected reply to {command}: {reply}")]
    UnexpectedReply { command: String, reply: String },
    /// The call cannot be sent as asked (e.g. `RL.ALL` without limits).
    #[error("invalid call: {0}")]
    InvalidCall(&'static str),
    /// A limit, cost or lease id the module would refuse: a mistake in the app, raised
    /// where the limit is built or used, never answered by the failure policy.
    #[error("redis-rl: invalid limit '{name}': {reason}")]
    InvalidLimit { name: String, reason: String },
    /// A key extractor found nothing to limit the request by.
    #[error("unable to extract a rate-limit key from the request (the peer-IP extractors need the app served with into_make_service_with_connect_info::<SocketAddr>(); on axum 0.7, enable this crate's feature `axum-07`)")]
    UnableToExtractKey,
}

impl Error {
    pub(crate) fn unexpected(command: &str, reply: &redis::Value) -> Self {
        Error::UnexpectedReply {
            command: command.to_string(),
            reply: format!("{reply:?}"),
        }
    }
}
