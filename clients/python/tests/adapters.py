"""Shared by the adapters' tests: a server that can be restarted under traffic, a
stepped clock that the libraries read too, and the boundary-burst schedule."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Optional

import pytest
import redis

from conftest import MODULE, ON_MODULE, SECRET, SERVER, START_TIMEOUT, FakeClock, free_port

BURST = 8
# Admitted over a restart test with a budget of 30: all of it, or one less when the
# server ran a call and was killed before its reply left (that spend is kept, the
# client saw an error and failed closed). Without the state surviving it would be 40.
IN_FLIGHT_LOST = (29, 30)


class Persistent:
    """A server (with the module unless RL_BACKEND=scripts) with an fsync-always AOF that restarts (after a
    SIGKILL) on the same port and data, so state survives and only the restart
    itself is an outage."""

    def __init__(self) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rl-kit-aof-")
        self.process: Optional[subprocess.Popen] = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=2)

    def start(self) -> None:
        args = [SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "yes", "--appendfsync", "always", "--dir", self.dir,
                "--logfile", "server.log"] + (["--loadmodule", str(MODULE)] if ON_MODULE else [])
        self.process = subprocess.Popen(args, env={**os.environ, "RL_SECRET": SECRET},
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if self.client().ping():
                    return
            except redis.RedisError:  # refused, or still loading the AOF
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.port} did not start: {self.log()}")
            time.sleep(0.02)

    def log(self) -> str:
        path = Path(self.dir) / "server.log"
        return path.read_text() if path.exists() else ""

    def restart(self, downtime_s: float = 0.3) -> None:
        """Kill (a crash: the AOF, fsynced on every write, has it all), stay down for
        `downtime_s` so that traffic meets the outage, start again."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)
        time.sleep(downtime_s)
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def persistent() -> Any:
    s = Persistent()
    yield s
    s.stop()


class Traffic:
    """Calls `send()` in a loop on a thread until stopped; `results` in order."""

    def __init__(self, send: Callable[[], Any]) -> None:
        self.send = send
        self.results: List[Any] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.results.append(self.send())
            time.sleep(0.002)

    def __enter__(self) -> "Traffic":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)


def wait_for(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def patch_time(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    """The libraries compute their headers from `time.time()`: make it the test's clock."""
    monkeypatch.setattr(time, "time", lambda: clock() / 1e6)


def stepped_burst(clock: FakeClock, send: Callable[[], bool]) -> int:
    """The seed page's boundary burst on a stepped clock, limit 8 per 1 s: one request
    0.9 s before a window boundary, seven at 0.1 s before it, eight 50 ms after it.
    Returns how many were admitted."""
    boundary = (clock.now_us // 1_000_000 + 2) * 1_000_000
    admitted = 0
    clock.now_us = boundary - 900_000
    admitted += send()
    clock.now_us = boundary - 100_000
    for _ in range(BURST - 1):
        admitted += send()
        clock.advance_ms(1)
    clock.now_us = boundary + 50_000
    for _ in range(BURST):
        admitted += send()
        clock.advance_ms(1)
    return admitted


def real_time_burst(send: Callable[[], bool], window_open: Callable[[], bool]) -> int:
    """The same on real time against a stock backend whose window starts at the first
    hit (its boundary is that hit plus 1 s): one request, seven 0.8 s later, then,
    as soon as the stock window has ended (`window_open()` false), eight more."""
    admitted = int(send())
    time.sleep(0.8)
    admitted += sum(bool(send()) for _ in range(BURST - 1))
    wait_for(lambda: not window_open(), timeout=3)
    admitted += sum(bool(send()) for _ in range(BURST))
    return admitted
