#!/usr/bin/env bash
# Instructions per call, counted by valgrind's callgrind: the measure that is stable on
# a noisy machine, where µs move between runs. Each run gets its own redis-server
# under callgrind and the same load: redis-benchmark, 20,000 calls from 2 clients
# pipelined 32 deep over 5,000 identities (keys `{<id>}:<name>`), one fixed NOW, from
# an empty database.
#
# "event loop" is everything the server does for the load: callgrind collects only
# inside aeMain (--toggle-collect=aeMain), its counters are zeroed once the server is
# ready and read at shutdown, so the count covers reading and parsing the requests,
# the command, the replies, expiry and the periodic jobs, not start-up. Each command
# runs twice: on a standalone server and on a one-node cluster that owns every slot
# (--cluster-enabled yes, CLUSTER ADDSLOTSRANGE 0 16383, cluster_state:ok).
#
# "in the command" is what INFO commandstats times: incrCommand for INCR,
# RedisModuleCommandDispatcher for a module command, evalShaCommand for a script.
# "module API" is the part of a module call spent inside RedisModule_* functions,
# that is, in Redis itself; the rest is the module's own code and the dispatch.
# "RM_Call" is the part spent running core commands through RedisModule_Call.
#
# RL_INSTRUCTIONS_CALLS changes the number of calls, RL_INSTRUCTIONS_DIR keeps the
# callgrind files there. Prints Markdown. Needs valgrind, redis-server, redis-cli and redis-benchmark.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
module="${RL_MODULE:-$root/target/release/libredis_rl.so}"
server="${RL_SERVER:-redis-server}"
work="${RL_INSTRUCTIONS_DIR:-$(mktemp -d)}"
mkdir -p "$work"
calls=${RL_INSTRUCTIONS_CALLS:-20000}
now_us=1764480000000000
now_s=$((now_us / 1000000))

for tool in valgrind callgrind_annotate callgrind_control redis-cli redis-benchmark python3; do
  command -v "$tool" >/dev/null || { echo "instructions: $tool is not installed" >&2; exit 2; }
done
[ -f "$module" ] || { echo "instructions: build the module first (make build)" >&2; exit 2; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The server under callgrind, stopped if the script ends early.
server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -n "${RL_INSTRUCTIONS_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "instructions: $*" >&2; exit 1; }

# profile NAME standalone|cluster SCRIPT|- BENCHMARK-ARGS...: runs the load under
# callgrind, leaves $work/NAME.out and the calls made in $work/NAME.calls.
profile() {
  local name=$1 mode=$2 script=$3; shift 3
  # RL_INSTRUCTIONS_REUSE=1 with RL_INSTRUCTIONS_DIR: report on an earlier run.
  [ -n "${RL_INSTRUCTIONS_REUSE:-}" ] && [ -f "$work/$name.calls" ] && return
  local p; p=$(port)
  local dir="$work/$name.d"
  mkdir -p "$dir"
  local extra=()
  if [ "$mode" = cluster ]; then
    extra=(--cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$(port)")
  fi
  valgrind --tool=callgrind --toggle-collect=aeMain --callgrind-out-file="$work/$name.out" \
    "$server" --port "$p" --dir "$dir" --save "" --appendonly no "${extra[@]}" \
    --loadmodule "$module" >"$work/$name.log" 2>&1 &
  local pid=$!
  server_pid=$pid
  local up=
  for _ in $(seq 1 150); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && { up=1; break; }
    sleep 0.2
  done
  [ -n "$up" ] || fail "$name: the server did not start (see $work/$name.log)"
  if [ "$mode" = cluster ]; then
    redis-cli -p "$p" cluster addslotsrange 0 16383 >/dev/null
    local ok=
    for _ in $(seq 1 150); do
      redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' && { ok=1; break; }
      sleep 0.2
    done
    [ -n "$ok" ] || fail "$name: no cluster_state:ok"
  fi
  local args=("$@")
  if [ "$script" != - ]; then
    local sha; sha=$(redis-cli -p "$p" script load "$(cat "$script")")
    args=(EVALSHA "$sha" "${args[@]}")
  fi
  redis-cli -p "$p" config resetstat >/dev/null
  # Start counting now: only the load (and the shutdown) is measured.
  callgrind_control -z "$pid" >/dev/null 2>&1
  redis-benchmark -p "$p" -n "$calls" -c 2 -P 32 -r 5000 -q "${args[@]}" >/dev/null 2>&1
  # Every call must have succeeded, or the count means nothing; pipelining may send
  # a few more than asked, so the counts are divided by the calls made.
  local cmd; cmd=$(echo "${args[0]}" | tr A-Z a-z)
  local stat; stat=$(redis-cli -p "$p" info commandstats | tr -d '\r' | grep "^cmdstat_$cmd:" || true)
  case "$stat" in
    *"rejected_calls=0,failed_calls=0"*) ;;
    *) fail "$name: some calls failed: ${stat:-no cmdstat_$cmd}" ;;
  esac
  local made; made=$(echo "$stat" | sed -nE 's/.*:calls=([0-9]+),.*/\1/p')
  [ "${made:-0}" -ge "$calls" ] || fail "$name: only ${made:-0} calls: $stat"
  echo "$made" >"$work/$name.calls"
  redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
  wait "$pid" 2>/dev/null || true
  server_pid=
}

# made FILE: the calls the run made.
made() { cat "${1%.out}.calls"; }

# total FILE: the event loop's instructions per call.
total() {
  awk -v n="$(made "$1")" '/^(summary|totals):/ {printf "%.0f", $2/n; exit}' "$1"
}

# inclusive FILE FUNCTION-REGEX: the function's inclusive instructions per call (0
# when it never ran).
inclusive() {
  { callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -v "=>" \
    | grep -E "$2" || true; } \
    | awk -v n="$(made "$1")" 'NR == 1 {gsub(",","",$1); x = $1/n} END {printf "%.0f", x}'
}

# module_api FILE: instructions per call inside RedisModule_* functions (they do not
# call one another on these paths, so their inclusive counts add up), leaving out
# RedisModule_Alloc/Free: those are the module's own heap allocations.
module_api() {
  { callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -v "=>" \
    | grep -E "\?\?\?:RM_[A-Za-z]+ " \
    | grep -vE "\?\?\?:RM_(Alloc|Calloc|Realloc|Free|GetApi) " || true; } \
    | awk -v n="$(made "$1")" '{gsub(",","",$1); s+=$1} END {printf "%.0f", s/n}'
}

lua="$root/lua"
# The seed's caller passes both counters and the elapsed ratio (0 at this NOW).
i=$((now_s / 60))
for mode in standalone cluster; do
  profile "incr_$mode" "$mode" - INCR '{__rand_int__}:k'
  profile "fixed_$mode" "$mode" - RL.FIXED '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "slidecount_$mode" "$mode" - RL.SLIDECOUNT '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "slidelog_$mode" "$mode" - RL.SLIDELOG '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "gcra_$mode" "$mode" - RL.GCRA '{__rand_int__}:rl' 100 3600 NOW "$now_us"
done
# The scripts, standalone only: the sliding-window script's two keys get two
# different identities from redis-benchmark, which a cluster refuses (CROSSSLOT).
profile fixed_lua standalone "$lua/fixed_window.lua" 1 '{__rand_int__}:rl' "$now_s" 60 100
profile slidecount_lua standalone "$lua/sliding_window_counter.lua" 2 "{__rand_int__}:rl:$i" \
  "{__rand_int__}:rl:$((i - 1))" 100 0.000000 60
profile slidelog_lua standalone "$lua/sliding_window_log.lua" 1 '{__rand_int__}:rl' "$now_us" 60000000 100 "$now_us:__rand_int__"
profile gcra_lua standalone "$root/benches/gcra.lua" 1 '{__rand_int__}:rl' "$now_us" 36000000 100

echo "Whole event loop (aeMain), instructions per call:"
echo
echo "| command | standalone | one-node cluster | cluster ÷ standalone | standalone ÷ INCR's | cluster ÷ INCR's |"
echo "|---|---:|---:|---:|---:|---:|"
incr_s=$(total "$work/incr_standalone.out")
incr_c=$(total "$work/incr_cluster.out")
for c in incr fixed slidecount slidelog gcra; do
  s=$(total "$work/${c}_standalone.out")
  k=$(total "$work/${c}_cluster.out")
  name=$(echo "$c" | tr a-z A-Z)
  [ "$c" = incr ] || name="RL.$name"
  awk -v n="$name" -v s="$s" -v k="$k" -v is="$incr_s" -v ic="$incr_c" \
    'BEGIN {printf "| %s | %d | %d | %.2f | %.1f | %.1f |\n", n, s, k, k/s, s/is, k/ic}'
done
echo
echo "Inside the command, instructions per call (standalone / cluster):"
echo
echo "| command | in the command | of which module API | of which RM_Call | cluster: in the command | of which module API | of which RM_Call | script's, in evalSha (standalone) | script ÷ this |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -v s="$(inclusive "$work/incr_standalone.out" '\?\?\?:incrCommand ')" \
  -v k="$(inclusive "$work/incr_cluster.out" '\?\?\?:incrCommand ')" \
  'BEGIN {printf "| INCR | %d |  |  | %d |  |  |  |  |\n", s, k}'
for c in fixed slidecount slidelog gcra; do
  row=()
  for mode in standalone cluster; do
    f="$work/${c}_$mode.out"
    row+=("$(inclusive "$f" '\?\?\?:RedisModuleCommandDispatcher ')" "$(module_api "$f")" \
      "$(inclusive "$f" '\?\?\?:RM_Call ')")
  done
  l=$(inclusive "$work/${c}_lua.out" '\?\?\?:evalShaCommand ')
  name=$(echo "$c" | tr a-z A-Z)
  awk -v n="RL.$name" -v m="${row[0]}" -v a="${row[1]}" -v r="${row[2]}" \
    -v cm="${row[3]}" -v ca="${row[4]}" -v cr="${row[5]}" -v l="$l" \
    'BEGIN {printf "| %s | %d | %d | %d | %d | %d | %d | %d | %.1f |\n", n, m, a, r, cm, ca, cr, l, l/m}'
done
echo
echo "RL.FIXED by module API function (instructions per RL.FIXED call, standalone / cluster):"
echo
echo "| function | standalone | cluster |"
echo "|---|---:|---:|"
by_function() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null | grep -v "=>" \
    | sed -nE 's/^ *([0-9,]+) .*\?\?\?:(RM_[A-Za-z]+) .*/\2 \1/p' | tr -d , \
    | awk -v n="$(made "$1")" '{printf "%s %.0f\n", $1, $2/n}' | sort
}
join -a1 -a2 -e0 -o 0,1.2,2.2 <(by_function "$work/fixed_standalone.out") \
  <(by_function "$work/fixed_cluster.out") \
  | awk '$2 >= 1 || $3 >= 1 {printf "| %s | %d | %d |\n", $1, $2, $3}' | sort -t'|' -k3,3nr
