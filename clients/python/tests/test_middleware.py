"""The ASGI and WSGI middlewares, driven in-process without a framework."""

from __future__ import annotations

import asyncio
import io
from typing import Any, Dict, List, Optional, Tuple

import pytest

from conftest import ON_MODULE, SECRET, FakeClock, Server, free_port
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

from test_commands import _expected_pseudonym
from test_failure import Reports

Response = Tuple[int, Dict[str, str], bytes]


async def hello(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


async def asgi_get(app: Any, ip: Optional[str], path: str = "/") -> Response:
    scope = {"type": "http", "method": "GET", "path": path, "headers": [],
             "client": (ip, 50000) if ip else None}
    messages: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)
    start, body = messages[0], messages[1]
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, body["body"]


def pseudonym_calls(server: Server) -> int:
    return server.client().info("commandstats").get("cmdstat_rl.pseudonym", {}).get("calls", 0)


def asked_pseudonyms(rl: Any) -> List[str]:
    """Every IP the middleware asks the limiter to pseudonymise, past its cache (on the
    scripts the kit computes them, so the server cannot count them)."""
    asked: List[str] = []
    real = rl.pseudonym

    def sync(identity: str, *args: Any, **kwargs: Any) -> str:
        asked.append(identity)
        return real(identity, *args, **kwargs)

    async def coroutine(identity: str, *args: Any, **kwargs: Any) -> str:
        asked.append(identity)
        return await real(identity, *args, **kwargs)

    rl.pseudonym = coroutine if asyncio.iscoroutinefunction(real) else sync
    return asked


API = Limit.gcra("api", "rl:mw", 10, 1, burst=2)


def test_asgi_headers_429_and_pseudonym_cache(server: Server, clock: FakeClock) -> None:
    asked: List[List[str]] = []

    async def scenario() -> List[Response]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        asked.append(asked_pseudonyms(rl))
        app = RateLimitMiddleware(hello, rl, [API])
        out = [await asgi_get(app, "203.0.113.7") for _ in range(3)]
        out.append(await asgi_get(app, "203.0.113.8"))
        clock.advance_ms(86_400_000)  # a new UTC day: a new pseudonym, a fresh limiter
        out.append(await asgi_get(app, "203.0.113.7"))
        await client.aclose()
        return out

    before = pseudonym_calls(server)
    (s1, h1, b1), (s2, h2, _), (s3, h3, b3), (s4, h4, _), (s5, h5, _) = asyncio.run(scenario())
    assert (s1, b1, h1["content-type"]) == (200, b"hello", "text/plain")
    assert h1["ratelimit-policy"] == '"api";q=10;w=1'
    assert h1["ratelimit"] == '"api";r=1;t=1'
    assert h2["ratelimit"] == '"api";r=0;t=1'
    assert s3 == 429 and b3 == b'{"error": "rate_limited"}'
    assert (h3["ratelimit"], h3["retry-after"], h3["content-type"]) == ('"api";r=0;t=1', "1", "application/json")
    assert "retry-after" not in h1
    assert (s4, h4["ratelimit"]) == (200, '"api";r=1;t=1')  # another client, its own budget
    assert (s5, h5["ratelimit"]) == (200, '"api";r=1;t=1')
    # One RL.PSEUDONYM per IP and day: 203.0.113.7 twice (two days), .8 once.
    assert asked == [["203.0.113.7", "203.0.113.8", "203.0.113.7"]]
    assert pseudonym_calls(server) - before == (3 if ON_MODULE else 0)
    tagged = f"rl:mw:{{{_expected_pseudonym('203.0.113.7', '2024-06-17')}}}"
    assert server.client().exists(tagged) == 1


def test_asgi_several_limits_use_rl_all(server: Server, clock: FakeClock, needs_all: None) -> None:
    limits = [Limit.gcra("burst", "rl:mw2:b", 10, 1, burst=5), Limit.fixed("hour", "rl:mw2:h", 2, 3600)]

    async def scenario() -> List[Response]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        app = RateLimitMiddleware(hello, rl, limits, legacy_headers=True)
        out = [await asgi_get(app, "198.51.100.1") for _ in range(3)]
        await client.aclose()
        return out

    (s1, h1, _), _, (s3, h3, _) = asyncio.run(scenario())
    # 07:29:09.8 → the hour window resets at 08:00:00, in 1850.2 s.
    assert s1 == 200
    assert h1["ratelimit-policy"] == '"burst";q=10;w=1, "hour";q=2;w=3600'
    assert h1["ratelimit"] == '"burst";r=4;t=1, "hour";r=1;t=1851'
    assert s3 == 429
    assert (h3["retry-after"], h3["x-ratelimit-limit"], h3["x-ratelimit-remaining"]) == ("1851", "2", "0")


def test_asgi_identity_function_and_passthrough(server: Server, clock: FakeClock) -> None:
    async def by_api_key(scope: Dict[str, Any]) -> str:
        return dict(scope["headers"]).get(b"x-api-key", b"anonymous").decode()

    async def scenario() -> Tuple[Response, List[Dict[str, Any]]]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        app = RateLimitMiddleware(hello, rl, [Limit.fixed("k", "rl:mw3", 1, 10)], identify=by_api_key)
        response = await asgi_get(app, "192.0.2.9")
        sent: List[Dict[str, Any]] = []

        async def inner(scope: Any, receive: Any, send: Any) -> None:
            sent.append(scope)

        await RateLimitMiddleware(inner, rl, [API])({"type": "lifespan"}, None, None)
        await client.aclose()
        return response, sent

    (status, _, _), sent = asyncio.run(scenario())
    assert status == 200
    assert server.client().exists("rl:mw3:{anonymous}:1718609340") == 1
    assert sent == [{"type": "lifespan"}]


@pytest.mark.parametrize("policy,status", [(FailurePolicy.OPEN, 200), (FailurePolicy.CLOSED, 503)])
def test_asgi_redis_down(policy: FailurePolicy, status: int) -> None:
    reports = Reports()

    async def scenario() -> Response:
        client = connect_async(f"redis://127.0.0.1:{free_port()}")
        rl = AsyncRateLimiter(client, failure=policy, on_failure=reports)
        return await asgi_get(RateLimitMiddleware(hello, rl, [API]), "192.0.2.1")

    got_status, headers, _ = asyncio.run(scenario())
    assert got_status == status
    assert "ratelimit" not in headers  # nothing known, nothing claimed
    assert [command[0] for _, command in reports.seen] == ["RL.PSEUDONYM"]


def wsgi_app(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def wsgi_get(app: Any, ip: str) -> Response:
    seen: Dict[str, Any] = {}

    def start_response(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> None:
        seen["status"], seen["headers"] = int(status.split()[0]), {k.lower(): v for k, v in headers}

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": ip, "wsgi.input": io.BytesIO()}
    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def test_wsgi(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
    app = WSGIRateLimitMiddleware(wsgi_app, rl, [Limit.gcra("api", "rl:wsgi", 10, 1, burst=2)])
    asked = asked_pseudonyms(rl)
    before = pseudonym_calls(server)
    (s1, h1, b1), _, (s3, h3, b3) = [wsgi_get(app, "203.0.113.50") for _ in range(3)]
    assert (s1, b1, h1["ratelimit"], h1["content-type"]) == (200, b"hello", '"api";r=1;t=1', "text/plain")
    assert (s3, h3["retry-after"], b3) == (429, "1", b'{"error": "rate_limited"}')
    assert asked == ["203.0.113.50"]
    assert pseudonym_calls(server) - before == (1 if ON_MODULE else 0)


def test_wsgi_redis_down_fails_closed() -> None:
    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.CLOSED,
                     on_failure=Reports())
    status, headers, body = wsgi_get(WSGIRateLimitMiddleware(wsgi_app, rl, [API]), "192.0.2.1")
    assert (status, body) == (503, b'{"error": "rate_limiter_unavailable"}')
    assert "retry-after" not in headers


def test_asgi_shadow_mode_passes_reports_and_keeps_the_real_headers(server: Server, clock: FakeClock) -> None:
    seen: List[Tuple[Any, str]] = []

    async def scenario() -> List[Response]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        app = RateLimitMiddleware(hello, rl, [Limit.gcra("api", "rl:shadow-asgi", 10, 1, burst=2)],
                                  shadow=True, on_shadow=lambda d, what: seen.append((d, what)))
        out = [await asgi_get(app, "203.0.113.70") for _ in range(4)]
        assert (app.shadow.denials, dict(app.shadow.by_label)) == (2, {"api": 2})
        await client.aclose()
        return out

    out = asyncio.run(scenario())
    assert [s for s, _, _ in out] == [200] * 4
    assert [b for _, _, b in out] == [b"hello"] * 4
    # The real state: nothing left, and when it comes back.
    assert (out[2][1]["ratelimit"], out[2][1]["retry-after"]) == ('"api";r=0;t=1', "1")
    assert [(d.allowed, what) for d, what in seen] == [(False, "/"), (False, "/")]


def test_asgi_shadow_mode_default_report_and_failures(caplog: pytest.LogCaptureFixture, server: Server,
                                                      clock: FakeClock) -> None:
    import logging

    async def scenario() -> Tuple[int, int]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        app = RateLimitMiddleware(hello, rl, [Limit.fixed("one", "rl:shadow-log", 1, 10)], shadow=True)
        statuses = [(await asgi_get(app, "203.0.113.71"))[0] for _ in range(2)]
        await client.aclose()
        # Shadow mode leaves the failure policy alone: Redis down, fail closed → 503.
        down = AsyncRateLimiter(connect_async(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.CLOSED,
                                on_failure=Reports())
        dead = RateLimitMiddleware(hello, down, [API], shadow=True, identify=_fixed_identity)
        return statuses[1], (await asgi_get(dead, "192.0.2.1"))[0]

    with caplog.at_level(logging.WARNING, logger="redis_rl"):
        second, dead_status = asyncio.run(scenario())
    assert (second, dead_status) == (200, 503)
    assert "shadow mode: would have denied /" in caplog.text


async def _fixed_identity(scope: Dict[str, Any]) -> str:
    return "someone"


def test_wsgi_shadow_mode(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
    app = WSGIRateLimitMiddleware(wsgi_app, rl, [Limit.fixed("one", "rl:shadow-wsgi", 1, 10)], shadow=True,
                                  on_shadow=lambda d, what: None)
    (s1, _, _), (s2, h2, b2) = [wsgi_get(app, "203.0.113.72") for _ in range(2)]
    assert (s1, s2, b2) == (200, 200, b"hello")
    assert h2["ratelimit"] == '"one";r=0;t=1' and "retry-after" in h2
    assert app.shadow.denials == 1
