"""Flask-Limiter on redis-rl by its storage URI, driven by Flask's test client."""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

import flask
import pytest
import redis
from flask_limiter import Limiter

import redis_rl.limits_storage  # noqa: F401  (registers redis+rl://)
from adapters import BURST, IN_FLIGHT_LOST, Persistent, Traffic, patch_time, persistent, real_time_burst, stepped_burst, wait_for  # noqa: F401
from conftest import T0, FakeClock, Server, free_port
from test_failure import BOUND_S, Reports, silent  # noqa: F401  (silent is a fixture)



def make_app(uri: str, limit: str, *, strategy: Optional[str] = None, options: Optional[Dict[str, Any]] = None,
             **config: Any) -> Tuple[flask.Flask, Limiter]:
    app = flask.Flask(__name__)
    app.config.update(RATELIMIT_STORAGE_URI=uri, RATELIMIT_HEADERS_ENABLED=True,
                      RATELIMIT_STORAGE_OPTIONS=options or {}, **config)
    if strategy:
        app.config["RATELIMIT_STRATEGY"] = strategy
    limiter = Limiter(lambda: flask.request.headers.get("X-Client", "anon"), app=app)

    @app.route("/")
    @limiter.limit(limit)
    def index() -> str:
        return "ok"

    return app, limiter


def uri(server: Server, query: str = "") -> str:
    return server.url.replace("redis://", "redis+rl://") + (f"?{query}" if query else "")


def statuses(app: flask.Flask, n: int, client_id: str) -> List[Any]:
    c = app.test_client()
    return [c.get("/", headers={"X-Client": client_id}) for _ in range(n)]


# algorithm (URI) x strategy: what runs where, and the headers Flask-Limiter makes from it.
# At T0 = 07:29:09.8, five spent at once: FIXED's 60 s window ends in 50.2 s; the log frees
# a unit 60 s after it was spent; SLIDECOUNT 1 ms into the next window (50.201 s), when the
# previous window's 5 weigh floor(5 * 59.999 / 60) = 4; GCRA after one emission interval.
CASES = [
    ("algorithm=fixed", None, 50.2),
    ("algorithm=slidelog", None, 60.0),
    ("algorithm=gcra", None, 12.0),  # one emission interval: 60 s / 5
    ("", None, 50.201),  # the default: slidecount
    ("", "moving-window", 60.0),
    ("", "sliding-window-counter", 50.201),
]


@pytest.mark.parametrize("query,strategy,retry_s", CASES)
def test_limit_holds_and_headers(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
                                 query: str, strategy: Optional[str], retry_s: float) -> None:
    patch_time(monkeypatch, clock)
    app, limiter = make_app(uri(server, query), "5/minute", strategy=strategy, options={"clock": clock})
    responses = statuses(app, 7, f"holds-{query}-{strategy}")
    assert [r.status_code for r in responses] == [200] * 5 + [429] * 2
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["4", "3", "2", "1", "0", "0", "0"]
    assert {r.headers["X-RateLimit-Limit"] for r in responses} == {"5"}
    # Flask-Limiter's own arithmetic on the module's retry time: Reset = int(reset + 1),
    # Retry-After = int(Reset - now).
    now = T0 / 1e6
    denied = responses[-1]
    assert denied.headers["X-RateLimit-Reset"] == str(int(now + retry_s + 1))
    assert denied.headers["Retry-After"] == str(int(int(now + retry_s + 1) - now))


def test_boundary_burst_stock_vs_ours(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 per second, 8 requests before a window boundary and 8 after: the stock Redis
    storage's fixed window (the default strategy) admits 16; on redis-rl, the same
    app with only the URI changed admits 9 (sliding counter, the default: the
    previous window's weight starts to fade) and 8 with algorithm=slidelog."""
    stock_app, _ = make_app(server.url, f"{BURST}/second")
    stock = stock_app.test_client()
    r = server.client()

    def stock_window_open() -> bool:
        return bool(r.keys("LIMITS:LIMITER/stock-burst/*"))

    stock_admitted = real_time_burst(
        lambda: stock.get("/", headers={"X-Client": "stock-burst"}).status_code == 200, stock_window_open)

    patch_time(monkeypatch, clock)
    ours = {}
    for query in ("", "algorithm=slidelog", "algorithm=fixed"):
        app, _ = make_app(uri(server, query), f"{BURST}/second", options={"clock": clock})
        c = app.test_client()
        ours[query or "default"] = stepped_burst(
            clock, lambda: c.get("/", headers={"X-Client": f"burst-{query}"}).status_code == 200)
    print(f"\nFlask-Limiter boundary burst: stock {stock_admitted}, ours {ours}")
    assert stock_admitted == 16
    assert ours == {"default": 9, "algorithm=slidelog": 8, "algorithm=fixed": 16}


def test_algorithm_counter_is_limits_own_fixed_window(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """algorithm=counter: the stock storage's window, a minute from the first hit on one
    counter key (its end is the key's expiry on the server, so the clock is real time)."""
    clock = FakeClock(int(time.time() * 1e6))
    patch_time(monkeypatch, clock)
    app, _ = make_app(uri(server, "algorithm=counter"), "5/minute", options={"clock": clock})
    responses = statuses(app, 7, "counter-flask")
    assert [r.status_code for r in responses] == [200] * 5 + [429] * 2
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["4", "3", "2", "1", "0", "0", "0"]
    # Flask-Limiter's int(reset + 1) - now on a reset 60 s (plus the server's few ms) away.
    assert responses[-1].headers["Retry-After"] in ("60", "61")
    r = server.client()
    [counter] = r.keys("rl:limits:{LIMITER/counter-flask/*")
    # The two 429s are counted too, as the stock storage's INCRBY counts them.
    assert counter.endswith(":counter:5/1/minute") and r.get(counter) == "7"
    assert 59_000 < r.pttl(counter) <= 60_000


def dead_uri(query: str) -> str:
    return f"redis+rl://127.0.0.1:{free_port()}" + (f"?{query}" if query else "")


@pytest.mark.parametrize("policy,status", [("open", 200), ("closed", 429)])
def test_dead_redis_goes_through_the_failure_policy(policy: str, status: int) -> None:
    reports = Reports()
    app, _ = make_app(dead_uri(f"failure={policy}"), "5/minute", options={"on_failure": reports})
    assert [r.status_code for r in statuses(app, 2, "dead")] == [status] * 2
    assert reports.seen and all(isinstance(e, redis.ConnectionError) for e, _ in reports.seen)


def test_dead_redis_without_a_policy_honours_flask_limiters_switches(caplog: pytest.LogCaptureFixture) -> None:
    swallow, _ = make_app(dead_uri(""), "5/minute", RATELIMIT_SWALLOW_ERRORS=True)
    with caplog.at_level(logging.WARNING):
        assert [r.status_code for r in statuses(swallow, 2, "swallow")] == [200, 200]
    assert "Failed to rate limit. Swallowing error" in caplog.text
    assert "RL.SLIDECOUNT failed, raised to the library" in caplog.text  # and the kit reported it

    fallback, _ = make_app(dead_uri(""), "5/minute", RATELIMIT_IN_MEMORY_FALLBACK_ENABLED=True,
                           RATELIMIT_IN_MEMORY_FALLBACK="1/minute")
    assert [r.status_code for r in statuses(fallback, 2, "fallback")] == [200, 429]

    raising, _ = make_app(dead_uri(""), "5/minute")  # neither: Flask-Limiter raises, Flask answers 500
    assert raising.test_client().get("/").status_code == 500


def test_shadow_mode(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    patch_time(monkeypatch, clock)
    seen: List[Tuple[Any, str]] = []
    app, limiter = make_app(uri(server, "shadow=true&algorithm=fixed"), "3/minute",
                            options={"clock": clock, "on_shadow": lambda d, what: seen.append((d, what))})
    responses = statuses(app, 5, "shadow")
    assert [r.status_code for r in responses] == [200] * 5
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["2", "1", "0", "0", "0"]
    assert responses[-1].headers["Retry-After"] == "51"  # the real state: FIXED's window ends in 50.2 s
    assert limiter.storage.shadow.denials == 2
    assert [d.allowed for d, _ in seen] == [False, False]
    assert "{LIMITER/shadow/" in seen[0][1]


def test_elastic_expiry_is_refused() -> None:
    from redis_rl.limits_storage import ELASTIC_REFUSED, RedisRLStorage

    storage = RedisRLStorage(f"redis+rl://127.0.0.1:{free_port()}")
    with pytest.raises(NotImplementedError) as raised:
        storage.incr("LIMITER/x/5/1/minute", 60, elastic_expiry=True)
    assert str(raised.value) == ELASTIC_REFUSED


def test_restart_under_traffic_loses_nothing(persistent: Persistent, clock: FakeClock,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart (AOF on) in the middle of a stream of requests: the calls during the
    outage go through the failure policy, and exactly `limit` requests are admitted
    over the whole run. No script to reload, so nothing like NOSCRIPT."""
    patch_time(monkeypatch, clock)
    reports = Reports()
    app, _ = make_app(uri_of(persistent, "failure=closed"), "30/minute",
                      options={"clock": clock, "on_failure": reports})
    c = app.test_client()
    with Traffic(lambda: c.get("/", headers={"X-Client": "restart"}).status_code) as traffic:
        wait_for(lambda: traffic.results.count(200) >= 10)
        persistent.restart()
        back = len(traffic.results)
        wait_for(lambda: len(traffic.results) >= back + 40)
    assert traffic.results[-5:] == [429] * 5
    assert traffic.results.count(200) in IN_FLIGHT_LOST
    assert reports.seen, "requests arrived during the outage"
    assert set(traffic.results) == {200, 429}
    assert all(isinstance(e, (redis.ConnectionError, redis.TimeoutError)) for e, _ in reports.seen), reports.seen
    assert not [e for e, _ in reports.seen if "NOSCRIPT" in str(e)]


def uri_of(server: Persistent, query: str) -> str:
    return server.url.replace("redis://", "redis+rl://") + f"?{query}"


def test_multiples_and_several_limits(server: Server, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """`3 per 2 minutes` is read from the key as a 120 s window, and each of a route's
    limits is its own: the tighter one denies, the headers name it."""
    patch_time(monkeypatch, clock)
    app, _ = make_app(uri(server, "algorithm=fixed"), "3 per 2 minutes;10/hour", options={"clock": clock})
    responses = statuses(app, 4, "multiples")
    assert [r.status_code for r in responses] == [200, 200, 200, 429]
    assert [r.headers["X-RateLimit-Remaining"] for r in responses] == ["2", "1", "0", "0"]
    assert responses[-1].headers["X-RateLimit-Limit"] == "3"
    # 07:29:09.8 in 120 s windows: this one ends at 07:30:00, in 50.2 s.
    assert responses[-1].headers["Retry-After"] == "51"


def test_a_silent_redis_costs_the_kits_short_timeout(silent: Any) -> None:
    """A Redis that accepts and never answers: the kit's 0.25 s read timeout, then the
    failure policy (redis-py's defaults would wait far longer)."""
    import time as _time

    reports = Reports()
    app, _ = make_app(silent.url.replace("redis://", "redis+rl://") + "?failure=open", "5/minute",
                      options={"on_failure": reports})
    started = _time.monotonic()
    assert app.test_client().get("/").status_code == 200
    assert _time.monotonic() - started < BOUND_S
    # One timeout: the stats reads behind Flask-Limiter's headers answer from the
    # failure a moment ago instead of waiting out two more.
    assert [type(e) for e, _ in reports.seen] == [redis.TimeoutError]


@pytest.mark.parametrize("strategy", ["fixed-window", "moving-window", "sliding-window-counter"])
def test_limits_strategies_clear_and_reset(server: Server, clock: FakeClock, strategy: str) -> None:
    from limits import parse
    from limits.storage import storage_from_string
    from limits.strategies import STRATEGIES

    storage = storage_from_string(uri(server, f"key_prefix=rl:clear-{strategy}"), clock=clock)
    limiter = STRATEGIES[strategy](storage)
    item = parse("2/minute")
    assert [limiter.hit(item, "who") for _ in range(3)] == [True, True, False]
    assert not limiter.test(item, "who") and limiter.get_window_stats(item, "who").remaining == 0
    limiter.clear(item, "who")
    assert limiter.test(item, "who") and limiter.get_window_stats(item, "who").remaining == 2
    assert limiter.hit(item, "who")
    assert storage.reset() >= 1 and limiter.get_window_stats(item, "who").remaining == 2
    assert storage.check()


def test_meta_limits_count_breaches_on_their_own_limit(server: Server, clock: FakeClock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Flask-Limiter's meta limits count breaches by hitting a separate limit, which
    needs no denied request counted by the storage: they work as they do on the stock one."""
    patch_time(monkeypatch, clock)
    app = flask.Flask(__name__)
    app.config.update(RATELIMIT_STORAGE_URI=uri(server, "algorithm=slidelog"), RATELIMIT_HEADERS_ENABLED=True,
                      RATELIMIT_STORAGE_OPTIONS={"clock": clock})
    limiter = Limiter(lambda: "meta", app=app, meta_limits=["1/hour"])

    @app.route("/")
    @limiter.limit("1/minute")
    def index() -> str:
        return "ok"

    c = app.test_client()
    first = [c.get("/").status_code for _ in range(3)]  # ok, a breach (counted by the meta limit), then the meta limit
    clock.advance_ms(61_000)  # the per-minute limit is free again; the meta limit still holds
    assert first + [c.get("/").status_code] == [200, 429, 429, 429]
    clock.advance_ms(3_600_000)
    assert c.get("/").status_code == 200


def test_flask_limiter_cli_config_and_limits(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """`flask limiter config` renders the storage's client (`storage.storage`, which every
    stock Redis storage has) and its health; `flask limiter limits` reads the state."""
    from flask_limiter.commands import cli

    monkeypatch.setenv("COLUMNS", "400")  # rich would cut the table's cells
    app, limiter = make_app(uri(server), "3/minute")
    with app.test_client() as client:
        client.get("/", headers={"X-Client": "cli"})
    result = app.test_cli_runner().invoke(cli, ["config"])
    assert result.exception is None, result.output
    assert "RedisRLStorage" in result.output and "<redis.client.Redis(" in result.output, result.output
    assert "OK" in result.output
    assert isinstance(limiter.storage.storage, redis.Redis)
    result = app.test_cli_runner().invoke(cli, ["limits", "--key=cli"])
    assert result.exception is None and "3 per 1 minute" in result.output, result.output
