#!/usr/bin/env bash
# Runs the Python kit's tests against real module-enabled Redis servers that the
# tests start themselves. Env: RL_MODULE (default ../../target/release/libredis_rl.so),
# RL_SERVER (default redis-server); extra arguments go to pytest.
set -euo pipefail

kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$kit/../.." && pwd)"
venv="$repo/.tools/venv-python"

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

"$venv/bin/pip" install --quiet --disable-pip-version-check -e "$kit[test]"

cd "$kit"
export RL_MODULE="${RL_MODULE:-$repo/target/release/libredis_rl.so}"
exec "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
