"""The README's examples run as written."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

from conftest import KIT_DIR, SECRET, Server, free_port

EXAMPLES = KIT_DIR / "examples"


def run(script: str, server: Server) -> str:
    env = {**os.environ, "REDIS_URL": server.url, "RL_SECRET": SECRET}
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quickstart(server: Server, needs_all: None) -> None:
    out = run("quickstart.py", server)
    assert "burst #1: allowed=True remaining=1 retry_after=0 reset_after=1" in out
    assert "burst #3: allowed=False remaining=0 retry_after=1" in out
    assert "cost 3 > burst 2: allowed=False remaining=0 retry_after=None" in out
    assert 'RateLimit-Policy: "burst";q=10;w=1, "hourly";q=1000;w=3600' in out


def test_asgi_example(server: Server, needs_all: None) -> None:
    out = run("asgi_app.py", server)
    statuses = [line for line in out.splitlines() if line.strip().isdigit()]
    assert statuses == ["200", "200", "429"]
    assert 'ratelimit-policy: "burst";q=10;w=1, "minute";q=100;w=60' in out
    assert "retry-after: 1" in out


def get(url: str) -> Tuple[int, Dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_wsgi_example_serves_http(server: Server) -> None:
    port = free_port()
    env = {**os.environ, "REDIS_URL": server.url, "PORT": str(port), "RL_SECRET": SECRET}
    process = subprocess.Popen([sys.executable, str(EXAMPLES / "wsgi_app.py")], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 10
        while True:
            try:
                first = get(url)
                break
            except urllib.error.URLError:
                assert time.monotonic() < deadline, "the example server did not start"
                time.sleep(0.05)
        responses: List[Tuple[int, Dict[str, str]]] = [first, get(url), get(url)]
    finally:
        process.kill()
        process.wait(timeout=5)
    assert [status for status, _ in responses] == [200, 200, 429]
    assert responses[0][1]["RateLimit-Policy"] == '"burst";q=2;w=1'
    assert responses[2][1]["Retry-After"] == "1"
    assert responses[2][1]["X-RateLimit-Limit"] == "2"


def test_flask_limiter_example(server: Server) -> None:
    assert run("flask_limiter_app.py", server).splitlines() == [
        "200 remaining 1", "200 remaining 0", "429 remaining 0 retry-after 1"]


def test_slowapi_example(server: Server) -> None:
    assert run("slowapi_app.py", server).splitlines() == [
        "200 remaining 1", "200 remaining 0", "429 remaining 0 retry-after 1"]


def test_fastapi_limiter_example(server: Server) -> None:
    assert run("fastapi_limiter_app.py", server).splitlines() == [
        "200 {'hello': 'world'}", "200 {'hello': 'world'}", "429 {'detail': 'Too Many Requests'}"]


def test_limits_example(server: Server) -> None:
    assert run("limits_app.py", server).splitlines() == ["True 1", "True 0", "False 0"]


def test_pyrate_example(server: Server) -> None:
    assert run("pyrate_app.py", server).splitlines() == ["[True, True, False]"]
