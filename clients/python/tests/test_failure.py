"""Every way Redis can fail goes through the failure policy, and is reported."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from typing import Any, Iterator, List, Sequence, Tuple

import pytest
import redis

from conftest import FakeClock, Server, free_port
from redis_rl import (
    CommandError,
    ModuleNotLoaded,
    AsyncRateLimiter,
    FailurePolicy,
    Limit,
    LimiterUnavailable,
    RateLimiter,
    connect,
    connect_async,
    ratelimit_headers,
)

LIMIT = Limit.gcra("api", "rl:{failure}", 10, 1)
# Generous against a loaded 2-core machine, far below redis-py's defaults
# (which would retry three times with backoff).
BOUND_S = 2.0


class Reports:
    def __init__(self) -> None:
        self.seen: List[Tuple[BaseException, Sequence[Any]]] = []

    def __call__(self, error: BaseException, command: Sequence[Any]) -> None:
        self.seen.append((error, command))


class Listener:
    """A TCP listener that accepts, reads, and then either never answers or
    hangs up, so the client sees a timeout or a lost connection."""

    def __init__(self, hang_up: bool) -> None:
        self.hang_up = hang_up
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.stopping = threading.Event()
        self.conns: List[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(1)
            try:
                conn.recv(65536)
            except OSError:
                pass
            if self.hang_up:
                conn.close()
            else:
                self.conns.append(conn)

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=2)
        for conn in self.conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[Listener]:
    listener = Listener(hang_up=False)
    yield listener
    listener.close()


@pytest.fixture
def hang_up() -> Iterator[Listener]:
    listener = Listener(hang_up=True)
    yield listener
    listener.close()


def checked(url: str, policy: FailurePolicy) -> Tuple[Any, Reports, float]:
    reports = Reports()
    rl = RateLimiter(connect(url), failure=policy, on_failure=reports)
    started = time.monotonic()
    decision = rl.check(LIMIT)
    return decision, reports, time.monotonic() - started


@pytest.mark.parametrize("policy", list(FailurePolicy))
def test_dead_port(policy: FailurePolicy) -> None:
    decision, reports, took = checked(f"redis://127.0.0.1:{free_port()}", policy)
    assert decision.allowed is (policy is FailurePolicy.OPEN)
    assert isinstance(decision.error, redis.ConnectionError)
    assert [e for e, _ in reports.seen] == [decision.error]
    assert reports.seen[0][1][0] == "RL.GCRA"
    assert took < BOUND_S
    assert ratelimit_headers(decision) == []


def test_server_that_never_answers(silent: Listener) -> None:
    decision, reports, took = checked(silent.url, FailurePolicy.CLOSED)
    assert not decision.allowed
    assert isinstance(decision.error, redis.TimeoutError)
    assert len(reports.seen) == 1
    assert took < BOUND_S


def test_lost_connection(hang_up: Listener) -> None:
    decision, reports, took = checked(hang_up.url, FailurePolicy.OPEN)
    assert decision.allowed
    assert isinstance(decision.error, redis.ConnectionError)
    assert len(reports.seen) == 1
    assert took < BOUND_S


@pytest.mark.parametrize("policy", list(FailurePolicy))
def test_module_not_loaded(bare_server: Server, policy: FailurePolicy) -> None:
    """Not an outage but a deployment mistake: raised, with the hint, whatever the policy."""
    reports = Reports()
    rl = RateLimiter(connect(bare_server.url), failure=policy, on_failure=reports, backend="module")
    with pytest.raises(ModuleNotLoaded, match=r"RL\.GCRA: unknown command.*module is not loaded.*loadmodule"):
        rl.check(LIMIT)
    assert reports.seen == []


def test_bad_argument(server: Server) -> None:
    reports = Reports()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, on_failure=reports)
    # An argument only the module can judge (RL.SLIDELOG's largest limit): its ERR is raised.
    with pytest.raises(CommandError, match="RL.SLIDELOG refused"):
        rl.check(Limit.slidelog("log", "rl:{bad}", 2_000_000, 10))
    # A clock in milliseconds instead of µs: the module names the unit.
    rl_ms = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, on_failure=reports,
                        clock=lambda: 1_718_609_349_800)
    with pytest.raises(CommandError, match="milliseconds"):
        rl_ms.check(LIMIT)
    assert reports.seen == []  # never the failure policy's


def test_default_report_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.OPEN)
    with caplog.at_level(logging.WARNING, logger="redis_rl"):
        assert rl.check(LIMIT).allowed
    assert "RL.GCRA failed, failing open" in caplog.text
    assert "ConnectionError" in caplog.text


def test_a_raising_reporter_does_not_break_the_policy() -> None:
    def broken(error: BaseException, command: Sequence[Any]) -> None:
        raise RuntimeError("reporter down")

    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.CLOSED, on_failure=broken)
    assert rl.check(LIMIT).allowed is False


def test_pseudonym_failure() -> None:
    reports = Reports()
    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.CLOSED, on_failure=reports)
    with pytest.raises(LimiterUnavailable) as raised:
        rl.pseudonym("192.0.2.1")
    assert raised.value.decision.allowed is False
    assert reports.seen[0][1][0] == "RL.PSEUDONYM"


def test_pipeline_errors_are_per_call(server: Server) -> None:
    reports = Reports()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, on_failure=reports,
                     clock=FakeClock())
    good = Limit.fixed("ok", "rl:{pipe}", 5, 10)
    bad = Limit.slidelog("bad", "rl:{pipe}:log", 2_000_000, 10)
    d_good, d_closed = rl.check_many([good, good.with_key("rl:{pipe}:2")])
    assert (d_good.allowed, d_good.error) == (True, None)
    # A caller's mistake in one call of the pipeline is raised, not decided by the policy.
    with pytest.raises(CommandError):
        rl.check_many([good, bad])
    assert reports.seen == []


def test_failure_policy_is_required() -> None:
    with pytest.raises(TypeError):
        RateLimiter(connect(), failure="open")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RateLimiter(connect())  # type: ignore[call-arg]


def test_asyncio_failures(silent: Listener, bare_server: Server) -> None:
    async def scenario() -> None:
        for url, error in [
            (f"redis://127.0.0.1:{free_port()}", redis.ConnectionError),
            (silent.url, redis.TimeoutError),
        ]:
            reports = Reports()
            client = connect_async(url)
            rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, on_failure=reports)
            started = time.monotonic()
            d = await rl.check(LIMIT)
            assert time.monotonic() - started < BOUND_S
            assert not d.allowed and isinstance(d.error, error), (url, d)
            assert len(reports.seen) == 1
            await client.aclose()
        # The module missing is raised in asyncio too, never the policy's.
        client = connect_async(bare_server.url)
        with pytest.raises(ModuleNotLoaded, match="loadmodule"):
            await AsyncRateLimiter(client, failure=FailurePolicy.OPEN, backend="module").check(LIMIT)
        await client.aclose()

    asyncio.run(scenario())
