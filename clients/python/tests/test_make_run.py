"""`make run` gives RL.PSEUDONYM a secret: the Makefile's own recipe (read with
`make -n`), run into a temp dir, creates the file once (0600) and the server it
starts answers RL.PSEUDONYM with it."""

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


def recipe(secret_file: Path) -> List[List[str]]:
    """The commands `make run` would run after building."""
    out = subprocess.run(
        ["make", "-n", "-s", "run", f"RL_SECRET_FILE={secret_file}", "CARGO=true"],
        cwd=REPO, check=True, capture_output=True, text=True, timeout=60,
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
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RL_SECRET"}
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
        now_us = 1_718_609_349_800_000
        day = datetime.fromtimestamp(now_us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d")
        expected = hmac.new(secret.encode(), f"203.0.113.7|{day}".encode(), hashlib.sha256).hexdigest()[:24]
        assert client.execute_command("RL.PSEUDONYM", "203.0.113.7", "NOW", now_us) == expected
    finally:
        process.kill()
        process.wait(timeout=5)
