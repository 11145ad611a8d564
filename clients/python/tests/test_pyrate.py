"""pyrate-limiter buckets on redis-rl: pyrate's own Limiter (3.9 and 4), and
fastapi-limiter 0.2 on a FastAPI app (it needs pyrate-limiter 4)."""

from __future__ import annotations

import asyncio
import inspect
import re
from typing import Any, Dict, List

import pytest
import redis
from pyrate_limiter import Duration, Limiter, Rate, RateItem
from pyrate_limiter.buckets import RedisBucket

from adapters import BURST, IN_FLIGHT_LOST, Persistent, Traffic, persistent, stepped_burst, wait_for  # noqa: F401
from conftest import ON_MODULE, FakeClock, Server, free_port, limiter_calls
from redis_rl import AsyncRateLimiter, FailurePolicy, RateLimiter, connect, connect_async
from redis_rl.pyrate import RedisRLBucket, RedisRLBucketFactory
from test_failure import Reports

PYRATE_4 = "blocking" in inspect.signature(Limiter.try_acquire_async).parameters
try:
    from fastapi import Depends, FastAPI
    from fastapi_limiter.depends import RateLimiter as LimiterDependency
    from starlette.testclient import TestClient

    FASTAPI_LIMITER = PYRATE_4  # fastapi-limiter 0.2 calls try_acquire_async(blocking=...), pyrate 4's
except ImportError:  # without the adapters installed
    FASTAPI_LIMITER = False
needs_fastapi_limiter = pytest.mark.skipif(not FASTAPI_LIMITER, reason="fastapi-limiter 0.2 needs pyrate-limiter 4")


def make_limiter(argument: Any, **kwargs: Any) -> Limiter:
    """pyrate's Limiter answering False on a full bucket (3.9 raises by default; 4 never does)."""
    if not PYRATE_4:
        kwargs.setdefault("raise_when_fail", False)
    return Limiter(argument, **kwargs)


class PyrateClock:
    """pyrate 3.9's clock interface (unix ms), on the test's stepped clock."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def now(self) -> int:
        return self.clock() // 1000


def stock_limiter(server: Server, key: str, rates: List[Rate], clock: FakeClock) -> Limiter:
    """pyrate's own RedisBucket (its Lua script, loaded once), stepped by `clock`."""
    bucket = RedisBucket.init(rates, redis.Redis(port=server.port), key)
    if PYRATE_4:
        bucket.now = lambda: clock() // 1000  # pyrate 4 stamps items with the bucket's clock
        return make_limiter(bucket)
    return make_limiter(bucket, clock=PyrateClock(clock))


def acquire(limiter: Limiter, name: str, weight: int = 1) -> bool:
    kwargs: Dict[str, Any] = {"blocking": False} if PYRATE_4 else {}
    return bool(limiter.try_acquire(name, weight, **kwargs))


def test_put_is_one_rl_all_over_the_rates(server: Server, clock: FakeClock) -> None:
    kit = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    bucket = RedisRLBucket([Rate(5, Duration.MINUTE), Rate(3, Duration.SECOND)], kit, "rl:pyrate:{rl-all}",
                           algorithm="slidelog")
    limiter = make_limiter(bucket)
    server.client().config_resetstat()
    assert [acquire(limiter, "x") for _ in range(4)] == [True, True, True, False]
    assert (bucket.failing_rate.limit, bucket.failing_rate.interval) == (3, 1000)
    assert bucket.waiting(None) == 1000  # the module's retry time
    clock.advance_ms(1000)
    assert [acquire(limiter, "x") for _ in range(3)] == [True, True, False]
    assert (bucket.failing_rate.limit, bucket.failing_rate.interval) == (5, 60000)
    assert bucket.waiting(None) == 59000
    assert bucket.count() == 5
    # All or nothing: the denials spent nothing under the per-second rate either.
    assert kit.peek(bucket._limits[0]).remaining == 0 and kit.peek(bucket._limits[1]).remaining == 0
    assert acquire(limiter, "x", weight=6) is False and bucket.waiting(None) == -1  # above every budget
    # One RL.ALL per put, and the two PEEKs (the server cannot tell the scripts apart).
    assert limiter_calls(server.client()) == ({"rl.all": 8, "rl.slidelog": 2} if ON_MODULE else {"script": 10})
    bucket.flush()
    assert acquire(limiter, "x")
    assert bucket.count() == 1  # flush emptied the item log too


def test_item_log_count_peek_leak(server: Server, clock: FakeClock) -> None:
    """count(), peek() and leak() as pyrate's RedisBucket answers them: from the log
    of admitted units, which outlives the windows until leaked."""
    kit = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    bucket = RedisRLBucket([Rate(3, Duration.SECOND)], kit, "rl:pyrate:{log}", algorithm="slidelog")
    assert bucket.peek(0) is None and bucket.count() == 0
    t0 = bucket.now()
    assert bucket.put(RateItem("first", t0)) and bucket.put(RateItem("second", t0, weight=2))
    assert bucket.put(RateItem("denied", t0)) is False
    assert bucket.count() == 3  # units, as pyrate counts them; the denied item is not logged
    assert bucket.peek(0).name == "second" and bucket.peek(2).name == "first" and bucket.peek(3) is None
    assert bucket.peek(2).timestamp == t0
    clock.advance_ms(1000)
    assert bucket.put(RateItem("later", bucket.now()))
    assert bucket.count() == 4  # more than the limit: the log keeps what was admitted until leaked
    assert bucket.leak(bucket.now()) == 3 and bucket.count() == 1
    assert bucket.put(RateItem("weightless", bucket.now(), weight=0)) and bucket.count() == 1
    with pytest.raises(ValueError, match="non-negative integer"):
        bucket.put(RateItem("bad", bucket.now(), weight=-1))


def test_without_item_log_one_call_per_put(server: Server, clock: FakeClock) -> None:
    kit = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    bucket = RedisRLBucket([Rate(3, Duration.SECOND)], kit, "rl:pyrate:{nolog}", item_log=False)
    server.client().config_resetstat()
    assert bucket.put(RateItem("x", bucket.now(), weight=2))
    assert bucket.count() == 2 and bucket.peek(0) is None and bucket.leak(bucket.now()) == 0
    assert not server.client().exists("rl:pyrate:{nolog}:items")
    assert limiter_calls(server.client()) == ({"rl.all": 2} if ON_MODULE else {"script": 2})


def test_boundary_burst_stock_vs_ours(server: Server, clock: FakeClock) -> None:
    """pyrate's own Redis bucket is a sliding log already: no boundary burst there.
    The same schedule: stock 8, ours 9 (slidecount, the default) and 8 (slidelog)."""
    rates = [Rate(BURST, Duration.SECOND)]
    stock = stock_limiter(server, "pyrate:stock-burst", rates, clock)
    results = {"stock": stepped_burst(clock, lambda: acquire(stock, "x"))}
    for algorithm in ("slidecount", "slidelog"):
        kit = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
        ours = make_limiter(RedisRLBucketFactory(rates, kit, prefix=f"rl:burst-{algorithm}", algorithm=algorithm))
        results[algorithm] = stepped_burst(clock, lambda: acquire(ours, "x"))
    print(f"\npyrate-limiter boundary burst: {results}")
    assert results == {"stock": 8, "slidecount": 9, "slidelog": 8}


@pytest.mark.parametrize("policy", list(FailurePolicy))
def test_dead_redis_goes_through_the_failure_policy(policy: FailurePolicy) -> None:
    reports = Reports()
    kit = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=policy, on_failure=reports)
    bucket = RedisRLBucket([Rate(5, Duration.MINUTE)], kit, "rl:{dead}")
    item = RedisRLBucketFactory([Rate(5, Duration.MINUTE)], kit).wrap_item("x")
    assert bucket.put(item) is (policy is FailurePolicy.OPEN)
    assert bucket.waiting(item) == (0 if policy is FailurePolicy.OPEN else -1)
    assert len(reports.seen) == 1 and isinstance(reports.seen[0][0], redis.ConnectionError)


def test_shadow_mode(server: Server, clock: FakeClock) -> None:
    seen: List[str] = []
    kit = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    from redis_rl.shadow import Shadow

    factory = RedisRLBucketFactory([Rate(2, Duration.MINUTE)], kit, prefix="rl:shadow",
                                   shadow=Shadow(True, lambda d, what: seen.append(what)))
    limiter = make_limiter(factory)
    assert [acquire(limiter, "x") for _ in range(4)] == [True] * 4
    assert factory.shadow.denials == 2 and seen == ["rl:shadow:{x}"] * 2
    assert kit.peek(factory.get(factory.wrap_item("x"))._limits[0]).allowed is False  # the real state


def test_restart_under_traffic_stock_noscript_ours_nothing_lost(persistent: Persistent, clock: FakeClock) -> None:
    """pyrate's own bucket loads its script once: after a restart every put fails with
    NOSCRIPT. Ours has no script: the outage goes through the failure policy, and
    exactly `limit` puts are admitted over the whole run."""
    stock = stock_limiter(persistent, "pyrate:stock-restart", [Rate(30, Duration.MINUTE)], clock)  # type: ignore[arg-type]
    assert acquire(stock, "x")
    reports = Reports()
    kit = RateLimiter(connect(persistent.url), failure=FailurePolicy.CLOSED, on_failure=reports, clock=clock)
    # item_log=False: count() is then the module's own state, which is what must survive
    # (the item log is written after the verdict, so a restart between the two loses it).
    factory = RedisRLBucketFactory([Rate(30, Duration.MINUTE)], kit, prefix="rl:restart", item_log=False)
    ours = make_limiter(factory)
    with Traffic(lambda: acquire(ours, "x")) as traffic:
        wait_for(lambda: traffic.results.count(True) >= 10)
        persistent.restart()
        back = len(traffic.results)
        wait_for(lambda: len(traffic.results) >= back + 40)
    assert traffic.results.count(True) in IN_FLIGHT_LOST and traffic.results[-5:] == [False] * 5
    assert factory.get(factory.wrap_item("x")).count() == 30  # what the server holds: all of it
    assert reports.seen and all(isinstance(e, (redis.ConnectionError, redis.TimeoutError)) for e, _ in reports.seen)
    with pytest.raises(redis.exceptions.NoScriptError):
        acquire(stock, "x")


@needs_fastapi_limiter
class TestFastAPILimiter:
    @staticmethod
    def app(limiter: Limiter) -> TestClient:
        app = FastAPI()

        @app.get("/", dependencies=[Depends(LimiterDependency(limiter=limiter))])
        async def index() -> Dict[str, bool]:
            return {"ok": True}

        # Entered (`with`): one event loop for all requests, as the asyncio client needs.
        return TestClient(app, raise_server_exceptions=False)

    def test_limit_holds_and_the_429(self, server: Server, clock: FakeClock) -> None:
        kit = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=clock)
        with self.app(make_limiter(RedisRLBucketFactory([Rate(5, Duration.MINUTE)], kit, prefix="rl:fastapi"))) as client:
            responses = [client.get("/") for _ in range(7)]
        assert [r.status_code for r in responses] == [200] * 5 + [429] * 2
        assert responses[-1].json() == {"detail": "Too Many Requests"}
        # fastapi-limiter's name (client, path, route and dependency index) is the hash tag.
        [key] = [k for k in server.client().keys("rl:fastapi:*") if not k.endswith(":items")]
        assert re.fullmatch(r"rl:fastapi:\{testclient:/:\d+:0\}:5/60000ms:\d+", key), key

    def test_boundary_burst_stock_vs_ours(self, server: Server, clock: FakeClock) -> None:
        rates = [Rate(BURST, Duration.SECOND)]
        with self.app(stock_limiter(server, "fastapi:stock-burst", rates, clock)) as stock:
            results = {"stock": stepped_burst(clock, lambda: stock.get("/").status_code == 200)}
        for algorithm in ("slidecount", "slidelog"):
            kit = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=clock)
            limiter = make_limiter(RedisRLBucketFactory(rates, kit, prefix=f"rl:fa-{algorithm}", algorithm=algorithm))
            with self.app(limiter) as client:
                results[algorithm] = stepped_burst(clock, lambda: client.get("/").status_code == 200)
        print(f"\nfastapi-limiter boundary burst: {results}")
        assert results == {"stock": 8, "slidecount": 9, "slidelog": 8}

    @pytest.mark.parametrize("policy,status", [(FailurePolicy.OPEN, 200), (FailurePolicy.CLOSED, 429)])
    def test_dead_redis(self, policy: FailurePolicy, status: int) -> None:
        reports = Reports()
        kit = AsyncRateLimiter(connect_async(f"redis://127.0.0.1:{free_port()}"), failure=policy, on_failure=reports)
        with self.app(make_limiter(RedisRLBucketFactory([Rate(5, Duration.MINUTE)], kit))) as client:
            assert [client.get("/").status_code for _ in range(2)] == [status] * 2
        assert len(reports.seen) == 2

    def test_restart_under_traffic(self, persistent: Persistent, clock: FakeClock) -> None:
        reports = Reports()
        kit = AsyncRateLimiter(connect_async(persistent.url), failure=FailurePolicy.CLOSED, on_failure=reports,
                               clock=clock)
        factory = RedisRLBucketFactory([Rate(30, Duration.MINUTE)], kit, prefix="rl:fa-restart")
        with self.app(make_limiter(factory)) as client, Traffic(lambda: client.get("/").status_code) as traffic:
            wait_for(lambda: traffic.results.count(200) >= 10)
            persistent.restart()
            back = len(traffic.results)
            wait_for(lambda: len(traffic.results) >= back + 40)
        assert traffic.results.count(200) in IN_FLIGHT_LOST and set(traffic.results) == {200, 429}
        assert reports.seen

    def test_shadow(self, server: Server, clock: FakeClock) -> None:
        kit = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=clock)
        factory = RedisRLBucketFactory([Rate(2, Duration.MINUTE)], kit, prefix="rl:fa-shadow", shadow=True)
        with self.app(make_limiter(factory)) as client:
            assert [client.get("/").status_code for _ in range(4)] == [200] * 4
        assert factory.shadow.denials == 2


def test_async_bucket_in_pyrates_limiter(server: Server, clock: FakeClock) -> None:
    async def scenario() -> List[bool]:
        kit = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=clock)
        limiter = make_limiter(RedisRLBucketFactory([Rate(2, Duration.MINUTE)], kit, prefix="rl:async"))
        kwargs: Dict[str, Any] = {"blocking": False} if PYRATE_4 else {}
        out = [await limiter.try_acquire_async("x", **kwargs) for _ in range(3)]
        await kit.client.aclose()
        return out

    assert asyncio.run(scenario()) == [True, True, False]


