#!/usr/bin/env bash
# Runs a representative part of the integration suite against redis-server running
# under valgrind memcheck, then scans the valgrind logs for memory errors and
# definite leaks whose stack passes through the module (libredis_rl.so: our code, the
# redis-module crate, Rust's std). Reports in redis-server's own frames are counted
# but ignored. Exits 1 if the module has any.
#
# Environment:
#   RL_MEMCHECK_TESTS     test targets (default: smoke bad_input gcra lua_compat acl
#                         oom storm; those that exist)
#   RL_MEMCHECK_DIR       where the logs go (default: target/memcheck)
#   RL_MEMCHECK_SERVER    server binary (default: redis-server on PATH)
#   RL_MEMCHECK_STRICT=1  tests failing under valgrind fail the run too. By default
#                         they are only listed: some assert real-time behaviour (a
#                         key expiring within milliseconds) that a server running
#                         20-50 times slower cannot meet.
#   RL_MEMCHECK_SCAN_ONLY=1  only scan the logs of a previous run
#   RL_STORM_COMMANDS     size of the storm test (default here: 5000 of its 30,000)
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
started=$(date +%s)
out="${RL_MEMCHECK_DIR:-$root/target/memcheck}"

run_tests() {
  if ! command -v valgrind >/dev/null; then
    echo "memcheck: valgrind is not installed (apt-get install valgrind)" >&2
    exit 2
  fi
  local server="${RL_MEMCHECK_SERVER:-$(command -v redis-server || true)}"
  if [ -z "$server" ]; then
    echo "memcheck: no redis-server on PATH (make deps installs it)" >&2
    exit 2
  fi
  local wanted targets=() t
  read -r -a wanted <<<"${RL_MEMCHECK_TESTS:-smoke bad_input gcra lua_compat acl oom storm}"
  for t in "${wanted[@]}"; do
    if [ -f "tests/$t.rs" ]; then targets+=(--test "$t"); else echo "memcheck: no tests/$t.rs, skipped"; fi
  done
  if [ ${#targets[@]} -eq 0 ]; then
    echo "memcheck: none of the test targets exist" >&2
    exit 2
  fi

  cargo build --release || exit 1
  rm -rf "$out"
  mkdir -p "$out"

  # The harness stops a server with SIGKILL, which would kill valgrind before its
  # leak check. So the wrapper runs valgrind as a child, and a watchdog shuts the
  # server down cleanly (SIGTERM: redis exits, valgrind writes its leak report) once
  # the wrapper is gone. --soname-synonyms: Debian's redis-server allocates through
  # libjemalloc.so.2, which valgrind must intercept to see any allocation, the
  # module's (RedisModule_Alloc) included. Startup under valgrind takes about 2 s;
  # the harness waits up to 10 s.
  local wrapper="$out/redis-server-valgrind"
  cat >"$wrapper" <<EOF
#!/usr/bin/env bash
valgrind --error-exitcode=99 --leak-check=full --show-leak-kinds=definite \\
  --errors-for-leak-kinds=definite --soname-synonyms='somalloc=libjemalloc.so*' \\
  --fullpath-after= --num-callers=40 --log-file='$out/vg.%p.log' \\
  '$server' "\$@" &
vg=\$!
( while kill -0 \$\$ 2>/dev/null; do sleep 0.2; done; kill -TERM \$vg 2>/dev/null ) &
wait \$vg
EOF
  chmod +x "$wrapper"

  echo "memcheck: cargo test --release ${targets[*]} with RL_SERVER=$wrapper"
  RL_SERVER="$wrapper" RL_STORM_COMMANDS="${RL_STORM_COMMANDS:-5000}" \
    cargo test --release --no-fail-fast "${targets[@]}" 2>&1 | tee "$out/cargo-test.log"
  tests_rc=${PIPESTATUS[0]}
}

tests_rc=0
[ "${RL_MEMCHECK_SCAN_ONLY:-0}" = 1 ] || run_tests

# Servers still shutting down finish their leak check: wait (bounded) until every log
# has its final summary.
deadline=$(($(date +%s) + 300))
while :; do
  pending=0
  for f in "$out"/vg.*.log; do
    [ -e "$f" ] || continue
    grep -q "ERROR SUMMARY" "$f" || pending=$((pending + 1))
  done
  [ "$pending" -eq 0 ] && break
  if [ "$(date +%s)" -gt "$deadline" ]; then
    echo "memcheck: $pending valgrind logs still incomplete after 300 s" >&2
    break
  fi
  sleep 1
done

logs=("$out"/vg.*.log)
if [ ! -e "${logs[0]}" ]; then
  echo "memcheck: no valgrind logs in $out: no server ran under valgrind" >&2
  exit 1
fi

# A report is a block of lines (up to a `==pid== ` blank line) with stack frames: an
# error, or a definite leak (the only leak kind shown). It concerns the module when a
# frame is in libredis_rl.so or in Rust code.
module_frames="libredis_rl\\.so|redis_rl::|redis_module::|$root/src/|/\\.cargo/registry/|/rustc/"
rm -f "$out/module-reports.txt"
read -r nmodule nredis < <(awk -v module="$module_frames" -v report="$out/module-reports.txt" '
  function flush() {
    if (frames > 0) {
      if (in_module) { nmodule++; print block > report }
      else { nredis++ }
    }
    block = ""; frames = 0; in_module = 0
  }
  FNR == 1 { flush() }
  {
    line = $0
    sub(/^==[0-9]+== ?/, "", line)
    if (line == "") { flush(); next }
    block = block FILENAME ": " line "\n"
    if (line ~ /^ +(at|by) 0x/) { frames++; if (line ~ module) in_module = 1 }
  }
  END { flush(); printf "%d %d\n", nmodule + 0, nredis + 0 }
' "${logs[@]}")
definite=$(grep -h "definitely lost:" "${logs[@]}" |
  awk '{ gsub(",", "", $4); s += $4 } END { print s + 0 }')
summaries=$(grep -l "ERROR SUMMARY" "${logs[@]}" | wc -l)

echo
echo "memcheck: ${#logs[@]} valgrind logs ($summaries complete) in $out, $(($(date +%s) - started)) s"
echo "memcheck: reports in module frames: $nmodule; in redis-server's own frames (ignored): $nredis"
echo "memcheck: definitely lost, all processes together: $definite bytes"
status=0
if [ "$tests_rc" -ne 0 ]; then
  echo "memcheck: tests that failed under valgrind (see $out/cargo-test.log):"
  grep -E "^test .* FAILED$" "$out/cargo-test.log" | sed 's/^/  /'
  [ "${RL_MEMCHECK_STRICT:-0}" = 1 ] && status=1
fi
if [ "$nmodule" -gt 0 ]; then
  echo "memcheck: FAILED: memory errors or definite leaks in module frames:"
  cat "$out/module-reports.txt"
  status=1
else
  echo "memcheck: no invalid access, uninitialised use or definite leak in module frames"
fi
exit "$status"
