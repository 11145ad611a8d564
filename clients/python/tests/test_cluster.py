"""Routing in a real 3-node cluster: no MOVED, counted by the servers themselves."""

from __future__ import annotations

import asyncio
from typing import Dict, Iterator, List

import pytest
import redis
from redis.cluster import RedisCluster
from redis.exceptions import ClusterCrossSlotError

from conftest import ON_MODULE, SECRET, Cluster, FakeClock, Server, supports_all, total_calls
from redis_rl import CommandError, AsyncRateLimiter, FailurePolicy, Limit, RateLimiter, connect, connect_async

from test_commands import _expected_pseudonym
from test_failure import Reports

TAGS = [f"user{i}" for i in range(40)]


def reset_stats(cluster: Cluster) -> None:
    for c in cluster.clients():
        c.config_resetstat()


def server_counts(cluster: Cluster) -> List[Dict[str, int]]:
    """Per node: MOVED/ASK replies sent, COMMAND GETKEYS calls, and limiter calls."""
    out = []
    for c in cluster.clients():
        errors = c.info("errorstats")
        commands = c.info("commandstats")
        out.append({
            "moved": errors.get("errorstat_MOVED", {}).get("count", 0),
            "ask": errors.get("errorstat_ASK", {}).get("count", 0),
            "getkeys": commands.get("cmdstat_command|getkeys", {}).get("calls", 0),
            "rl": total_calls(c),
        })
    return out


@pytest.fixture(scope="module")
def cluster_client(cluster: Cluster) -> Iterator[RedisCluster]:
    client = connect(cluster.url, cluster=True)
    assert isinstance(client, RedisCluster)
    yield client
    client.close()


def test_keyed_calls_and_pipelines_never_redirect(cluster: Cluster, cluster_client: RedisCluster) -> None:
    rl = RateLimiter(cluster_client, failure=FailurePolicy.CLOSED, clock=FakeClock())
    has_all = supports_all(cluster.nodes[0].client()) is None
    reset_stats(cluster)
    calls = 0
    for tag in TAGS:
        for limit in (
            Limit.fixed("f", f"rl:{{{tag}}}:f", 5, 10),
            Limit.slidecount("c", f"rl:{{{tag}}}:c", 5, 10),
            Limit.slidelog("l", f"rl:{{{tag}}}:l", 5, 10),
            Limit.gcra("g", f"rl:{{{tag}}}:g", 5, 10),
        ):
            assert rl.check(limit).error is None
            calls += 1
    decisions = rl.check_many([Limit.gcra("g", f"rl:{{{tag}}}:pipe", 5, 10) for tag in TAGS])
    assert all(d.allowed and d.error is None for d in decisions)
    calls += len(TAGS)
    if has_all:
        for tag in TAGS:
            d = rl.check_all([Limit.gcra("g", f"rl:{{{tag}}}:a1", 5, 10),
                              Limit.fixed("f", f"rl:{{{tag}}}:a2", 5, 10)])
            assert d.allowed and d.error is None
            calls += 1
    counts = server_counts(cluster)
    assert [(c["moved"], c["ask"], c["getkeys"]) for c in counts] == [(0, 0, 0)] * 3
    assert sum(c["rl"] for c in counts) == calls
    assert all(c["rl"] > 0 for c in counts), "the keys spread over all three nodes"


def test_asyncio_cluster_never_redirects(cluster: Cluster) -> None:
    async def scenario() -> None:
        client = connect_async(cluster.url, cluster=True)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=FakeClock(), pseudonym_secret=SECRET)
        for tag in TAGS:
            assert (await rl.check(Limit.gcra("g", f"rl:{{{tag}}}:async", 5, 10))).error is None
        many = await rl.check_many([Limit.fixed("f", f"rl:{{{tag}}}:apipe", 5, 10) for tag in TAGS])
        assert all(d.allowed for d in many)
        assert len(await rl.pseudonym("192.0.2.1")) == 24
        await client.aclose()

    reset_stats(cluster)
    asyncio.run(scenario())
    counts = server_counts(cluster)
    assert [(c["moved"], c["getkeys"]) for c in counts] == [(0, 0)] * 3
    # RL.PSEUDONYM is a server call on the module; the scripts' kit computes it.
    assert sum(c["rl"] for c in counts) == 2 * len(TAGS) + (1 if ON_MODULE else 0)


def test_pseudonym_through_the_cluster_client(cluster_client: RedisCluster) -> None:
    # (redis-py 8 alone refuses it, even with target_nodes=RANDOM: no key to route by.)
    rl = RateLimiter(cluster_client, failure=FailurePolicy.CLOSED, clock=FakeClock(), pseudonym_secret=SECRET)
    assert rl.pseudonym("192.0.2.1", "api") == _expected_pseudonym("192.0.2.1", "2024-06-17") + ":api"


@pytest.mark.parametrize("make", [Limit.fixed, Limit.slidecount])
def test_untagged_key_gets_the_module_error(cluster_client: RedisCluster, make) -> None:
    reports = Reports()
    rl = RateLimiter(cluster_client, failure=FailurePolicy.CLOSED, on_failure=reports)
    with pytest.raises(CommandError, match="needs a {hash tag} in cluster mode"):
        rl.check(make("x", "rl:untagged", 5, 10))
    assert reports.seen == []  # a caller's mistake, not the failure policy's


def test_check_all_keys_in_different_slots(cluster: Cluster, cluster_client: RedisCluster) -> None:
    reason = supports_all(cluster.nodes[0].client())
    if reason:
        pytest.skip(reason)
    rl = RateLimiter(cluster_client, failure=FailurePolicy.CLOSED, on_failure=Reports())
    # The server's CROSSSLOT (redis-py's ClusterCrossSlotError): the caller's keys, raised.
    with pytest.raises(CommandError) as raised:
        rl.check_all([Limit.gcra("a", "rl:{one}", 5, 10), Limit.gcra("b", "rl:{two}", 5, 10)])
    assert isinstance(raised.value.__cause__, ClusterCrossSlotError)


def test_plain_redis_py_cluster_routes_rl_all_by_its_declared_keys(cluster: Cluster) -> None:
    """Without the kit: RL.ALL declares its keys to Redis (movablekeys, getkeys-api),
    so redis-py's RedisCluster finds them with COMMAND GETKEYS and sends each call to
    the slot's owner, never a MOVED."""
    if not ON_MODULE:
        pytest.skip("RL.ALL's key declaration is the module's (the scripts are called by the kit, which names the keys)")
    if supports_all(cluster.nodes[0].client()) is not None:
        pytest.skip("this module has no RL.ALL")
    client = RedisCluster.from_url(cluster.url)
    try:
        reset_stats(cluster)
        for tag in TAGS:
            reply = client.execute_command(
                "RL.ALL", 2, "FIXED", f"rl:{{{tag}}}:raw-f", 5, 10,
                "GCRA", f"rl:{{{tag}}}:raw-g", 5, 10, "BURST", 2,
            )
            assert reply[0] == 1 and len(reply[4]) == 2
        counts = server_counts(cluster)
        assert [(c["moved"], c["ask"]) for c in counts] == [(0, 0)] * 3
        assert sum(c["rl"] for c in counts) == len(TAGS)
        assert all(c["rl"] > 0 for c in counts), "the keys spread over all three nodes"
        assert sum(c["getkeys"] for c in counts) > 0, "redis-py asked the server for the keys"
    finally:
        client.close()
