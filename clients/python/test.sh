#!/usr/bin/env bash
# Runs the Python kit's tests against real module-enabled Redis servers that the
# tests start themselves. Env: RL_MODULE (default ../../target/release/libredis_rl.so),
# RL_SERVER (default redis-server); extra arguments go to pytest.
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
if [[ "$(cat "$venv/.rl-installed" 2>/dev/null)" != "$(stamp "$kit/requirements-adapters.txt")" ]]; then
    "${pip[@]}" -r "$kit/requirements-adapters.txt" -e "$kit[test]"
    stamp "$kit/requirements-adapters.txt" > "$venv/.rl-installed"
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
"$venv/bin/python" -m pytest -p no:cacheprovider
echo "== the adapters again on limits 4 and pyrate-limiter 3 (.tools/python-compat)"
PYTHONPATH="$compat" "$venv/bin/python" -m pytest -p no:cacheprovider tests/test_compat.py \
    tests/test_flask_limiter.py tests/test_slowapi.py tests/test_pyrate.py tests/test_adapters_cluster.py
