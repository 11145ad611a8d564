"""RL.CONCURRENCY through the kit: typed calls, RL.ALL with a lease, and the
middlewares' `concurrency` option, including handlers that raise or hang."""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any, Dict, List

import pytest
import redis

from conftest import FakeClock, Server, rl_command
from redis_rl import (
    AsyncRateLimiter,
    FailurePolicy,
    Limit,
    RateLimiter,
    RateLimitMiddleware,
    WSGIRateLimitMiddleware,
    connect,
    connect_async,
)
from test_middleware import asgi_get, wsgi_get


@pytest.fixture(scope="module")
def needs_concurrency(server: Server) -> None:
    try:
        rl_command(server.client(), "RL.CONCURRENCY", "{probe}:c", 1, 1, "PEEK")
    except redis.ResponseError as exc:
        pytest.skip(f"this build of the module lacks RL.CONCURRENCY ({exc})")


pytestmark = pytest.mark.usefixtures("needs_concurrency")


def test_acquire_release_heartbeat(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    slots = Limit.concurrency("inflight", "rl:{conc}:typed", 2, "10s")
    a, b = rl.acquire(slots, "a"), rl.acquire(slots, "b")
    assert (a.allowed, a.remaining, b.allowed, b.remaining) == (True, 1, True, 0)
    full = rl.acquire(slots, "c")
    assert (full.allowed, full.retry_after_ms, full.reset_after_ms) == (False, 10_000, 10_000)
    again = rl.acquire(slots, "a")  # a retried acquire renews, never takes a second slot
    assert (again.allowed, again.remaining) == (True, 0)
    clock.advance_ms(4_000)
    assert rl.heartbeat(slots, "a").allowed
    assert rl.heartbeat(slots, "nobody").allowed is False
    assert rl.release(slots, "b").allowed  # then as PEEK: a new id would get a slot
    assert rl.heartbeat(slots, "nobody").allowed is False, "a heartbeat never takes a free slot"
    assert rl.acquire(slots, "c").allowed
    clock.advance_ms(10_001)  # a (renewed at +4 s) and c (taken at +4 s) have expired
    assert rl.peek(slots).remaining == 1
    assert rl.acquire(slots, "d").allowed  # which trims the expired ones
    assert server.client().zrange("rl:{conc}:typed", 0, -1) == ["d"]
    with pytest.raises(ValueError):
        rl.check(slots)  # a lease needs an id


def test_rl_all_with_a_lease_is_all_or_nothing(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    rate = Limit.fixed("minute", "rl:{conc-all}:rate", 2, 60)
    slots = Limit.concurrency("inflight", "rl:{conc-all}:slots", 1, "30s")
    first = rl.check_all([rate, slots], lease="r1")
    assert first.allowed and [p.remaining for p in first.parts] == [1, 0]
    full = rl.check_all([rate, slots], lease="r2")  # the slot is taken: no rate spent
    assert not full.allowed and rl.peek(rate).remaining == 0  # (PEEK: what would remain after one more)
    assert rl.release(slots, "r1").allowed
    assert rl.check_all([rate, slots], lease="r3").allowed  # the second unit of the rate
    assert rl.release(slots, "r3").allowed
    denied = rl.check_all([rate, slots], lease="r4")  # the rate is spent: no lease taken
    assert not denied.allowed and [p.allowed for p in denied.parts] == [False, True]
    assert server.client().zcard("rl:{conc-all}:slots") == 0
    with pytest.raises(ValueError):
        rl.check_all([rate, slots])  # spending a CONCURRENCY limit needs lease=


SLOTS = Limit.concurrency("inflight", "rl:mwc", 1, "30s")
RATE = Limit.fixed("minute", "rl:mwc:rate", 100, 60)


class Handlers:
    """An ASGI app whose requests hold until released, or raise, by path."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.gate = asyncio.Event()
        self.leases: List[List[str]] = []

    async def __call__(self, scope: Dict[str, Any], receive: Any, send: Any) -> None:
        self.leases.append(self.server.client().zrange(f"rl:mwc:{{{_ID}}}", 0, -1))
        if scope["path"] == "/raise":
            raise RuntimeError("handler failed")
        if scope["path"] == "/hold":
            await self.gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})


_ID = "client-1"


async def reached(handlers: Handlers, n: int) -> None:
    """Until the nth request is inside the app (bounded, so a broken release fails
    the test instead of hanging it)."""
    for _ in range(2000):
        if len(handlers.leases) >= n:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"request {n} never reached the app")


async def _identity(scope: Dict[str, Any]) -> str:
    return _ID


async def request(app: Any, path: str) -> Any:
    return await asgi_get(app, "192.0.2.1", path)


async def get(app: Any, path: str) -> int:
    return (await request(app, path))[0]


def test_asgi_concurrency_holds_releases_and_survives_raise_and_hang(server: Server, clock: FakeClock) -> None:
    handlers = Handlers(server)

    async def scenario() -> Dict[str, Any]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock)
        app = RateLimitMiddleware(handlers, rl, [RATE], concurrency=SLOTS, identify=_identity)
        out: Dict[str, Any] = {}
        holding = asyncio.create_task(get(app, "/hold"))
        await reached(handlers, 1)
        out["lease_during_handler"] = handlers.leases[0]
        out["while_held"] = await request(app, "/")
        handlers.gate.set()
        out["held"] = await holding
        out["after_release"] = await get(app, "/")
        with pytest.raises(RuntimeError):
            await get(app, "/raise")
        out["after_raise"] = await get(app, "/")
        # A handler that hangs past the ttl: its slot comes back when the lease expires.
        handlers.gate.clear()
        hanging = asyncio.create_task(get(app, "/hold"))
        await reached(handlers, 5)
        out["hanging_blocks"] = await get(app, "/")
        clock.advance_ms(30_001)
        out["after_ttl"] = await get(app, "/")
        hanging.cancel()
        out["rate_spent"] = 100 - (await rl.peek(RATE.with_key(f"rl:mwc:rate:{{{_ID}}}"))).remaining - 1
        await client.aclose()
        return out

    out = asyncio.run(scenario())
    [lease] = out["lease_during_handler"]
    assert re.fullmatch(r"[0-9a-f]{32}", lease), "named by a generated request id"
    status, headers, body = out["while_held"]
    assert (status, body) == (429, b'{"error": "too_many_in_flight"}')
    # The rate's state, and Retry-After from the lease: the oldest expires in 30 s at the latest.
    assert (headers["ratelimit-policy"], headers["retry-after"]) == ('"minute";q=100;w=60', "30")
    assert out["held"] == 200 and out["after_release"] == 200
    assert out["after_raise"] == 200, "a raising handler's lease was released"
    assert out["hanging_blocks"] == 429
    assert out["after_ttl"] == 200, "a hung handler's lease expired"
    # Admitted: hold, after_release, raise, after_raise, hang, after_ttl; the two 429s spent nothing.
    assert out["rate_spent"] == 6


def test_wsgi_concurrency_releases_on_close_and_on_raise(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    key = "rl:wsgic:{w1}"

    def app(environ: Dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/raise":
            raise RuntimeError("handler failed")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([b"hello"])

    mw = WSGIRateLimitMiddleware(app, rl, [], concurrency=Limit.concurrency("inflight", "rl:wsgic", 1, "20s"),
                                 identify=lambda environ: "w1")
    assert wsgi_get(mw, "192.0.2.1")[0] == 200  # wsgi_get joins the body; the iterable is not closed
    assert server.client().zcard(key) == 1, "held until the server closes the response"
    assert wsgi_get(mw, "192.0.2.1")[0] == 429
    clock.advance_ms(20_001)  # ... or until the ttl: never a slot lost for good
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "192.0.2.1", "wsgi.input": io.BytesIO()}
    body = mw(environ, lambda status, headers, exc_info=None: None)
    assert b"".join(body) == b"hello" and server.client().zcard(key) == 1
    body.close()  # what a WSGI server does when the response is sent
    assert server.client().zcard(key) == 0
    with pytest.raises(RuntimeError):
        mw({**environ, "PATH_INFO": "/raise"}, lambda *a: None)
    assert server.client().zcard(key) == 0, "a raising app's lease was released"
