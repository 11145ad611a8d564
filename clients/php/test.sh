#!/usr/bin/env bash
# The PHP kit's suite: PHPUnit against real module-enabled servers (standalone and a
# 3-node cluster) that the tests start on free loopback ports and kill at the end, then
# the libraries' own suites through the adapters (upstream/run.sh).
#   RL_MODULE  the module to load (default: the repo's target/release build)
#   RL_SERVER  the server binary (default: redis-server)
#   RL_BACKEND module or scripts: one run only (default: both, one after the other)
set -euo pipefail
cd "$(dirname "$0")"

# Everything comes from Debian: the PSR interfaces, a PSR-7 implementation, Symfony 5.4
# (rate-limiter, framework and security bundles, ClockMock) and Laravel 8.83 too,
# so no Composer download is needed (PSR-15's two interfaces are shimmed in tests/).
packages=(php-cli php-redis phpunit php-psr-log php-psr-http-message php-psr-http-factory php-nyholm-psr7 redis-tools
    php-symfony-rate-limiter php-symfony-framework-bundle php-symfony-security-bundle php-symfony-yaml php-symfony-phpunit-bridge
    php-laravel-framework php-nrk-predis composer php-zip php-apcu)
[[ -n "${RL_SERVER:-}" ]] || packages+=(redis-server)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -eq 0 ]]; then
        apt=(apt-get)
    elif command -v sudo >/dev/null; then
        apt=(sudo apt-get)
    else
        echo "missing Debian packages; as root run: apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${apt[@]}" install -y "${missing[@]}" || { "${apt[@]}" update && "${apt[@]}" install -y "${missing[@]}"; }
fi

export RL_MODULE="${RL_MODULE:-$(cd ../.. && pwd)/target/release/libredis_rl.so}"
if [[ ! -f "$RL_MODULE" ]]; then
    echo "no module at $RL_MODULE: build it (cargo build --release) or set RL_MODULE" >&2
    exit 1
fi

# Twice: on a server with the module, then (RL_BACKEND=scripts) on a bare redis-server,
# where the kit decides through the scripts. RL_BACKEND set by the caller runs one only.
for backend in ${RL_BACKEND:-module scripts}; do
    echo "== backend: ${backend} =="
    RL_BACKEND=$backend phpunit --configuration phpunit.xml "$@"
    # Symfony RateLimiter's and Laravel's own throttle tests through the adapters (a few
    # seconds); not when PHPUnit was given arguments (one test, a filter).
    if (($# == 0)); then
        RL_BACKEND=$backend upstream/run.sh
    fi
done
