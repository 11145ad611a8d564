//! The HMAC secret of RL.PSEUDONYM.
//!
//! It never passes through anything Redis shows: on 7.0 module config values appear
//! in CONFIG GET, MODULE LIST and SLOWLOG even when flagged sensitive, so the config
//! `rl.secret-file` holds only a path. The file is read when the config is set (at
//! load or by CONFIG SET), so a change takes effect at once and a bad path is refused
//! there, with the old secret kept. Without a file, the server's RL_SECRET is used.
//!
//! The file is read on the main thread, so nothing about it may block or grow without
//! bound: it is opened non-blocking (a FIFO with no writer cannot hold the open),
//! anything but a regular file is refused (FIFOs, devices such as `/dev/zero`,
//! directories, sockets), and so is a file longer than [`MAX_SECRET_FILE`] bytes, of
//! which no more than one byte past the cap is ever read.

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

/// The longest secret file accepted, in bytes: a secret is a short random string
/// (32 bytes of hex is 64), so this leaves room for any sensible one.
pub const MAX_SECRET_FILE: u64 = 4096;

/// A secret file's content, without the line break an editor or `echo` leaves.
fn read_secret(path: &str) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;

    let cannot = |e: std::io::Error| format!("cannot read {path}: {e}");
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    // O_NOCTTY: a terminal named by mistake does not become the server's.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(cannot)?;
    // The type of what was opened, not of what the path named a moment earlier.
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(format!("{path} is not a regular file"));
    }
    let too_long = || format!("{path} is longer than {MAX_SECRET_FILE} bytes");
    if meta.len() > MAX_SECRET_FILE {
        return Err(too_long());
    }
    // The file may grow after the check: read one byte past the cap at most.
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SECRET_FILE {
        return Err(too_long());
    }
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
