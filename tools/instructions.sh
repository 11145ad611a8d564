#!/usr/bin/env bash
# Instructions per call inside each command, counted by valgrind's callgrind: the
# measure that is stable on a noisy machine, where µs move between runs. Each command
# gets its own redis-server under callgrind (the Lua scripts all run inside
# evalShaCommand, so they cannot share one) and the same load: redis-benchmark, 20,000
# calls pipelined 32 deep over 5,000 identities, one fixed NOW, from an empty database.
#
# "in the command" is what INFO commandstats times: incrCommand for INCR,
# RedisModuleCommandDispatcher for a module command, evalShaCommand for a script.
# "module API" is the part of a module call spent inside RedisModule_* functions,
# that is, in Redis itself; the rest is the module's own code and the dispatch.
#
# Prints Markdown. Needs valgrind, redis-server, redis-cli and redis-benchmark.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="$root/target/release/libredis_rl.so"
server="${RL_SERVER:-redis-server}"
work="${RL_INSTRUCTIONS_DIR:-$(mktemp -d)}"
[ -n "${RL_INSTRUCTIONS_DIR:-}" ] || trap 'rm -rf "$work"' EXIT
calls=20000
now_us=1764480000000000
now_s=$((now_us / 1000000))

for tool in valgrind callgrind_annotate redis-cli redis-benchmark; do
  command -v "$tool" >/dev/null || { echo "instructions: $tool is not installed" >&2; exit 2; }
done
[ -f "$module" ] || { echo "instructions: build the module first (make build)" >&2; exit 2; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# profile NAME SCRIPT|- BENCHMARK-ARGS...: runs the load under callgrind, leaves
# $work/NAME.out.
profile() {
  local name=$1 script=$2; shift 2
  local p; p=$(port)
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" \
    "$server" --port "$p" --save "" --appendonly no --loadmodule "$module" \
    >"$work/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && break
    sleep 0.2
  done
  local args=("$@")
  if [ "$script" != - ]; then
    local sha; sha=$(redis-cli -p "$p" script load "$(cat "$script")")
    args=(EVALSHA "$sha" "${args[@]}")
  fi
  redis-benchmark -p "$p" -n "$calls" -c 2 -P 32 -r 5000 -q "${args[@]}" >/dev/null 2>&1
  redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
}

# inclusive FILE FUNCTION-REGEX: the function's inclusive instructions per call.
inclusive() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -v "=>" \
    | grep -E "$2" | head -1 | awk -v n="$calls" '{gsub(",","",$1); printf "%.0f", $1/n}'
}

# module_api FILE: instructions per call inside RedisModule_* functions (they do not
# call one another on these paths, so their inclusive counts add up), leaving out
# RedisModule_Alloc/Free: those are the module's own heap allocations.
module_api() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -v "=>" \
    | grep -E "\?\?\?:RM_[A-Za-z]+ " | grep -vE "\?\?\?:RM_(Alloc|Calloc|Realloc|Free|GetApi) " \
    | awk -v n="$calls" '{gsub(",","",$1); s+=$1} END {printf "%.0f", s/n}'
}

lua="$root/lua"
profile incr - INCR 'k:{__rand_int__}'
profile fixed - RL.FIXED 'rl:{__rand_int__}' 100 60 NOW "$now_us"
profile fixed_lua "$lua/fixed_window.lua" 1 'rl:{__rand_int__}' "$now_s" 60 100
profile slidecount - RL.SLIDECOUNT 'rl:{__rand_int__}' 100 60 NOW "$now_us"
# The seed's caller passes both counters and the elapsed ratio (0 at this NOW).
i=$((now_s / 60))
profile slidecount_lua "$lua/sliding_window_counter.lua" 2 "rl:{__rand_int__}:$i" \
  "rl:{__rand_int__}:$((i - 1))" 100 0.000000 60
profile slidelog - RL.SLIDELOG 'rl:{__rand_int__}' 100 60 NOW "$now_us"
profile slidelog_lua "$lua/sliding_window_log.lua" 1 'rl:{__rand_int__}' "$now_us" 60000000 100 "$now_us:__rand_int__"
profile gcra - RL.GCRA 'rl:{__rand_int__}' 100 3600 NOW "$now_us"
profile gcra_lua "$root/benches/gcra.lua" 1 'rl:{__rand_int__}' "$now_us" 36000000 100

incr=$(inclusive "$work/incr.out" '\?\?\?:incrCommand ')
echo "| command | instructions per call, in the command | of which in the module API | ÷ INCR | script's | script ÷ this |"
echo "|---|---:|---:|---:|---:|---:|"
echo "| INCR | $incr |  | 1 |  |  |"
for c in fixed slidecount slidelog gcra; do
  m=$(inclusive "$work/$c.out" '\?\?\?:RedisModuleCommandDispatcher ')
  api=$(module_api "$work/$c.out")
  l=$(inclusive "$work/${c}_lua.out" '\?\?\?:evalShaCommand ')
  name=$(echo "$c" | tr a-z A-Z)
  awk -v n="RL.$name" -v m="$m" -v a="$api" -v i="$incr" -v l="$l" \
    'BEGIN {printf "| %s | %d | %d | %.1f | %d | %.1f |\n", n, m, a, m/i, l, l/m}'
done
echo
echo "RL.FIXED by module API function (instructions per RL.FIXED call):"
echo
echo "| function | instructions |"
echo "|---|---:|"
callgrind_annotate --inclusive=yes --threshold=100 "$work/fixed.out" 2>/dev/null | grep -v "=>" \
  | sed -nE 's/^ *([0-9,]+) .*\?\?\?:(RM_[A-Za-z]+) .*/\1 \2/p' \
  | awk -v n="$calls" '{gsub(",","",$1); if ($1/n >= 1) printf "| %s | %.0f |\n", $2, $1/n}'
