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
# the command, the replies and expiry, not start-up, nor serverCron (see total). Each command
# runs twice: on a standalone server and on a one-node cluster that owns every slot
# (--cluster-enabled yes, CLUSTER ADDSLOTSRANGE 0 16383, cluster_state:ok).
#
# "in the command" is what INFO commandstats times: incrCommand for INCR,
# RedisModuleCommandDispatcher for a module command, evalShaCommand for a script.
# "module API" is the part of a module call spent inside RedisModule_* functions,
# that is, in Redis itself; the rest is the module's own code and the dispatch.
# "RM_Call" is the part spent running core commands through RedisModule_Call.
#
# "floor" is benches/floor/floor.c, built here with gcc against redismodule.h: each
# limiter's effects (derived key name, ACL check, key read and in-place write, TTL,
# replication, keyspace events, reply) with the module API and nothing else, storing
# raw strings, or integers through RM_Call as redis-rl's default does. Every
# limiter runs admitted (limit 100 over 5,000 identities) and denied (limit 1, or
# BURST 1: every identity spent once before counting), as
# redis-rl, as the floor and as its Lua script; and CL.THROTTLE (redis-cell, when
# ../shared/anchors/redis-cell/libredis_cell.so or RL_CELL is there) against RL.GCRA.
#
# Section "top": what RL.TOP's summary costs, RL.FIXED and RL.GCRA denied and
# admitted, with rl.top-size 0 against the default 1024 (the default-size runs are
# the floor section's own, so with it this adds 5 runs), and admitted while the
# summary holds the keys (every identity denied once before);
# RL_INSTRUCTIONS_BEFORE=<module .so> adds a column for a build without RL.TOP.
#
# RL_INSTRUCTIONS_CALLS changes the number of calls, RL_INSTRUCTIONS_DIR keeps the
# callgrind files there, RL_INSTRUCTIONS_SECTIONS picks "floor", "filter", "scripts",
# "cluster" and/or "top" (all by default), RL_INSTRUCTIONS_RAW=0 skips the rl.integer-values no runs. Prints Markdown. Needs valgrind, gcc, redis-server, redis-cli and
# redis-benchmark.
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
sections=" ${RL_INSTRUCTIONS_SECTIONS:-floor filter scripts cluster top} "

# The floor module, built against the module API header: the redis-module crate's
# (cargo fetched it for the build), else the one in a server source tarball.
floor="$root/target/floor/floor.so"
build_floor() {
  local header
  header=$(ls "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/redis-module-*/src/include/redismodule.h \
    2>/dev/null | tail -1 || true)
  if [ -z "$header" ]; then
    local tarball; tarball=$(ls "$root"/../shared/servers/redis-*.tar.gz 2>/dev/null | tail -1 || true)
    [ -n "$tarball" ] || { echo "instructions: no redismodule.h for the floor module" >&2; exit 2; }
    mkdir -p "$work/include"
    tar -xzf "$tarball" -C "$work/include" --wildcards --strip-components=2 '*/src/redismodule.h'
    header="$work/include/redismodule.h"
  fi
  command -v gcc >/dev/null || { echo "instructions: gcc is not installed" >&2; exit 2; }
  mkdir -p "$(dirname "$floor")"
  gcc -O2 -Wall -fPIC -shared -std=gnu99 -I"$(dirname "$header")" \
    "$root/benches/floor/floor.c" -o "$floor"
}
# ../shared next to the checkout, or next to the main checkout of a git worktree.
cell="${RL_CELL:-$root/../shared/anchors/redis-cell/libredis_cell.so}"
if [ ! -f "$cell" ] && [ -z "${RL_CELL:-}" ]; then
  common=$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
  cell="${common%/.git}/../shared/anchors/redis-cell/libredis_cell.so"
fi
[ -f "$cell" ] || cell=
case "$sections" in *" floor "*|*" filter "*) build_floor ;; esac

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The server under callgrind, stopped if the script ends early.
server_pid=
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  [ -n "${RL_INSTRUCTIONS_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

fail() { echo "instructions: $*" >&2; exit 1; }

# warm_calls BENCHMARK-ARGS...: the call once for each identity redis-benchmark's
# `-r 5000` draws (`__rand_int__` as 12 digits, 0 to 4999), in the protocol.
warm_calls() {
  python3 - "$@" <<'PY'
import sys
out = sys.stdout.buffer
for i in range(5000):
    words = [a.replace('__rand_int__', '%012d' % i).encode() for a in sys.argv[1:]]
    out.write(b'*%d\r\n' % len(words) + b''.join(b'$%d\r\n%s\r\n' % (len(w), w) for w in words))
PY
}

# profile NAME standalone|cluster SCRIPT|- BENCHMARK-ARGS...: runs the load under
# callgrind, leaves $work/NAME.out and the calls made in $work/NAME.calls.
declare -A profiled
profile() {
  local name=$1 mode=$2 script=$3; shift 3
  # A run both sections report on is made once.
  [ -n "${profiled[$name]:-}" ] && return
  profiled[$name]=1
  # RL_INSTRUCTIONS_REUSE=1 with RL_INSTRUCTIONS_DIR: report on an earlier run.
  [ -n "${RL_INSTRUCTIONS_REUSE:-}" ] && [ -f "$work/$name.calls" ] && return
  local p; p=$(port)
  local dir="$work/$name.d"
  mkdir -p "$dir"
  local extra=()
  if [ "$mode" = cluster ]; then
    extra=(--cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$(port)")
  fi
  # The floor module is loaded by every server of the floor and filter sections, so
  # that all of them run with the same modules; redis-cell only where it is measured.
  local modules=(--loadmodule "$module")
  # FLOOR_INT=1: the floor stores integers, as redis-rl's default does.
  # FLOOR_FILTER=1: the command filter an ACL cache would need (section "filter").
  case "$sections" in
    *" floor "*|*" filter "*) modules+=(--loadmodule "$floor")
      [ "${FLOOR_INT:-}" = 1 ] && modules+=(integer-values)
      [ "${FLOOR_FILTER:-}" = 1 ] && modules+=(acl-filter) ;;
  esac
  # MODULE=<.so>: another build of the module in its place.
  [ -n "${MODULE:-}" ] && modules[1]=$MODULE
  # RAW=1: the module's counters and TATs as raw strings (rl.integer-values no).
  [ "${RAW:-}" = 1 ] && modules+=(--rl.integer-values no)
  # TOPSIZE=<n>: RL.TOP's summary size (rl.top-size).
  [ -n "${TOPSIZE:-}" ] && modules+=(--rl.top-size "$TOPSIZE")
  [ "${CELL:-}" = 1 ] && modules+=(--loadmodule "$cell")
  valgrind --tool=callgrind --toggle-collect=aeMain --callgrind-out-file="$work/$name.out" \
    "$server" --port "$p" --dir "$dir" --save "" --appendonly no "${extra[@]}" \
    "${modules[@]}" >"$work/$name.log" 2>&1 &
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
  # WARM=1: the same call once per identity before counting (a denied path: every
  # identity spent). Not redis-benchmark's random draw: 4,000 draws over 5,000
  # identities leave 45% of them fresh, and their first counted call is admitted.
  if [ "${WARM:-}" = 1 ]; then
    local piped; piped=$(warm_calls "${args[@]}" | redis-cli -p "$p" --pipe 2>&1)
    [[ "$piped" == *"errors: 0, replies: 5000"* ]] || fail "$name: warming up: $piped"
  fi
  # PREDENY="<args>": that load once before counting (RL.TOP's summary filled).
  if [ -n "${PREDENY:-}" ]; then
    # shellcheck disable=SC2086
    redis-benchmark -p "$p" -n "$calls" -c 2 -P 32 -r 5000 -q $PREDENY >/dev/null 2>&1
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

# total FILE: the event loop's instructions per call, without serverCron: it runs 10
# times a second whatever the load, so its share of a call depends on how fast the
# server ran under valgrind on a busy machine (300 to 1,800 instructions per call
# here between two runs of the same load).
total() {
  local cron; cron=$(callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null \
    | grep -v "=>" | grep -E "\?\?\?:serverCron " | awk '{gsub(",","",$1); print $1; exit}')
  awk -v n="$(made "$1")" -v cron="${cron:-0}" \
    '/^(summary|totals):/ {printf "%.0f", ($2 - cron)/n; exit}' "$1"
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

# Each limiter's Lua script, standalone: the sliding-window script's two keys get two
# different identities from redis-benchmark, which a cluster refuses (CROSSSLOT).
# lua_profile NAME LIMIT: the script of limiter NAME at LIMIT (GCRA: as BURST).
lua_profile() {
  local run=$1 limit=$2
  case $run in
    fixed*) profile "$run" standalone "$lua/fixed_window.lua" 1 '{__rand_int__}:rl' "$now_s" 60 "$limit" ;;
    slidecount*) profile "$run" standalone "$lua/sliding_window_counter.lua" 2 "{__rand_int__}:rl:$i" \
      "{__rand_int__}:rl:$((i - 1))" "$limit" 0.000000 60 ;;
    slidelog*) profile "$run" standalone "$lua/sliding_window_log.lua" 1 '{__rand_int__}:rl' "$now_us" 60000000 "$limit" "$now_us:__rand_int__" ;;
    gcra*) profile "$run" standalone "$root/benches/gcra.lua" 1 '{__rand_int__}:rl' "$now_us" $((3600000000 / limit)) "$limit" ;;
  esac
}

if [[ "$sections" == *" floor "* ]]; then
  profile incr_standalone standalone - INCR '{__rand_int__}:k'
  for c in fixed slidecount slidelog gcra; do
    C=$(echo "$c" | tr a-z A-Z)
    window=60
    [ "$c" = gcra ] && window=3600
    deny=(1 "$window")
    # GCRA: one per hour, so a TAT outlives the slowest run (100 per hour would
    # expire after 36 s of wall clock, and an expired identity is admitted again).
    [ "$c" = gcra ] && deny=(1 3600)
    profile "${c}_standalone" standalone - "RL.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
    WARM=1 profile "${c}_denied" standalone - "RL.$C" '{__rand_int__}:rl' "${deny[@]}" NOW "$now_us"
    # RL_INSTRUCTIONS_RAW=0: a build without rl.integer-values (before issue 19).
    if [ "$c" != slidelog ] && [ "${RL_INSTRUCTIONS_RAW:-1}" = 1 ]; then
      RAW=1 profile "${c}_raw" standalone - "RL.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
      RAW=1 WARM=1 profile "${c}_raw_denied" standalone - "RL.$C" '{__rand_int__}:rl' "${deny[@]}" NOW "$now_us"
    fi
    profile "${c}_floor" standalone - "FLOOR.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
    WARM=1 profile "${c}_floor_denied" standalone - "FLOOR.$C" '{__rand_int__}:rl' "${deny[@]}" NOW "$now_us"
    if [ "$c" != slidelog ]; then
      FLOOR_INT=1 profile "${c}_floor_int" standalone - "FLOOR.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
      FLOOR_INT=1 WARM=1 profile "${c}_floor_int_denied" standalone - "FLOOR.$C" '{__rand_int__}:rl' "${deny[@]}" NOW "$now_us"
    fi
    lua_profile "${c}_lua" 100
    WARM=1 lua_profile "${c}_lua_denied" 1
  done
  if [ -n "$cell" ]; then
    # max_burst 99: a burst of 100, as RL.GCRA's default; 0 1 3600: one per hour.
    CELL=1 profile cell_standalone standalone - CL.THROTTLE '{__rand_int__}:rl' 99 100 3600
    CELL=1 WARM=1 profile cell_denied standalone - CL.THROTTLE '{__rand_int__}:rl' 0 1 3600
  fi

  echo "Against the floor: whole event loop (aeMain), instructions per call, standalone."
  echo "Admitted: limit 100, 5,000 identities; denied: limit 1 (RL.GCRA: 1 per hour), every"
  echo "identity spent before counting."
  echo
  echo "redis-rl stores counters and TATs as integers (rl.integer-values yes, the default),"
  echo "which only Redis's own INCRBY and SET can make (RM_Call), or as raw strings (no),"
  echo "which the key API writes in place. Each is set against the floor that stores"
  echo "values the same way; SLIDELOG has no such values."
  echo
  echo "| path | redis-rl | floor, integer values | ÷ floor | integer-values no | floor, raw | ÷ floor | redis-rl ÷ INCR | Lua script | Lua ÷ redis-rl |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  incr_s=$(total "$work/incr_standalone.out")
  echo "| INCR | $incr_s |  |  |  |  |  | 1 |  |  |"
  for c in fixed slidecount gcra slidelog; do
    C=$(echo "$c" | tr a-z A-Z)
    for path in admitted denied; do
      run=${c}_standalone raw_run=${c}_raw floor_run=${c}_floor int_run=${c}_floor_int lua_run=${c}_lua
      if [ "$path" = denied ]; then
        run=${c}_denied raw_run=${c}_raw_denied floor_run=${c}_floor_denied
        int_run=${c}_floor_int_denied lua_run=${c}_lua_denied
      fi
      # SLIDELOG stores no integer: its one floor is the floor of both modes.
      [ -f "$work/$int_run.calls" ] || int_run=$floor_run
      raw=0
      [ -f "$work/$raw_run.calls" ] && raw=$(total "$work/$raw_run.out")
      awk -v n="RL.$C $path" -v r="$(total "$work/$run.out")" -v i="$incr_s" -v w="$raw" \
        -v f="$(total "$work/$floor_run.out")" -v fi="$(total "$work/$int_run.out")" \
        -v l="$(total "$work/$lua_run.out")" \
        'BEGIN {
          raw = w > 0 ? sprintf("%d | %d | **%.2f**", w, f, w/f) : "same |  | "
          printf "| %s | %d | %d | **%.2f** | %s | %.2f | %d | %.2f |\n", n, r, fi, r/fi, raw, r/i, l, l/r
        }'
    done
  done
  if [ -n "$cell" ]; then
    echo
    echo "| path | CL.THROTTLE (redis-cell) | RL.GCRA | CL.THROTTLE ÷ RL.GCRA |"
    echo "|---|---:|---:|---:|"
    for path in admitted denied; do
      cl=cell_standalone rl=gcra_standalone
      [ "$path" = denied ] && cl=cell_denied rl=gcra_denied
      awk -v n="$path" -v c="$(total "$work/$cl.out")" -v r="$(total "$work/$rl.out")" \
        'BEGIN {printf "| %s | %d | %d | %.2f |\n", n, c, r, c/r}'
    done
  fi
  echo
fi

if [[ "$sections" == *" filter "* ]]; then
  # What caching the derived keys' ACL check would cost every other command: the
  # cache needs to see every ACL, AUTH, HELLO and RESET, and only a command filter
  # sees them all (transactions, scripts and RM_Call included).
  profile incr_plain standalone - INCR '{__rand_int__}:k'
  FLOOR_FILTER=1 profile incr_filtered standalone - INCR '{__rand_int__}:k'
  echo "A command filter that only reads each command's name, on every command:"
  echo
  echo "| command | without | with the filter | difference |"
  echo "|---|---:|---:|---:|"
  awk -v a="$(total "$work/incr_plain.out")" -v b="$(total "$work/incr_filtered.out")" \
    'BEGIN {printf "| INCR | %d | %d | +%d (+%.1f %%) |\n", a, b, b - a, 100 * (b - a) / a}'
  echo
fi

if [[ "$sections" == *" top "* ]]; then
  before="${RL_INSTRUCTIONS_BEFORE:-}"
  for c in fixed gcra; do
    C=$(echo "$c" | tr a-z A-Z)
    window=60
    [ "$c" = gcra ] && window=3600
    TOPSIZE=0 WARM=1 profile "${c}_top0_denied" standalone - "RL.$C" '{__rand_int__}:rl' 1 "$window" NOW "$now_us"
    WARM=1 profile "${c}_denied" standalone - "RL.$C" '{__rand_int__}:rl' 1 "$window" NOW "$now_us"
    TOPSIZE=0 profile "${c}_top0_admitted" standalone - "RL.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
    profile "${c}_standalone" standalone - "RL.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
    if [ -n "$before" ]; then
      MODULE=$before WARM=1 profile "${c}_before_denied" standalone - "RL.$C" '{__rand_int__}:rl' 1 "$window" NOW "$now_us"
      MODULE=$before profile "${c}_before_admitted" standalone - "RL.$C" '{__rand_int__}:rl' 100 "$window" NOW "$now_us"
    fi
  done
  # The admitted keys in the summary: each identity denied once (COST 2 of a limit of 1,
  # which writes nothing) into a summary big enough for all 5,000.
  TOPSIZE=8192 PREDENY="RL.FIXED {__rand_int__}:rl 1 60 COST 2 NOW $now_us" \
    profile fixed_top_tracked_admitted standalone - RL.FIXED '{__rand_int__}:rl' 100 60 NOW "$now_us"
  echo "RL.TOP's summary: instructions per call inside the command (RedisModuleCommandDispatcher)"
  echo "and the whole event loop, 5,000 identities, standalone. Denied: every identity spent"
  echo "before counting; admitted: limit 100."
  echo
  echo "| path | without RL.TOP | rl.top-size 0 | rl.top-size 1024 | difference (in the command) | event loop, 0 | event loop, 1024 |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  cmd_of() { inclusive "$work/$1.out" '\?\?\?:RedisModuleCommandDispatcher '; }
  for c in fixed gcra; do
    C=$(echo "$c" | tr a-z A-Z)
    for path in denied admitted; do
      b=""
      [ -n "$before" ] && b=$(cmd_of "${c}_before_$path")
      # The default-size runs, named as in the floor section.
      t=${c}_denied
      [ "$path" = admitted ] && t=${c}_standalone
      awk -v n="RL.$C $path" -v b="$b" -v z="$(cmd_of "${c}_top0_$path")" -v t="$(cmd_of "$t")" \
        -v tz="$(total "$work/${c}_top0_$path.out")" -v tt="$(total "$work/$t.out")" \
        'BEGIN {printf "| %s | %s | %d | %d | %+d | %d | %d |\n", n, b, z, t, t - z, tz, tt}'
    done
  done
  awk -v z="$(cmd_of fixed_top0_admitted)" -v t="$(cmd_of fixed_top_tracked_admitted)" \
    -v tt="$(total "$work/fixed_top_tracked_admitted.out")" \
    'BEGIN {printf "| RL.FIXED admitted, key in the summary (size 8192) |  | %d | %d | %+d |  | %d |\n", z, t, t - z, tt}'
  echo
fi

if [[ "$sections" == *" scripts "* ]]; then
  # The scripts (scripts/*.lua) that the kits run where the module cannot be loaded,
  # beside the module on the same calls. EVALSHA with no KEYS: redis-benchmark gives
  # each __rand_int__ of a command its own number, so KEYS could not repeat the key.
  scripts_dir="$root/scripts"
  k='{__rand_int__}:rl'
  scripts_row() { # NAME ADMITTED-ARGS -- DENIED-ARGS (the key(s) included)
    local c=$1; shift
    local C; C=$(echo "$c" | tr a-z A-Z)
    local admitted=() denied=()
    while [ "$1" != -- ]; do admitted+=("$1"); shift; done
    shift
    denied=("$@")
    profile "sc_${c}_module" standalone - "RL.$C" "${admitted[@]}" NOW "$now_us"
    WARM=1 profile "sc_${c}_module_denied" standalone - "RL.$C" "${denied[@]}" NOW "$now_us"
    profile "sc_${c}_script" standalone "$scripts_dir/$c.lua" 0 "${admitted[@]}" NOW "$now_us"
    WARM=1 profile "sc_${c}_script_denied" standalone "$scripts_dir/$c.lua" 0 "${denied[@]}" NOW "$now_us"
  }
  scripts_row fixed "$k" 100 60 -- "$k" 1 60
  scripts_row counter "$k" 100 60 -- "$k" 1 60
  scripts_row slidecount "$k" 100 60 -- "$k" 1 60
  scripts_row slidewindow "$k" 100 60 -- "$k" 1 60
  scripts_row slidelog "$k" 100 60 -- "$k" 1 60
  scripts_row gcra "$k" 100 3600 -- "$k" 1 3600
  scripts_row tokenbucket "$k" 100 60 -- "$k" 1 60
  scripts_row concurrency "$k" 100 3600 ACQUIRE '__rand_int__' -- "$k" 1 3600 ACQUIRE '__rand_int__'
  scripts_row throttle "$k" 99 100 3600 -- "$k" 0 1 3600
  # Two limits, per minute and per hour (redis-benchmark draws each key on its own).
  scripts_row all 2 FIXED "$k:m" 100 60 GCRA "$k:h" 100 3600 -- 2 FIXED "$k:m" 1 60 GCRA "$k:h" 1 3600
  echo "Module or scripts: whole event loop (aeMain), instructions per call, standalone."
  echo "Admitted: limit 100 over 5,000 identities; denied: limit 1, every identity spent"
  echo "before counting (RL.CONCURRENCY: a new lease id per call). RL.ALL: RL.FIXED per"
  echo "minute and RL.GCRA per hour."
  echo
  echo "| command | path | module | script (EVALSHA) | script ÷ module |"
  echo "|---|---|---:|---:|---:|"
  for c in fixed counter slidecount slidewindow slidelog gcra tokenbucket concurrency throttle all; do
    for path in admitted denied; do
      suffix=; [ "$path" = denied ] && suffix=_denied
      awk -v n="RL.$(echo "$c" | tr a-z A-Z)" -v p="$path" \
        -v m="$(total "$work/sc_${c}_module$suffix.out")" -v s="$(total "$work/sc_${c}_script$suffix.out")" \
        'BEGIN {printf "| %s | %s | %d | %d | %.1f |\n", n, p, m, s, s/m}'
    done
  done
  echo
fi

[[ "$sections" == *" cluster "* ]] || exit 0
for mode in standalone cluster; do
  profile "incr_$mode" "$mode" - INCR '{__rand_int__}:k'
  profile "fixed_$mode" "$mode" - RL.FIXED '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "counter_$mode" "$mode" - RL.COUNTER '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "slidecount_$mode" "$mode" - RL.SLIDECOUNT '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "slidelog_$mode" "$mode" - RL.SLIDELOG '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "gcra_$mode" "$mode" - RL.GCRA '{__rand_int__}:rl' 100 3600 NOW "$now_us"
  profile "slidewindow_$mode" "$mode" - RL.SLIDEWINDOW '{__rand_int__}:rl' 100 60 NOW "$now_us"
  profile "tokenbucket_$mode" "$mode" - RL.TOKENBUCKET '{__rand_int__}:rl' 100 60 NOW "$now_us"
done
for c in fixed slidecount slidelog gcra; do lua_profile "${c}_lua" 100; done

echo "Whole event loop (aeMain), instructions per call:"
echo
echo "| command | standalone | one-node cluster | cluster ÷ standalone | standalone ÷ INCR's | cluster ÷ INCR's |"
echo "|---|---:|---:|---:|---:|---:|"
incr_s=$(total "$work/incr_standalone.out")
incr_c=$(total "$work/incr_cluster.out")
for c in incr fixed counter slidecount slidewindow slidelog gcra tokenbucket; do
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
