"""SlowAPI on redis-rl by its storage URI: a FastAPI app driven by Starlette's TestClient."""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
import redis
from fastapi import FastAPI, Request, Response
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from starlette.testclient import TestClient

import redis_rl.limits_storage  # noqa: F401  (registers redis+rl://)
from adapters import BURST, IN_FLIGHT_LOST, Persistent, Traffic, patch_time, persistent, real_time_burst, stepped_burst, wait_for  # noqa: F401
from conftest import T0, FakeClock, Server, free_port
from test_failure import Reports


def make_app(uri: str, limit: str, *, strategy: Optional[str] = None, headers: bool = True,
             options: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Tuple[TestClient, Limiter]:
    limiter = Limiter(key_func=lambda request: request.headers.get("X-Client", "anon"), storage_uri=uri,
                      headers_enabled=headers, storage_options=options or {},
                      strategy=strategy or "fixed-window", **kwargs)
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/")
    @limiter.limit(limit)
    async def index(request: Request, response: Response) -> Dict[str, bool]:
        return {"ok": True}

    return TestClient(app, raise_server_exceptions=False), limiter


def uri(url: str, query: str = "") -> str:
    return url.replace("redis://", "redis+rl://") + (f"?{query}" if query else "")


def get(client: TestClient, who: str) -> Any:
    return client.get("/", headers={"X-Client": who})


@pytest.mark.parametrize("query,strategy,retry_s", [
    ("algorithm=fixed", None, 50.2),
    ("", None, 50.201),  # the default: slidecount
    ("", "moving-window", 60.0),
])
def test_limit_holds_and_headers(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
                                 query: str, strategy: Optional[str], retry_s: float) -> None:
    patch_time(monkeypatch, clock)
    client, _ = make_app(uri(server.url, query), "5/minute", strategy=strategy, options={"clock": clock})
    responses = [get(client, f"holds-{query}-{strategy}") for _ in range(7)]
    assert [r.status_code for r in responses] == [200] * 5 + [429] * 2
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["4", "3", "2", "1", "0", "0", "0"]
    assert responses[-1].json() == {"error": "Rate limit exceeded: 5 per 1 minute"}
    # SlowAPI's own arithmetic: Reset = 1 + reset time, Retry-After = int(Reset - now).
    now = T0 / 1e6
    assert float(responses[-1].headers["X-RateLimit-Reset"]) == pytest.approx(now + retry_s + 1, abs=1e-3)
    assert responses[-1].headers["Retry-After"] == str(int(now + retry_s + 1 - now))


def test_boundary_burst_stock_vs_ours(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    stock, _ = make_app(server.url, f"{BURST}/second")
    r = server.client()
    stock_admitted = real_time_burst(lambda: get(stock, "stock-burst").status_code == 200,
                                     lambda: bool(r.keys("LIMITS:LIMITER/stock-burst/*")))
    patch_time(monkeypatch, clock)
    ours = {}
    for query in ("", "algorithm=slidelog"):
        client, _ = make_app(uri(server.url, query), f"{BURST}/second", options={"clock": clock})
        ours[query or "default"] = stepped_burst(clock, lambda: get(client, f"burst-{query}").status_code == 200)
    print(f"\nSlowAPI boundary burst: stock {stock_admitted}, ours {ours}")
    assert stock_admitted == 16
    assert ours == {"default": 9, "algorithm=slidelog": 8}


def test_algorithm_counter_is_limits_own_fixed_window(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """algorithm=counter: the stock storage's window, a minute from the first hit on one
    counter key (its end is the key's expiry on the server, so the clock is real time)."""
    clock = FakeClock(int(time.time() * 1e6))
    patch_time(monkeypatch, clock)
    client, _ = make_app(uri(server.url, "algorithm=counter"), "5/minute", options={"clock": clock})
    responses = [get(client, "counter-slowapi") for _ in range(7)]
    assert [r.status_code for r in responses] == [200] * 5 + [429] * 2
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["4", "3", "2", "1", "0", "0", "0"]
    # SlowAPI's int(reset + 1 - now) on a reset 60 s (plus the server's few ms) away.
    assert responses[-1].headers["Retry-After"] == "61"
    r = server.client()
    [counter] = r.keys("rl:limits:{LIMITER/counter-slowapi/*")
    # The two 429s are counted too, as the stock storage's INCRBY counts them.
    assert counter.endswith(":counter:5/1/minute") and r.get(counter) == "7"
    assert 59_000 < r.pttl(counter) <= 60_000


@pytest.mark.parametrize("policy,status", [("open", 200), ("closed", 429)])
def test_dead_redis_goes_through_the_failure_policy(policy: str, status: int) -> None:
    reports = Reports()
    client, _ = make_app(f"redis+rl://127.0.0.1:{free_port()}?failure={policy}", "5/minute",
                         options={"on_failure": reports})
    assert [get(client, "dead").status_code for _ in range(2)] == [status] * 2
    assert reports.seen and all(isinstance(e, redis.ConnectionError) for e, _ in reports.seen)


def test_dead_redis_without_a_policy_honours_slowapis_switches(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    dead = f"redis+rl://127.0.0.1:{port}"
    fallback, _ = make_app(dead, "5/minute", in_memory_fallback=["1/minute"])
    with caplog.at_level(logging.WARNING, logger="redis_rl"):
        assert [get(fallback, "fallback").status_code for _ in range(2)] == [200, 429]
    assert "raised to the library" in caplog.text
    raising, _ = make_app(dead, "5/minute")
    assert get(raising, "raising").status_code == 500
    # SlowAPI 0.1.10's swallow_errors answers 500 on any storage error in a decorated
    # route, with its stock Redis storage too: the wrapper then reads
    # request.state.view_rate_limit, which a raising hit never set. `failure=open`
    # is the way to fail open there.
    for storage in (dead, f"redis://127.0.0.1:{port}"):
        swallow, _ = make_app(storage, "5/minute", swallow_errors=True, headers=False)
        assert get(swallow, "swallow").status_code == 500


def test_shadow_mode(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_time(monkeypatch, clock)
    seen: List[str] = []
    client, limiter = make_app(uri(server.url, "shadow=1&algorithm=fixed"), "3/minute",
                               options={"clock": clock, "on_shadow": lambda d, what: seen.append(what)})
    responses = [get(client, "shadow") for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["2", "1", "0", "0", "0"]
    assert responses[-1].headers["Retry-After"] == "51"
    assert limiter._storage.shadow.denials == 2 and len(seen) == 2


def test_restart_under_traffic_loses_nothing(persistent: Persistent, clock: FakeClock,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    patch_time(monkeypatch, clock)
    reports = Reports()
    client, _ = make_app(uri(persistent.url, "failure=closed"), "30/minute",
                         options={"clock": clock, "on_failure": reports})
    with Traffic(lambda: get(client, "restart").status_code) as traffic:
        wait_for(lambda: traffic.results.count(200) >= 10)
        persistent.restart()
        back = len(traffic.results)
        wait_for(lambda: len(traffic.results) >= back + 40)
    assert traffic.results[-5:] == [429] * 5
    assert traffic.results.count(200) in IN_FLIGHT_LOST
    assert reports.seen, "requests arrived during the outage"
    assert all(isinstance(e, (redis.ConnectionError, redis.TimeoutError)) for e, _ in reports.seen)
