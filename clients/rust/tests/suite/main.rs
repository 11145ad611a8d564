//! The kit's integration tests, one binary (one link) for all of them: real servers
//! started on free loopback ports by each test (see `common`).

mod common;

#[cfg(feature = "axum-07")]
mod axum07;
mod backend;
mod cluster;
mod commands;
mod concurrency;
mod counter;
mod counter_options;
mod deny_cache;
mod example;
mod failure;
mod layer;
mod metrics;
mod slidewindow_tokenbucket;
mod top;
