#!/usr/bin/env bash
# Builds scripts/<command>.lua from scripts/src/lib.lua (one library, one entry line
# per command) and copies them into every kit, byte for byte. `make scripts-sync`;
# tests/scripts.rs checks that nothing here is out of date.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
for cmd in fixed counter slidecount slidewindow slidelog gcra tokenbucket concurrency throttle all; do
  name="RL.$(echo "$cmd" | tr a-z A-Z)"
  {
    echo "-- $name as a Redis script: generated from scripts/src/lib.lua by make scripts-sync."
    cat scripts/src/lib.lua
    echo
    echo "return main('$cmd')"
  } > "scripts/$cmd.lua"
done
for dir in clients/node/scripts clients/python/src/redis_rl/scripts clients/php/scripts clients/rust/scripts; do
  mkdir -p "$dir"
  rm -f "$dir"/*.lua
  cp scripts/*.lua "$dir/"
done
