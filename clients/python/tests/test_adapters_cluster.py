"""The adapters in a real 3-node cluster: zero MOVED, counted by the servers."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List

import flask
import pytest
from flask_limiter import Limiter as FlaskLimiter
from limits import parse
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.storage import storage_from_string
from pyrate_limiter import Duration, Rate

import redis_rl.limits_storage  # noqa: F401
from adapters import patch_time
from conftest import Cluster, FakeClock, rl_command
from redis_rl import FailurePolicy, RateLimiter, connect
from redis_rl.pyrate import RedisRLBucketFactory
from test_cluster import TAGS, reset_stats, server_counts
from test_pyrate import acquire, make_limiter


def totals(cluster: Cluster) -> List[Dict[str, int]]:
    return [{k: c[k] for k in ("moved", "ask", "getkeys")} for c in server_counts(cluster)]


def test_flask_limiter_on_the_cluster(cluster: Cluster, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    # A stepped clock: on the real one a minute boundary between a client's third and
    # fourth request lets the fourth through (the sliding counter's boundary weighting).
    patch_time(monkeypatch, clock)
    app = flask.Flask(__name__)
    app.config.update(RATELIMIT_STORAGE_URI=cluster.url.replace("redis://", "redis+rl+cluster://") + "?failure=closed",
                      RATELIMIT_HEADERS_ENABLED=True, RATELIMIT_STORAGE_OPTIONS={"clock": clock})
    limiter = FlaskLimiter(lambda: flask.request.headers["X-Client"], app=app)

    @app.route("/")
    @limiter.limit("3/minute;10/hour")
    def index() -> str:
        return "ok"

    reset_stats(cluster)
    c = app.test_client()
    codes = [c.get("/", headers={"X-Client": tag}).status_code for tag in TAGS for _ in range(4)]
    assert codes == [200, 200, 200, 429] * len(TAGS)
    assert totals(cluster) == [{"moved": 0, "ask": 0, "getkeys": 0}] * 3
    counts = server_counts(cluster)
    assert all(n["rl"] > 0 for n in counts), "the clients spread over all three nodes"


def test_async_limits_storage_on_the_cluster(cluster: Cluster, clock: FakeClock) -> None:
    async def scenario() -> List[bool]:
        storage = storage_from_string(cluster.url.replace("redis://", "async+redis+rl+cluster://") + "?failure=closed",
                                      clock=clock)
        strategy = AsyncMovingWindow(storage)
        item = parse("2/minute")
        out = [await strategy.hit(item, tag) for tag in TAGS for _ in range(3)]
        stats = await strategy.get_window_stats(item, TAGS[0])
        assert stats.remaining == 0
        await storage.limiter.client.aclose()
        return out

    reset_stats(cluster)
    assert asyncio.run(scenario()) == [True, True, False] * len(TAGS)
    assert totals(cluster) == [{"moved": 0, "ask": 0, "getkeys": 0}] * 3


def test_pyrate_factory_on_the_cluster(cluster: Cluster) -> None:
    kit = RateLimiter(connect(cluster.url, cluster=True), failure=FailurePolicy.CLOSED, clock=FakeClock())
    limiter = make_limiter(RedisRLBucketFactory([Rate(2, Duration.SECOND), Rate(5, Duration.MINUTE)], kit))
    reset_stats(cluster)
    results = [acquire(limiter, tag) for tag in TAGS for _ in range(3)]
    assert results == [True, True, False] * len(TAGS)
    assert totals(cluster) == [{"moved": 0, "ask": 0, "getkeys": 0}] * 3
    counts = server_counts(cluster)
    assert sum(n["rl"] for n in counts) == 3 * len(TAGS) and all(n["rl"] > 0 for n in counts)


@pytest.mark.parametrize("scheme", ["redis+rl+cluster", "async+redis+rl+cluster"])
def test_cluster_scheme_makes_a_cluster_client(cluster: Cluster, scheme: str) -> None:
    storage = storage_from_string(cluster.url.replace("redis", scheme, 1))
    assert storage.settings.cluster and "RedisCluster" in type(storage.limiter.client).__name__


def test_leases_and_throttle_route_by_their_key(cluster: Cluster) -> None:
    from redis_rl import Limit

    probe = cluster.nodes[0].client()
    try:
        rl_command(probe, "RL.THROTTLE", "{probe}", 1, 1, 1, 0)
        rl_command(probe, "RL.CONCURRENCY", "{probe}:c", 1, 1, "PEEK")
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"this build lacks RL.THROTTLE or RL.CONCURRENCY ({exc})")
    rl = RateLimiter(connect(cluster.url, cluster=True), failure=FailurePolicy.CLOSED, clock=FakeClock())
    reset_stats(cluster)
    for tag in TAGS:
        slots = Limit.concurrency("inflight", f"rl:{{{tag}}}:slots", 1, 30)
        assert rl.acquire(slots, "r1").allowed and not rl.acquire(slots, "r2").allowed
        assert rl.release(slots, "r1").allowed
        assert rl.throttle(f"rl:{{{tag}}}:cell", 1, 10, 60).allowed
    assert totals(cluster) == [{"moved": 0, "ask": 0, "getkeys": 0}] * 3
    assert sum(n["rl"] for n in server_counts(cluster)) == 4 * len(TAGS)
