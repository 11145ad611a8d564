//! Commands that exist only for the module's own tests (see `lib.rs`).

use super::call::{Call, Reply};
use crate::error::Result;

/// Panics on purpose, after touching nothing.
pub fn panic(_call: &Call) -> Result<Reply> {
    panic!("rl.debug-panic was asked to panic");
}
