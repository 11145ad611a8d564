"""`make run` gives RL.PSEUDONYM a secret: the Makefile's own recipe (read with
`make -n`), run into a temp dir, creates the file once (0600) and the server it
starts answers RL.PSEUDONYM with it; with `RL_SECRET=… make run`, the server answers
with that secret instead."""

from __future__ import annotations

import hashlib
import hmac
import os
import shlex
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import List

import pytest
import redis

from conftest import KIT_DIR, MODULE, START_TIMEOUT, free_port

REPO = (KIT_DIR / "../..").resolve()


def recipe(secret_file: Path, rl_secret: str | None = None) -> List[List[str]]:
    """The commands `make run` would run after building (RL_SECRET in make's environment
    when given, as `RL_SECRET=… make run` sets it)."""
    env = {k: v for k, v in os.environ.items() if k != "RL_SECRET"}
    if rl_secret is not None:
        env["RL_SECRET"] = rl_secret
    out = subprocess.run(
        ["make", "-n", "-s", "run", f"RL_SECRET_FILE={secret_file}", "CARGO=true"],
        cwd=REPO, env=env, check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    wanted = ("tools/local-secret.sh ", "redis-server ")
    return [shlex.split(line) for line in out.splitlines() if line.startswith(wanted)]


def test_make_run_creates_a_secret_once_and_rl_pseudonym_works(tmp_path: Path) -> None:
    if not MODULE.is_file() or MODULE != (REPO / "target/release/libredis_rl.so").resolve():
        pytest.skip("redis.conf loads ./target/release/libredis_rl.so; RL_MODULE points elsewhere")
    secret_file = tmp_path / "tools" / "rl-secret"
    commands = recipe(secret_file)
    assert [c[0] for c in commands] == ["tools/local-secret.sh", "redis-server"]
    make_secret, server = commands

    first = subprocess.run(make_secret, cwd=REPO, check=True, capture_output=True, text=True)
    assert "created a local secret" in first.stderr and str(secret_file) in first.stderr
    assert secret_file.stat().st_mode & 0o777 == 0o600
    secret = secret_file.read_text()
    assert len(secret) == 64 and int(secret, 16) >= 0
    again = subprocess.run(make_secret, cwd=REPO, check=True, capture_output=True, text=True)
    assert "created" not in again.stderr and secret_file.read_text() == secret, "an existing secret is kept"

    assert server[:2] == ["redis-server", "redis.conf"]
    assert server[2:] == ["--rl.secret-file", str(secret_file)]
    env = {k: v for k, v in os.environ.items() if k != "RL_SECRET"}
    assert pseudonym_from(server, env, tmp_path) == expected_pseudonym(secret)


def test_rl_secret_make_run_uses_that_secret(tmp_path: Path) -> None:
    if not MODULE.is_file() or MODULE != (REPO / "target/release/libredis_rl.so").resolve():
        pytest.skip("redis.conf loads ./target/release/libredis_rl.so; RL_MODULE points elsewhere")
    secret = "a secret from the environment"
    commands = recipe(tmp_path / "rl-secret", rl_secret=secret)
    server = next(c for c in commands if c[0] == "redis-server")
    assert server == ["redis-server", "redis.conf"], "no secret file when RL_SECRET is set"
    # make passes its environment to the server it starts.
    env = {**os.environ, "RL_SECRET": secret}
    assert pseudonym_from(server, env, tmp_path) == expected_pseudonym(secret)


NOW_US = 1_718_609_349_800_000


def expected_pseudonym(secret: str) -> str:
    day = datetime.fromtimestamp(NOW_US / 1e6, tz=timezone.utc).strftime("%Y-%m-%d")
    return hmac.new(secret.encode(), f"203.0.113.7|{day}".encode(), hashlib.sha256).hexdigest()[:24]


def pseudonym_from(server: List[str], env: dict, tmp_path: Path) -> str:
    """Starts `server` (make run's command) on a free port and asks it for RL.PSEUDONYM."""
    port = free_port()
    process = subprocess.Popen(
        [*server, "--port", str(port), "--logfile", str(tmp_path / "server.log")],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port, decode_responses=True, socket_timeout=2)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        return client.execute_command("RL.PSEUDONYM", "203.0.113.7", "NOW", NOW_US)
    finally:
        process.kill()
        process.wait(timeout=5)
