"""RL.THROTTLE (redis-cell's CL.THROTTLE) through the kit's typed call."""

from __future__ import annotations

import asyncio

import pytest
import redis

from conftest import FakeClock, Server, free_port, rl_command
from redis_rl import CommandError, AsyncRateLimiter, FailurePolicy, RateLimiter, Throttle, connect, connect_async
from test_failure import Reports


@pytest.fixture(scope="module")
def needs_throttle(server: Server) -> None:
    try:
        rl_command(server.client(), "RL.THROTTLE", "{probe}:t", 1, 1, 1, 0)
    except redis.ResponseError as exc:
        pytest.skip(f"this build of the module lacks RL.THROTTLE ({exc})")


@pytest.mark.usefixtures("needs_throttle")
def test_throttle_replies_as_cl_throttle(server: Server, clock: FakeClock) -> None:
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock)
    # redis-cell's README example: 30 per 60 s, bursts of 16.
    first = rl.throttle("rl:{throttle}:user123", 15, 30, 60)
    assert first == Throttle(False, 16, 15, -1, 2)
    assert rl.throttle("rl:{throttle}:user123", 15, 30, 60, quantity=0).remaining == 15  # a peek spends nothing
    for _ in range(15):
        assert rl.throttle("rl:{throttle}:user123", 15, 30, 60).allowed
    limited = rl.throttle("rl:{throttle}:user123", 15, 30, 60)
    assert (limited.limited, limited.remaining, limited.retry_after) == (True, 0, 2)
    clock.advance_ms(2_000)
    assert rl.throttle("rl:{throttle}:user123", 15, 30, 60).allowed


@pytest.mark.parametrize("policy", list(FailurePolicy))
def test_throttle_failures_go_through_the_policy(policy: FailurePolicy) -> None:
    reports = Reports()
    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=policy, on_failure=reports)
    t = rl.throttle("rl:{t}", 15, 30, 60)
    assert t.allowed is (policy is FailurePolicy.OPEN) and isinstance(t.error, redis.ConnectionError)
    assert reports.seen[0][1][0] == "RL.THROTTLE"


@pytest.mark.usefixtures("needs_throttle")
def test_throttle_bad_input_is_the_modules_error(server: Server) -> None:
    reports = Reports()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, on_failure=reports)
    # A zero rate: redis-cell's "Store error", a clear ERR here, raised to the caller.
    with pytest.raises(CommandError, match="count must be an integer"):
        rl.throttle("rl:{t-bad}", 15, 0, 60)
    assert reports.seen == []


@pytest.mark.usefixtures("needs_throttle")
def test_async_throttle(server: Server, clock: FakeClock) -> None:
    async def scenario() -> Throttle:
        client = connect_async(server.url)
        t = await AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock).throttle("rl:{at}", 0, 1, 1)
        await client.aclose()
        return t

    assert asyncio.run(scenario()) == Throttle(False, 1, 0, -1, 1)
