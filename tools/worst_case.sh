#!/usr/bin/env bash
# The worst single RL.SLIDELOG calls, in server µs (INFO commandstats, one call each,
# median of 5): logs of 1,000,000 entries, as a script (no size cap) or a caller with
# a large limit leaves them, met by a call with a small limit, a PEEK, a call after
# they all expired, and the largest COST. Prints a Markdown table.
#   RL_MODULE  the module (default: target/release/libredis_rl.so)
#   RL_SERVER  the server (default: redis-server)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="${RL_MODULE:-$root/target/release/libredis_rl.so}"
server="${RL_SERVER:-redis-server}"
work="$(mktemp -d)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$server" --port "$port" --save "" --appendonly no --dir "$work" --loadmodule "$module" \
  >"$work/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
cli() { redis-cli -p "$port" "$@"; }
for _ in $(seq 1 100); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done

t0=1764480000000000
members=1000000

# fill KEY FIRST: 1,000,000 entries one µs apart from FIRST, as the layout has them.
fill() {
  python3 - "$1" "$2" "$members" <<'EOF' | cli --pipe >/dev/null
import sys
key, first, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout
def command(words):
    out.write("*%d\r\n" % len(words))
    for w in words:
        out.write("$%d\r\n%s\r\n" % (len(w), w))
batch = 10000
for start in range(0, n, batch):
    words = ["ZADD", key]
    for k in range(start, min(start + batch, n)):
        t = first + k
        words += [str(t), "%d:%08x" % (t, k)]
    command(words)
EOF
}

# measure NAME SETUP... -- CALL...: the call's server µs after a fresh SETUP, 5 times.
measure() {
  local name=$1; shift
  local setup=() call=()
  while [ "$1" != -- ]; do setup+=("$1"); shift; done
  shift; call=("$@")
  local times=()
  for _ in 1 2 3 4 5; do
    cli flushall >/dev/null
    "${setup[@]}"
    cli config resetstat >/dev/null
    local reply; reply=$(cli "${call[@]}" | tr '\n' ' ')
    times+=("$(cli info commandstats | sed -n 's/^cmdstat_rl\.slidelog:.*usec=\([0-9]*\),.*/\1/p')")
  done
  local median; median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 3p)
  echo "| $name | $median | ${reply% } |"
}

now=$((t0 + members))
expired_now=$((t0 + members + 60000000))
echo "| call (one, on a log of 1,000,000 entries) | server µs (median of 5) | reply |"
echo "|---|---:|---|"
measure "denied, limit 1 (the entry whose exit admits is the newest)" fill big $t0 -- \
  RL.SLIDELOG big 1 60 NOW $now
measure "denied, limit 500,001 (the 500,000th oldest entry)" fill big $t0 -- \
  RL.SLIDELOG big 500001 60 NOW $now
measure "PEEK, limit 1" fill big $t0 -- RL.SLIDELOG big 1 60 NOW $now PEEK
measure "first call after every entry expired (removes 1,000)" fill big $t0 -- \
  RL.SLIDELOG big 100 60 NOW $expired_now
# 1,000 entries have just left: the call removes them and adds 1,000.
measure "admitted COST 1,000 (removes 1,000 expired, adds 1,000)" fill big $t0 -- \
  RL.SLIDELOG big 1000000 60 COST 1000 NOW $((t0 + 999 + 60000000))
