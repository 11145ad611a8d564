//! The HMAC secret of RL.PSEUDONYM.
//!
//! It never passes through anything Redis shows: on 7.0 module config values appear
//! in CONFIG GET, MODULE LIST and SLOWLOG even when flagged sensitive, so the config
//! `rl.secret-file` holds only a path. The file is read when the config is set (at
//! load or by CONFIG SET), so a change takes effect at once and a bad path is refused
//! there, with the old secret kept. Without a file, the server's RL_SECRET is used.

use std::sync::{Mutex, OnceLock};

use redis_module::configuration::{ConfigurationContext, ConfigurationValue};
use redis_module::{RedisError, RedisString};

use crate::error::{Error, Result};

#[derive(Default)]
struct State {
    path: String,
    secret: Option<Vec<u8>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    path: String::new(),
    secret: None,
});

static ENV_SECRET: OnceLock<Option<Vec<u8>>> = OnceLock::new();

/// The value type of the `rl.secret-file` config.
pub struct SecretFile;

pub static SECRET_FILE: SecretFile = SecretFile;

/// A secret file's content, without the line break an editor or `echo` leaves.
fn read_secret(path: &str) -> std::result::Result<Vec<u8>, String> {
    let mut bytes = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    while matches!(bytes.last(), Some(b'\n' | b'\r')) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return Err(format!("{path} is empty"));
    }
    Ok(bytes)
}

impl ConfigurationValue<RedisString> for SecretFile {
    fn get(&self, _ctx: &ConfigurationContext) -> RedisString {
        let path = STATE.lock().map(|s| s.path.clone()).unwrap_or_default();
        RedisString::create(None, path.as_str())
    }

    fn set(
        &self,
        _ctx: &ConfigurationContext,
        value: RedisString,
    ) -> std::result::Result<(), RedisError> {
        let path = value.try_as_str()?.to_string();
        let secret = if path.is_empty() {
            None
        } else {
            Some(read_secret(&path).map_err(RedisError::String)?)
        };
        let mut state = STATE
            .lock()
            .map_err(|_| RedisError::Str("rl.secret-file: state unavailable"))?;
        *state = State { path, secret };
        Ok(())
    }
}

/// Reads RL_SECRET once, at load: the server's environment does not change later.
pub fn load_environment() {
    ENV_SECRET.get_or_init(|| {
        std::env::var_os("RL_SECRET")
            .map(|v| v.into_encoded_bytes())
            .filter(|v| !v.is_empty())
    });
}

/// Calls `f` with the secret in force.
pub fn with_secret<T>(f: impl FnOnce(&[u8]) -> T) -> Result<T> {
    let state = STATE
        .lock()
        .map_err(|_| Error::Internal("secret state unavailable"))?;
    if !state.path.is_empty() {
        return match &state.secret {
            Some(secret) => Ok(f(secret)),
            None => Err(Error::SecretFile(format!(
                "{} was not readable",
                state.path
            ))),
        };
    }
    match ENV_SECRET.get() {
        Some(Some(secret)) => Ok(f(secret)),
        _ => Err(Error::NoSecret),
    }
}
