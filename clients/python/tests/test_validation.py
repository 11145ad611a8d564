"""Mistakes fail loudly: what the module would refuse is raised where the limit is
built (or the call planned), before anything reaches Redis, whatever the failure
policy; and a refusal that only the module can judge is raised, not the policy's."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from conftest import Server, free_port
from redis_rl import AsyncRateLimiter, CommandError, FailurePolicy, Limit, RateLimiter, connect, connect_async


def test_window_formats_are_named() -> None:
    with pytest.raises(ValueError, match=r"'10 minutes' is not understood: use seconds as an int \(60\), a string '60', '60s' or '1500ms', or a timedelta"):
        Limit.fixed("f", "rl:{v}", 10, "10 minutes")
    for bad in ("", "1m", "-5", "1.5s", "s", "60 s"):
        with pytest.raises(ValueError, match="not understood"):
            Limit.fixed("f", "rl:{v}", 10, bad)
    with pytest.raises(TypeError, match="window must be"):
        Limit.fixed("f", "rl:{v}", 10, 1.5)  # type: ignore[arg-type]
    assert Limit.fixed("f", "rl:{v}", 10, "1500MS").window_ms == 1500
    assert Limit.fixed("f", "rl:{v}", 10, timedelta(minutes=10)).window_ms == 600_000


def test_window_range() -> None:
    for bad in (0, "0ms", 10 * 365 * 24 * 3600 + 1, timedelta(0)):
        with pytest.raises(ValueError, match="from 1 ms to ten years"):
            Limit.slidecount("s", "rl:{v}", 10, bad)
    assert Limit.slidecount("s", "rl:{v}", 10, 10 * 365 * 24 * 3600).window_ms == 10 * 365 * 24 * 3600 * 1000


@pytest.mark.parametrize("bad", [0, -1, 10**15 + 1])
def test_limit_and_burst_range(bad: int) -> None:
    with pytest.raises(ValueError, match="limit must be from 1 to"):
        Limit.gcra("g", "rl:{v}", bad, 1)
    with pytest.raises(ValueError, match="burst must be from 1 to"):
        Limit.gcra("g", "rl:{v}", 5, 1, burst=bad)


@pytest.mark.parametrize("bad", [1.5, "5", True, None])
def test_limit_must_be_an_integer(bad: object) -> None:
    with pytest.raises(TypeError, match="limit must be an integer"):
        Limit.fixed("f", "rl:{v}", bad, 1)  # type: ignore[arg-type]


def unreachable(policy: FailurePolicy = FailurePolicy.OPEN) -> RateLimiter:
    """A limiter on a closed port: any call that reached the network would be the
    failure policy's (admitted), so a raise proves the check is local."""
    return RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=policy, on_failure=lambda e, c: pytest.fail(f"sent: {c}"))


@pytest.mark.parametrize("bad", [0, -1, 10**15 + 1])
def test_cost_range(bad: int) -> None:
    rl = unreachable()
    with pytest.raises(ValueError, match="cost must be from 1 to"):
        rl.check(Limit.fixed("f", "rl:{v}", 10, 1), bad)
    with pytest.raises(ValueError, match="cost must be from 1 to"):
        rl.check_all([Limit.fixed("f", "rl:{v}", 10, 1), Limit.gcra("g", "rl:{v}:g", 10, 1)], [1, bad])


def test_cost_type_and_slidelog_cap() -> None:
    rl = unreachable()
    with pytest.raises(TypeError, match="cost must be an integer"):
        rl.check(Limit.fixed("f", "rl:{v}", 10, 1), True)
    with pytest.raises(TypeError, match=r"cost must be an integer, not 1\.5"):
        rl.check(Limit.fixed("f", "rl:{v}", 10, 1), 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="log: cost must be from 1 to 1000000,"):
        rl.check(Limit.slidelog("log", "rl:{v}", 5000, 1), 1_000_001)


def test_concurrency_cost_and_lease_ids() -> None:
    rl = unreachable()
    lease_limit = Limit.concurrency("jobs", "rl:{v}:jobs", 5, 30)
    with pytest.raises(ValueError, match="a lease is one slot"):
        rl.check_all([lease_limit], 2, lease="job-1")
    for bad in ("", None, 7):
        with pytest.raises(ValueError, match="lease must be a non-empty string"):
            rl.acquire(lease_limit, bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 16 limits"):
        rl.check_all([Limit.fixed("f", f"rl:{{v}}:{i}", 1, 1) for i in range(17)])


def test_module_refusal_is_raised_not_the_policy(server: Server) -> None:
    seen = []
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, on_failure=lambda e, c: seen.append(e))
    with pytest.raises(CommandError, match="RL.SLIDELOG refused"):
        rl.check(Limit.slidelog("log", "rl:{v}:log", 2_000_000, 10))
    assert seen == []


def test_asyncio_validates_the_same(server: Server) -> None:
    async def scenario() -> None:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.OPEN, on_failure=lambda e, c: pytest.fail("policy"))
        with pytest.raises(ValueError, match="cost must be from 1 to"):
            await rl.check(Limit.fixed("f", "rl:{va}", 10, 1), 0)
        with pytest.raises(ValueError, match="lease must be a non-empty string"):
            await rl.acquire(Limit.concurrency("jobs", "rl:{va}:jobs", 5, 30), "")
        with pytest.raises(CommandError, match="RL.SLIDELOG refused"):
            await rl.check(Limit.slidelog("log", "rl:{va}:log", 2_000_000, 10))
        await client.aclose()

    asyncio.run(scenario())


def test_limits_storage_moving_window_cost_and_incr_counter(server: Server) -> None:
    """The `limits` storage's answers where the module has a bound: a moving-window hit
    takes any cost up to its limit, as stock (one log member per unit), a cost above
    the limit is simply denied, and incr returns the counter the API promises."""
    from limits import RateLimitItemPerMinute
    from limits.storage import storage_from_string

    import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

    storage = storage_from_string(server.url.replace("redis://", "redis+rl://"))
    big = RateLimitItemPerMinute(10_000)
    assert storage.acquire_entry(big.key_for("cost"), big.amount, big.get_expiry(), amount=5_000) is True
    assert storage.get_moving_window(big.key_for("cost"), big.amount, big.get_expiry())[1] == 5_000
    assert storage.acquire_entry(big.key_for("cost"), big.amount, big.get_expiry(), amount=5_001) is False
    small = RateLimitItemPerMinute(10)
    assert storage.acquire_entry(small.key_for("cap"), small.amount, small.get_expiry(), amount=5000) is False
    one = RateLimitItemPerMinute(1)
    assert storage.incr(one.key_for("incr"), one.get_expiry(), amount=1) == 1
    assert storage.incr(one.key_for("incr"), one.get_expiry(), amount=10) == 11  # denied: 1 + 10, not stored
    assert storage.get(one.key_for("incr")) == 1
