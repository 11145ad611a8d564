#!/usr/bin/env bash
# Runs one library's own upstream test suite, unmodified, against a module-enabled
# redis-server: untars /work/shared/upstream/<tarball> into a scratch dir, loads our
# pytest shims (rl_shim.py + <suite>/shim.py), and runs the suite's tests.
#   run.sh <suite> [ours|stock] [algorithm]
# <suite>: limits-5.8.0, limits-4.8.0, flask-limiter-4.1.1, slowapi-0.1.10, pyrate-limiter-4.4.0.
# For `ours` with the default algorithm, <suite dir>/expected-differences.txt is
# enforced (listed tests are strict xfails); with another algorithm,
# expected-differences-<algorithm>.txt if present.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
suite="$1"; target="${2:-ours}"; algorithm="${3:-slidecount}"
python="${PYTHON:-$repo/.tools/venv-python/bin/python}"
upstream="${RL_UPSTREAM_DIR:-$repo/../shared/upstream}"
tarball="$upstream/$suite.tar.gz"
if [[ ! -f "$tarball" ]]; then
    echo "skipped: $tarball not found (set RL_UPSTREAM_DIR to the upstream tarballs)" >&2
    exit 0
fi
case "$suite" in
    limits-*) shimdir=limits ;;
    flask-limiter-*) shimdir=flask-limiter ;;
    slowapi-*) shimdir=slowapi ;;
    pyrate-limiter-*) shimdir=pyrate-limiter ;;
    *) echo "unknown suite $suite" >&2; exit 2 ;;
esac
scratch="$(mktemp -d "${TMPDIR:-/tmp}/rl-upstream-$suite.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
tar -xzf "$tarball" -C "$scratch"
root="$scratch/$suite"
# hatch-vcs writes the version file at build time; a source tarball has none.
version="${suite##*-}"
for package in limits flask_limiter; do
    if [[ -d "$root/$package" && ! -f "$root/$package/_version.py" ]]; then
        printf '__version__ = version = "%s"\n' "$version" > "$root/$package/_version.py"
    fi
done


# The list: <shim dir>/expected-differences[-<version>][-<algorithm>].txt (limits has
# one per version); a run on another algorithm without a list of its own is measured,
# not enforced. The stock store is the control: nothing is enforced on it.
name="expected-differences"
[[ "$shimdir" == limits ]] && name="$name-$version"
[[ "$algorithm" != slidecount ]] && name="$name-$algorithm"
expected="$here/$shimdir/$name.txt"
[[ "$target" == stock ]] && expected=""

# Per suite: which test files, and pytest options replacing the suite's addopts
# (coverage and docker plugins we do not install).
case "$suite" in
    limits-*) tests=(tests/test_storage.py tests/test_strategy.py tests/aio/test_storage.py tests/aio/test_strategy.py) ;;
    flask-limiter-*) tests=(tests) ;;
    slowapi-*) tests=(tests) ;;
    pyrate-limiter-*) tests=(tests/test_bucket_all.py tests/test_bucket_factory.py tests/test_limiter.py tests/test_multi_bucket.py) ;;
esac

# The suites' own retry plugins, each for its suite: limits marks tests @flaky
# (flaky's max_runs), pyrate-limiter sets `retries` (pytest-retry); both claim the
# `flaky` mark, so the other one is switched off.
case "$suite" in
    pyrate-limiter-*) plugins=(-p no:flaky) ;;
    *) plugins=(-p no:pytest-retry) ;;
esac

cd "$root"
echo "== $suite: $target${algorithm:+ ($algorithm)}"
RL_UPSTREAM_TARGET="$target" RL_UPSTREAM_ALGORITHM="$algorithm" RL_UPSTREAM_EXPECTED="$expected" \
RL_MODULE="${RL_MODULE:-$repo/target/release/libredis_rl.so}" \
PYTHONPATH="$root:$here:$here/$shimdir${PYTHONPATH:+:$PYTHONPATH}" \
    "$python" -m pytest -p no:cacheprovider "${plugins[@]}" -p rl_shim -p shim -o addopts="" -o asyncio_default_fixture_loop_scope=function -q -rfEX --tb=line \
    ${RL_UPSTREAM_PYTEST_ARGS:-} "${tests[@]}"
