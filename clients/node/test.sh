#!/usr/bin/env bash
# The Node kit's tests: node's built-in runner against real redis-server processes
# (standalone and a 3-node cluster), which the tests start on free loopback ports and
# kill at the end. The suite runs twice: RL_BACKEND=module on servers with the module,
# then RL_BACKEND=scripts on servers without it, where the kit (backend 'auto') decides
# through its Lua scripts.
#   RL_MODULE  the module (default ../../target/release/libredis_rl.so, from this folder)
#   RL_SERVER  the server binary (default redis-server)
#   RL_BACKEND module or scripts: that run only (default: both, one after the other)
set -euo pipefail
cd "$(dirname "$0")"

# npm ci when node_modules is missing or older than the lockfile (npm keeps its own
# copy of the installed tree's lock in node_modules/.package-lock.json).
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

module="${RL_MODULE:-../../target/release/libredis_rl.so}"
if [ ! -f "$module" ]; then
  echo "clients/node: no module at $module: run 'cargo build --release' at the top, or set RL_MODULE" >&2
  exit 1
fi
command -v "${RL_SERVER:-redis-server}" >/dev/null || { echo "clients/node: ${RL_SERVER:-redis-server} not found" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "clients/node: redis-cli not found (redis-tools)" >&2; exit 1; }

# The CommonJS build (dist/cjs/) from the ESM source, as `npm pack` makes it.
node scripts/build-cjs.mjs

# A hung test fails after 60 s instead of holding the run.
status=0
for backend in ${RL_BACKEND:-module scripts}; do
  echo "== backend: ${backend} =="
  RL_BACKEND=$backend node --test --test-reporter=spec --test-timeout=60000 $(ls test/*.test.js | grep -v test/package.test.js) || status=$?
done

# The packed tarball in a fresh app: npm pack and installs take longer than a test.
RL_BACKEND=module node --test --test-reporter=spec --test-timeout=300000 test/package.test.js || status=$?

# The libraries' own suites run on the module backend only: they test the adapters'
# translation, which is the same on both backends (the suite above runs every adapter
# test on both), and a second run would add three minutes.
# The enforced runs use algorithm 'counter', the libraries' own window, so that their
# lists hold only what stays (raw-key reads, the environment); the default algorithm's
# numbers are --measure's (--default for rate-limiter-flexible).
# rate-limiter-flexible's own tests against the adapter (about 90 s).
RL_BACKEND=module node upstream/rate-limiter-flexible/run.mjs || status=1

# express-rate-limit 8 and 7's own tests against RedisRlStore, and @fastify/rate-limit 11
# and 10's against redisRlStore (about 10 s for each express-rate-limit, 35 s for each
# @fastify/rate-limit; the first run installs their test dependencies into
# .tools/upstream-node). RL_UPSTREAM=0 skips them.
if [ "${RL_UPSTREAM:-1}" != 0 ]; then
  RL_BACKEND=module node upstream/run.mjs express-rate-limit-8 express-rate-limit-7 fastify-rate-limit-11 fastify-rate-limit-10 || status=1
  RL_BACKEND=module node upstream/nest.mjs || status=1  # @nestjs/throttler 6's own storage and e2e specs (about 90 s: on counter their waits are real)
else
  echo "clients/node: the express-rate-limit, @fastify/rate-limit and @nestjs/throttler upstream suites skipped (RL_UPSTREAM=0)"
fi
exit $status
