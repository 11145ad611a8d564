"""The clients `connect()` and `connect_async()` build: their timeouts, and a burst of
new connections at once, which must all be decided by Redis, none by the failure policy."""

from __future__ import annotations

import asyncio
from typing import Any, List, Sequence, Tuple

from conftest import Server
from redis_rl import AsyncRateLimiter, FailurePolicy, Limit, connect, connect_async
from redis_rl.connect import CONNECT_TIMEOUT, READ_TIMEOUT

BURST = 50


def test_the_defaults_are_pinned() -> None:
    # Above the kernel's 1 s SYN retransmission, so a connect whose SYN was dropped
    # (a full accept queue under a connection burst) still succeeds on the retry.
    assert (CONNECT_TIMEOUT, READ_TIMEOUT) == (2.0, 0.25)
    for client in (connect(), connect_async()):
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (2.0, 0.25)
        assert kwargs["retry"].get_retries() == 0
    # Either can be set per client.
    kwargs = connect_async(connect_timeout=5, timeout=1).connection_pool.connection_kwargs
    assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (5, 1)


def test_a_burst_of_new_asyncio_connections_is_decided_by_redis(server: Server, key: str) -> None:
    """BURST limiters, each with its own client (so its own new connection), all ask at
    once: every answer is Redis's, none the failure policy's."""
    failures: List[Tuple[BaseException, Sequence[Any]]] = []
    limit = Limit.fixed("burst", key, BURST, 60)

    async def run() -> List[Any]:
        clients = [connect_async(server.url) for _ in range(BURST)]
        limiters = [AsyncRateLimiter(c, failure=FailurePolicy.CLOSED, on_failure=lambda e, cmd: failures.append((e, cmd)))
                    for c in clients]
        decisions = await asyncio.gather(*(rl.check(limit) for rl in limiters))
        await asyncio.gather(*(c.aclose() for c in clients))
        return decisions

    decisions = asyncio.run(run())
    assert failures == [], f"{len(failures)} of {BURST} went to the failure policy, first: {failures[0][0]!r}"
    assert all(d.allowed and d.error is None for d in decisions)
    # Each spent one unit: the counter says Redis decided all of them.
    assert sorted(d.remaining for d in decisions) == list(range(BURST))
