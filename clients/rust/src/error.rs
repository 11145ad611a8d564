//! Why Redis did not decide. Every variant goes through the failure policy.

use std::time::Duration;

/// An error of this crate: what went wrong between the app and the module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection failed, or Redis answered with an error (`unknown command` when the
    /// module is not loaded, a bad argument, `CROSSSLOT`, the module's cluster refusals).
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    /// No answer within the limiter's timeout.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// Redis answered, but not with what the command returns.
    #[error("unexpected reply to {command}: {reply}")]
    UnexpectedReply { command: String, reply: String },
    /// The call cannot be sent as asked (e.g. `RL.ALL` without limits).
    #[error("invalid call: {0}")]
    InvalidCall(&'static str),
    /// A key extractor found nothing to limit the request by.
    #[error("unable to extract a rate-limit key from the request")]
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
