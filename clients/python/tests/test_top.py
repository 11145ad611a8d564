"""top(): RL.TOP on one server and merged over a real cluster's primaries."""

from __future__ import annotations

import asyncio

import pytest
import redis

from conftest import ON_MODULE, T0, Cluster, Server
from redis_rl import TopEntry, connect, connect_async, top, top_async

# The scripts keep no denial summary: RL.TOP is the module's alone.
pytestmark = pytest.mark.skipif(not ON_MODULE, reason="RL.TOP needs the module (RL_BACKEND=scripts)")


def deny(c: redis.Redis, key: str, times: int, algorithm: str = "FIXED") -> None:
    for _ in range(times + 1):  # the first is admitted
        c.execute_command(f"RL.{algorithm}", key, 1, 60, "NOW", T0)


def test_top_on_one_server(server: Server) -> None:
    c = server.client()
    top(c, reset=True)
    deny(c, "top:heavy", 5)
    deny(c, "top:light", 1)
    deny(c, "top:g", 2, "GCRA")
    got = top(c)
    assert [(e.key, e.denied, e.error) for e in got] == [("top:heavy", 5, 0), ("top:g", 2, 0), ("top:light", 1, 0)]
    assert got[0] == TopEntry("top:heavy", 5, 0, 0, T0 // 1000, "rl.fixed", "fixed")
    assert [e.key for e in top(c, count=1)] == ["top:heavy"]
    assert [e.key for e in top(c, algorithm="gcra")] == ["top:g"]
    assert len(top(c, reset=True)) == 3
    assert top(c) == []
    # RESP3 replies maps; bytes replies decode.
    c3 = redis.Redis(port=server.port, protocol=3)
    deny(c, "top:heavy", 1)
    assert [e.key for e in top(c3)] == ["top:heavy"]


def test_bad_arguments_are_raised(server: Server) -> None:
    c = server.client()
    for bad in (0, -1, "3", True):
        with pytest.raises(ValueError):
            top(c, count=bad)  # type: ignore[arg-type]
    with pytest.raises(redis.ResponseError, match="unknown algorithm"):
        top(c, algorithm="nope")


def test_top_merges_every_primary(cluster: Cluster) -> None:
    client = connect(cluster.url, cluster=True)
    for node in cluster.clients():
        node.execute_command("RL.TOP", "RESET")
    keys = {f"{{t{i}}}:rl": i + 1 for i in range(12)}
    for key, n in keys.items():
        for _ in range(n + 1):
            client.execute_command("RL.FIXED", key, 1, 60, "NOW", T0)
    # The keys are spread over the three primaries: each has only its own.
    per_node = [len(node.execute_command("RL.TOP", "COUNT", 100)) for node in cluster.clients()]
    assert sum(per_node) == len(keys) and all(n > 0 for n in per_node), per_node
    merged = top(client, count=5)
    assert [(e.key, e.denied) for e in merged] == sorted(keys.items(), key=lambda kv: -kv[1])[:5]
    assert len(top(client, count=100, reset=True)) == len(keys)
    assert top(client) == []
    client.close()


def test_top_async_merges_every_primary(cluster: Cluster, server: Server) -> None:
    c = server.client()
    top(c, reset=True)
    deny(c, "top:async", 2)
    sync = connect(cluster.url, cluster=True)
    top(sync, count=100, reset=True)
    keys = {f"{{a{i}}}:rl": i + 1 for i in range(12)}
    for key, n in keys.items():
        for _ in range(n + 1):
            sync.execute_command("RL.FIXED", key, 1, 60, "NOW", T0)
    sync.close()

    async def scenario() -> None:
        one = connect_async(f"redis://127.0.0.1:{server.port}")
        assert [(e.key, e.denied) for e in await top_async(one)] == [("top:async", 2)]
        with pytest.raises(ValueError):
            await top_async(one, count=0)
        await one.aclose()
        # A fresh cluster client: its first call learns the primaries.
        client = connect_async(cluster.url, cluster=True)
        merged = await top_async(client, count=5, algorithm="fixed")
        assert [(e.key, e.denied) for e in merged] == sorted(keys.items(), key=lambda kv: -kv[1])[:5]
        assert len(await top_async(client, count=100, reset=True)) == len(keys)
        assert await top_async(client) == []
        await client.aclose()

    asyncio.run(scenario())


def test_merge_adds_a_key_seen_on_two_servers() -> None:
    from redis_rl.top import merge

    a = [TopEntry("k", 5, 1, 1, 10, "rl.fixed", "fixed"), TopEntry("x", 9, 0, 0, 1, "rl.gcra", "gcra")]
    b = [TopEntry("k", 6, 2, 0, 20, "rl.all", "gcra")]
    assert merge([a, b], 10) == [
        TopEntry("k", 11, 3, 1, 20, "rl.all", "gcra"),
        TopEntry("x", 9, 0, 0, 1, "rl.gcra", "gcra"),
    ]
