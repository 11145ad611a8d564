#!/usr/bin/env bash
# The Rust kit's checks: rustfmt, clippy (-D warnings), then the tests against real
# servers that they start themselves (standalone, without the module, a 3-node cluster). Env: RL_MODULE (default
# ../../target/release/libredis_rl.so), RL_SERVER (default redis-server); extra
# arguments go to `cargo test`.
set -euo pipefail

kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$kit/../.." && pwd)"
cd "$kit"
export RL_MODULE="${RL_MODULE:-$repo/target/release/libredis_rl.so}"

cargo fmt -- --check
cargo clippy --locked --all-targets --features axum-07 -- -D warnings
# Builds the examples too (tests/suite/example.rs runs examples/axum.rs).
cargo test --locked --features axum-07 "$@"
# The integration suite again on servers without the module: the kit decides through
# its scripts (Backend::Auto detects it).
RL_BACKEND=scripts cargo test --locked --features axum-07 --test suite "$@"
# The packaged crate in a fresh app (tests/package.sh).
tests/package.sh
