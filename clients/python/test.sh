#!/usr/bin/env bash
# Runs the Python kit's tests against real module-enabled Redis servers that the
# tests start themselves. Env: RL_MODULE (default ../../target/release/libredis_rl.so),
# RL_SERVER (default redis-server); extra arguments go to pytest.
set -euo pipefail

kit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$kit/../.." && pwd)"
venv="$repo/.tools/venv-python"
compat="$repo/.tools/venv-python-compat"

if [[ ! -x "$venv/bin/python" || ! -x "$compat/bin/python" ]]; then
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
    [[ -x "$venv/bin/python" ]] || { rm -rf "$venv"; python3 -m venv "$venv"; }
    [[ -x "$compat/bin/python" ]] || { rm -rf "$compat"; python3 -m venv "$compat"; }
fi

# The adapters' frameworks, pinned: the newest majors in the main venv, limits 4 and
# pyrate-limiter 3 in the compat one. The kit is installed editable, so pip runs again
# only when the requirements or pyproject.toml change (a stamp in the venv says).
install() {
    local env="$1" requirements="$2" want
    want="$(cat "$requirements" "$kit/pyproject.toml" | sha256sum)"
    if [[ "$(cat "$env/.rl-installed" 2>/dev/null)" != "$want" ]]; then
        "$env/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" -e "$kit[test]"
        echo "$want" > "$env/.rl-installed"
    fi
}
install "$venv" "$kit/requirements-adapters.txt"
install "$compat" "$kit/requirements-adapters-compat.txt"

cd "$kit"
export RL_MODULE="${RL_MODULE:-$repo/target/release/libredis_rl.so}"
if [[ $# -gt 0 ]]; then
    exec "$venv/bin/python" -m pytest -p no:cacheprovider "$@"
fi
"$venv/bin/python" -m pytest -p no:cacheprovider
echo "== the adapters again on limits 4 and pyrate-limiter 3 (.tools/venv-python-compat)"
"$compat/bin/python" -m pytest -p no:cacheprovider tests/test_flask_limiter.py tests/test_slowapi.py \
    tests/test_pyrate.py tests/test_adapters_cluster.py
