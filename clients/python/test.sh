#!/usr/bin/env bash
# Runs the Python kit's tests against real Redis servers that the tests start
# themselves: first with the module loaded, then again (RL_BACKEND=scripts) on plain
# servers without it, where the kit runs the module's Lua scripts. Env: RL_MODULE
# (default ../../target/release/libredis_rl.so), RL_SERVER (default redis-server),
# RL_BACKEND (with arguments: which backend those tests run on); extra arguments go to
# pytest.
set -euo pipefail

kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$kit/../.." && pwd)"
venv="$repo/.tools/venv-python"
compat="$repo/.tools/python-compat"

if [[ ! -x "$venv/bin/python" ]]; then
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        echo "python3's venv module is missing: installing python3-venv" >&2
        if [[ $(id -u) -eq 0 ]]; then
            apt-get update -qq && apt-get install -y -qq python3-venv
        elif command -v sudo >/dev/null; then
            sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv
        else
            echo "run: apt-get install python3-venv" >&2
            exit 1
        fi
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
fi

# The adapters' frameworks, pinned: the newest majors in the venv, and limits 4 and
# pyrate-limiter 3 in an overlay that PYTHONPATH puts first. The kit is installed
# editable, so pip runs again only when a requirements file or pyproject.toml changes
# (a stamp says).
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
stamp() { cat "$@" "$kit/pyproject.toml" | sha256sum; }
requirements=("$kit/requirements-adapters.txt" "$kit/requirements-upstream.txt")
if [[ "$(cat "$venv/.rl-installed" 2>/dev/null)" != "$(stamp "${requirements[@]}")" ]]; then
    "${pip[@]}" -r "$kit/requirements-adapters.txt" -r "$kit/requirements-upstream.txt" -e "$kit[test]"
    stamp "${requirements[@]}" > "$venv/.rl-installed"
fi
if [[ "$(cat "$compat/.rl-installed" 2>/dev/null)" != "$(stamp "$kit/requirements-adapters-compat.txt")" ]]; then
    rm -rf "$compat"
    "${pip[@]}" --no-deps --target "$compat" -r "$kit/requirements-adapters-compat.txt"
    stamp "$kit/requirements-adapters-compat.txt" > "$compat/.rl-installed"
fi

cd "$kit"
export RL_MODULE="${RL_MODULE:-$repo/target/release/libredis_rl.so}"
if [[ $# -gt 0 ]]; then
    exec "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
fi
status=0
RL_BACKEND=module "$venv/bin/python" -m pytest -p no:cacheprovider || status=1
echo "== the adapters again on limits 4 and pyrate-limiter 3 (.tools/python-compat)"
RL_BACKEND=module PYTHONPATH="$compat" "$venv/bin/python" -m pytest -p no:cacheprovider tests/test_compat.py \
    tests/test_flask_limiter.py tests/test_slowapi.py tests/test_pyrate.py tests/test_adapters_cluster.py \
    tests/test_counter.py || status=1
# Every test again on servers without the module. Not run twice: the package build
# (test_package, which also runs the installed copy's scripts) and `make run`, which
# do not depend on the backend, and the compat overlay, whose difference is the
# libraries' versions, not the backend.
echo "== again on the scripts backend (servers without the module)"
RL_BACKEND=scripts "$venv/bin/python" -m pytest -p no:cacheprovider \
    --deselect tests/test_package.py --deselect tests/test_make_run.py || status=1
# The libraries' own suites (upstream/run.sh), on the module backend only: they take
# minutes of real windows each, and the kit's tests above already run every adapter
# on the scripts. After the kit's tests (their timing
# assertions do not survive sharing the CPU with them) and in parallel with each other:
# they mostly sleep, waiting out real windows.
# limits, Flask-Limiter and SlowAPI on algorithm=counter, limits' own fixed window,
# whose only differences are the environment's and what the module refuses (no
# clock-dependent lines); pyrate-limiter, whose buckets are sliding logs, on
# algorithm=slidelog. The storage's default (slidecount) and the other algorithms are
# measured, not enforced: their numbers are in docs/frameworks/, and `upstream/run.sh
# <suite> ours <algorithm>` runs them.
suites=(limits-5.8.0 limits-4.8.0 flask-limiter-4.1.1 slowapi-0.1.10 pyrate-limiter-4.4.0)
algorithms=(counter counter counter counter slidelog)
# pyrate-limiter's waits have 20 ms margins, so it runs alone, after the others; so does
# limits 4.8: both limits suites hit a moving window with a cost of a million (about
# 0.8 s of server time on an idle core), which must answer within 2 s, and in parallel
# on two cores their two such calls can meet and come close to that.
logs="$(mktemp -d "${TMPDIR:-/tmp}/rl-upstream-logs.XXXXXX")"
upstream() {  # upstream <index>...: run those suites in parallel, report each
    local i pids=()
    for i in "$@"; do
        PYTHON="$venv/bin/python" "$kit/upstream/run.sh" "${suites[$i]}" ours "${algorithms[$i]}" \
            > "$logs/${suites[$i]}.log" 2>&1 &
        pids+=($!)
    done
    for i in "$@"; do
        if wait "${pids[0]}"; then result=passed; else result=FAILED; status=1; fi
        pids=("${pids[@]:1}")
        echo "== upstream ${suites[$i]} on redis-rl (${algorithms[$i]}): $result ($(grep -E '[0-9]+ (passed|failed|xfailed)' "$logs/${suites[$i]}.log" | tail -1))"
        if [[ "$result" == FAILED ]]; then tail -40 "$logs/${suites[$i]}.log"; fi
    done
}
upstream 0 2 3
upstream 1
upstream 4
rm -rf "$logs"
exit "$status"
