#!/usr/bin/env bash
# The libraries' own test suites against the kit's adapters (clients/php/upstream/<suite>/):
# each tarball from ../shared/upstream is untarred into a scratch directory, run once on
# the library itself (the control) and once (or once per algorithm) through the shim,
# and compared with the suite's expected-differences.txt. Called by ../test.sh.
#   RL_UPSTREAM  where the tarballs are (default: ../../../shared/upstream from here)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tarballs="${RL_UPSTREAM:-$(cd "$here/../../.." && pwd)/../shared/upstream}"
if [[ ! -d "$tarballs" ]]; then
    echo "upstream suites: skipped (no upstream tarballs at $tarballs; set RL_UPSTREAM)"
    exit 0
fi
scratch="$(mktemp -d "${TMPDIR:-/tmp}/redis-rl-php-upstream.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
status=0

# run <suite> <mode> <label> <phpunit args...>
run() {
    local suite=$1 mode=$2 label=$3
    shift 3
    local list="$here/$suite/expected-differences.txt"
    [[ $mode == stock ]] && list=-
    RL_UPSTREAM_MODE=$mode phpunit --configuration "$here/$suite/phpunit.xml" --log-junit "$scratch/$suite-$mode.xml" "$@" \
        > "$scratch/$suite-$mode.log" 2>&1 || true
    if ! php "$here/check.php" "$scratch/$suite-$mode.xml" "$list" "$mode" "$label"; then
        status=1
        sed 's/^/    /' "$scratch/$suite-$mode.log" | tail -40
    fi
}

tar -xzf "$tarballs/symfony-rate-limiter-5.4.35.tar.gz" -C "$scratch"
export RL_UPSTREAM_SRC="$scratch/symfony-rate-limiter-5.4.35"
run symfony stock "Symfony RateLimiter 5.4.35 Tests/, the library itself" "$RL_UPSTREAM_SRC/Tests"
run symfony ours "Symfony RateLimiter 5.4.35 Tests/, redis-rl" "$RL_UPSTREAM_SRC/Tests"

tar -xzf "$tarballs/laravel-8.83.26-throttle.tar.gz" -C "$scratch"
export RL_UPSTREAM_SRC="$scratch/laravel-8.83.26-throttle"
run laravel stock "Laravel 8.83.26 ThrottleRequests tests, Laravel's own middleware" "$RL_UPSTREAM_SRC/tests/Integration/Http"
run laravel sliding_counter "Laravel 8.83.26 ThrottleRequests tests, redis-rl (sliding_counter, the default)" "$RL_UPSTREAM_SRC/tests/Integration/Http"
run laravel fixed "Laravel 8.83.26 ThrottleRequests tests, redis-rl (fixed, Laravel's algorithm)" "$RL_UPSTREAM_SRC/tests/Integration/Http"

exit $status
