//! The thin layer between Redis and the pure limiters: read keys, decide, write,
//! replicate, notify.
//!
//! The raw pointers passed around here (the command's context, its argument strings,
//! open keys) all come from Redis for the duration of one command and are never kept
//! beyond it; the functions that take them stay safe to call for that reason.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod acl;
pub mod call;
pub mod cluster;
pub mod dispatch;
pub mod effects;
pub mod engine;
pub mod handlers;
pub mod info;
pub mod key;
pub mod log;
pub mod options;
pub mod register;
pub mod secret;
pub mod slot;
pub mod stats;
pub mod top;
