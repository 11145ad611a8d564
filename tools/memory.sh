#!/usr/bin/env bash
# Memory per limiter identity: `used_memory` growth over 100,000 identities (keys
# `rl:id000000` ...), each called once, from an empty database, for each limiter and
# for the script it replaces on the same key names. Also prints the OBJECT ENCODING
# and MEMORY USAGE of one stored value of each; the module's counters and TATs in
# both storage modes (rl.integer-values yes and no). One fixed `now` (module NOW, script
# ARGV). Prints Markdown. RL_MEMORY_IDENTITIES changes the number of identities.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="${RL_MODULE:-$root/target/release/libredis_rl.so}"
server="${RL_SERVER:-redis-server}"
n=${RL_MEMORY_IDENTITIES:-100000}
now_us=1764480000000000
now_s=$((now_us / 1000000))
[ -f "$module" ] || { echo "memory: build the module first (make build)" >&2; exit 2; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
"$server" --port "$port" --dir "$dir" --save "" --appendonly no --loadmodule "$module" \
  >"$dir/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 1 100); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done

used() { cli info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p'; }

# load WORDS...: the command WORDS for every identity, `{}` replaced by its key, sent
# as one pipelined stream.
load() {
  python3 - "$n" "$@" <<'EOF' | cli --pipe >/dev/null
import sys
n = int(sys.argv[1]); words = sys.argv[2:]
out = sys.stdout.buffer
for i in range(n):
    key = b"rl:id%06d" % i
    args = [w.encode().replace(b"{}", key) for w in words]
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
EOF
}

sha() { cli script load "$(cat "$1")"; }
fixed_lua=$(sha "$root/lua/fixed_window.lua")
count_lua=$(sha "$root/lua/sliding_window_counter.lua")
log_lua=$(sha "$root/lua/sliding_window_log.lua")
gcra_lua=$(sha "$root/benches/gcra.lua")
counter_lua=$(sha "$root/scripts/counter.lua") # the kits' RL.COUNTER: rate-limit-redis's INCR + PEXPIRE layout
window_lua=$(sha "$root/scripts/slidewindow.lua")
bucket_lua=$(sha "$root/scripts/tokenbucket.lua")
i=$((now_s / 60))

# measure NAME KEY-OF-ID0 WORDS...: B per identity, encoding and MEMORY USAGE of key 0.
measure() {
  local name=$1 key=$2; shift 2
  cli flushall >/dev/null
  local before; before=$(used)
  load "$@"
  local after; after=$(used)
  local keys; keys=$(cli dbsize)
  local enc; enc=$(cli object encoding "$key")
  local usage; usage=$(cli memory usage "$key" samples 0)
  awk -v name="$name" -v d=$((after - before)) -v n="$n" -v k="$keys" -v e="$enc" -v u="$usage" \
    'BEGIN {printf "| %s | %.1f | %d | %s | %s |\n", name, d / n, k, e, u}'
}

# module NAME KEY WORDS...: a module row in each storage mode (rl.integer-values).
module() {
  local name=$1; shift
  for v in yes no; do
    cli config set rl.integer-values "$v" >/dev/null
    measure "$name, rl.integer-values $v" "$@"
  done
  cli config set rl.integer-values yes >/dev/null
}

echo "| limiter | B per identity | keys | OBJECT ENCODING | MEMORY USAGE (B) |"
echo "|---|---:|---:|---|---:|"
measure "INCR (a plain counter, no TTL)" "rl:id000000" INCR "{}"
module "RL.FIXED" "rl:id000000:$now_s" RL.FIXED "{}" 100 60 NOW "$now_us"
measure "fixed_window.lua (INCR + EXPIRE)" "rl:id000000:$now_s" EVALSHA "$fixed_lua" 1 "{}" "$now_s" 60 100
module "RL.SLIDECOUNT" "rl:id000000:$i" RL.SLIDECOUNT "{}" 100 60 NOW "$now_us"
measure "sliding_window_counter.lua" "rl:id000000:$i" EVALSHA "$count_lua" 2 "{}:$i" "{}:$((i - 1))" 100 0.000000 60
module "RL.COUNTER" "rl:id000000" RL.COUNTER "{}" 100 60 NOW "$now_us"
measure "counter.lua (the kits' script)" "rl:id000000" EVALSHA "$counter_lua" 1 "{}" "{}" 100 60 NOW "$now_us"
module "RL.GCRA" "rl:id000000" RL.GCRA "{}" 100 3600 NOW "$now_us"
measure "gcra.lua (SET ... PX)" "rl:id000000" EVALSHA "$gcra_lua" 1 "{}" "$now_us" 36000000 100
measure "RL.SLIDELOG, 1 entry" "rl:id000000" RL.SLIDELOG "{}" 100 60 NOW "$now_us"
measure "sliding_window_log.lua, 1 entry" "rl:id000000" EVALSHA "$log_lua" 1 "{}" "$now_us" 60000000 100 "$now_us:00000000"
measure "RL.SLIDEWINDOW (<end>:<count>:<previous>)" "rl:id000000" RL.SLIDEWINDOW "{}" 100 60 NOW "$now_us"
measure "slidewindow.lua (the kits' script)" "rl:id000000" EVALSHA "$window_lua" 1 "{}" "{}" 100 60 NOW "$now_us"
measure "RL.TOKENBUCKET (<tokens>:<timer>)" "rl:id000000" RL.TOKENBUCKET "{}" 100 60 NOW "$now_us"
measure "tokenbucket.lua (the kits' script)" "rl:id000000" EVALSHA "$bucket_lua" 1 "{}" "{}" 100 60 NOW "$now_us"
