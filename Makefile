# redis-rl: `make run` starts Redis with the module, `make test` runs everything.
# On a fresh Debian machine with only Rust installed, the first run installs what is
# missing (Debian's redis-server, and clang + libclang-dev for the bindings).

SHELL := /bin/bash
CARGO ?= cargo
MODULE := target/release/libredis_rl.so
APT_PACKAGES := redis-server redis-tools clang libclang-dev

.PHONY: all deps build run test unit lint lab clean

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

# Everything: formatting, lints, unit tests, and integration tests against real servers.
test: build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(CARGO) test --release

unit:
	$(CARGO) test --release --lib

# The seed page's boundary-burst lab, printed for a person.
lab: build
	$(CARGO) test --release --test lab -- --nocapture --test-threads=1

clean:
	$(CARGO) clean
