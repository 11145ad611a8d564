#!/usr/bin/env bash
# Runs a test command (cargo test …) with its output shown as it comes, then lists the
# tests that reported themselves skipped (a `SKIPPED: <test>: <why>` line, see
# tests/common/mod.rs): cargo test counts them as passed, this says they did not run.
#   tools/skips.sh cargo test --release --tests
# SKIPS_LOG=<file> keeps the output there. Exits with the command's status.
set -uo pipefail
log=${SKIPS_LOG:-$(mktemp)}
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
skips=$(grep -o 'SKIPPED: .*' "$log" | sort -u)
if [[ -n $skips ]]; then
  echo "== $(wc -l <<<"$skips") test(s) SKIPPED (cargo test counts them as passed; they did not run):"
  sed 's/^SKIPPED: /   /' <<<"$skips"
else
  echo "== no test skipped"
fi
[[ -n ${SKIPS_LOG:-} ]] || rm -f "$log"
exit "$status"
