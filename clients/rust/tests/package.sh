#!/usr/bin/env bash
# The crate as a user gets it: `cargo package` makes the .crate, a fresh app depends on
# what it unpacks to (with the axum and tokio lines the docs show), builds the
# quickstart (examples/axum.rs) as its main.rs, and serves requests through it against
# a real redis-server with the module. Env: RL_MODULE, RL_SERVER (as test.sh).
set -euo pipefail
kit="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$kit"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cargo package --locked --no-verify --allow-dirty --quiet
crate="$kit/target/package/redis-rl-client-$version.crate"
test -f "$crate"
files=$(tar -tzf "$crate")
for file in LICENSE README.md Cargo.toml; do
  grep -qx "redis-rl-client-$version/$file" <<<"$files" || { echo "package: no $file in the crate"; exit 1; }
done

scratch=$(mktemp -d)
server_pid=""
app_pid=""
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  rm -rf "$scratch"
}
trap cleanup EXIT
tar -xzf "$crate" -C "$scratch"
mkdir -p "$scratch/app/src"
cat > "$scratch/app/Cargo.toml" <<TOML
[package]
name = "quickstart-app"
version = "0.1.0"
edition = "2021"

[dependencies]
redis-rl-client = { path = "../redis-rl-client-$version" }
axum = { version = "0.8", features = ["tokio", "http1"] }
tokio = { version = "1", features = ["macros", "rt-multi-thread", "net"] }

[workspace]
TOML
cp examples/axum.rs "$scratch/app/src/main.rs"
# The kit's lock keeps the versions (and so the compiled dependencies) the kit's own
# tests use; the shared target folder makes this build only the app and the crate.
cp Cargo.lock "$scratch/app/Cargo.lock"
CARGO_TARGET_DIR="$kit/target/package-app" cargo build --quiet --manifest-path "$scratch/app/Cargo.toml"
app="$kit/target/package-app/debug/quickstart-app"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
redis_port=$(free_port)
RL_SECRET=package-test "${RL_SERVER:-redis-server}" --port "$redis_port" --bind 127.0.0.1 --save "" \
  --appendonly no --loadmodule "$RL_MODULE" >"$scratch/redis.log" 2>&1 &
server_pid=$!
http_port=$(free_port)
for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.05; done
REDIS_URL="redis://127.0.0.1:$redis_port" PORT="$http_port" "$app" >"$scratch/app.log" 2>&1 &
app_pid=$!
first=""
for _ in $(seq 200); do
  first=$(curl -si "http://127.0.0.1:$http_port/" 2>/dev/null) && break
  sleep 0.05
done
echo "$first" | grep -q '^HTTP/1.1 200' || { echo "package: no 200 from the packaged quickstart:"; echo "$first"; cat "$scratch/app.log"; exit 1; }
echo "$first" | grep -qi '^ratelimit-policy: "burst";q=10;w=1, "minute";q=100;w=60' || { echo "package: no RateLimit-Policy:"; echo "$first"; exit 1; }
# One curl for the 20 requests, on one connection: fast enough for 10 a second with a
# burst of 2 to refuse some, even on a loaded machine.
urls=$(for _ in $(seq 20); do printf -- '-o /dev/null http://127.0.0.1:%s/ ' "$http_port"; done)
# shellcheck disable=SC2086
statuses=$(curl -s -w '%{http_code}\n' $urls)
echo "$statuses" | grep -q '^429$' || { echo "package: 20 requests in a row met no 429: $statuses"; cat "$scratch/app.log"; exit 1; }
echo "package: redis-rl-client-$version.crate installed into a fresh app, 200 then 429 through it: 1 passed, 0 failed"
