"""The deny cache, checked against the server's own answer at the same NOW."""

from __future__ import annotations

import random
from typing import Dict

import pytest
import redis

from conftest import FakeClock, Server, rl_command, total_calls
from redis_rl import DenyCache, FailurePolicy, Limit, RateLimiter, connect
from redis_rl.limits import command


def rl_calls(server: Server) -> int:
    return total_calls(server.client())


def server_peek(client: redis.Redis, limit: Limit, cost: int, now: int) -> bool:
    """What the server itself would answer now, without spending."""
    return bool(rl_command(client, *command(limit, cost, "peek", now))[0])


def cached_limiter(server: Server, clock: FakeClock) -> RateLimiter:
    return RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, deny_cache=True)


LIMITS = {
    "FIXED": Limit.fixed("f", "", 3, "2s"),
    "SLIDECOUNT": Limit.slidecount("c", "", 3, "2s"),
    "SLIDELOG": Limit.slidelog("l", "", 3, "2s"),
    "GCRA": Limit.gcra("g", "", 3, "2s", burst=2),
}


@pytest.mark.parametrize("algorithm", LIMITS)
def test_denies_locally_until_exactly_the_retry(server: Server, clock: FakeClock, key: str, algorithm: str) -> None:
    limit = LIMITS[algorithm].with_key(key)
    rl = cached_limiter(server, clock)
    while rl.check(limit).allowed:
        pass
    denied = rl.check(limit)  # from the cache already, or a second real denial
    retry = denied.retry_after_ms
    assert not denied.allowed and retry > 0

    before = rl_calls(server)
    clock.advance_ms(retry - 1)
    late = rl.check(limit)
    assert (late.allowed, late.cached, late.retry_after_ms) == (False, True, 1)
    assert rl_calls(server) == before, "a cached denial costs no round trip"
    assert not server_peek(server.client(), limit, 1, clock()), "and Redis denies it too"

    clock.advance_ms(1)
    assert server_peek(server.client(), limit, 1, clock())
    passed = rl.check(limit)
    assert (passed.allowed, passed.cached) == (True, False)


@pytest.mark.parametrize("algorithm", LIMITS)
def test_never_denies_what_redis_admits(server: Server, key: str, algorithm: str) -> None:
    # A random walk of costs and time steps: before each call, ask the module
    # (PEEK at the same NOW) what it would say; the cached kit must agree.
    limit = LIMITS[algorithm].with_key(key)
    clock = FakeClock()
    rl = cached_limiter(server, clock)
    raw = server.client()
    rng = random.Random(algorithm)
    outcomes: Dict[str, int] = {"admitted": 0, "denied": 0, "cached": 0}
    for _ in range(150):
        clock.advance_ms(rng.choice([0, 0, 1, 7, 50, 150, 400]))
        cost = rng.choice([1, 1, 1, 2, 3])
        expected = server_peek(raw, limit, cost, clock())
        decision = rl.check(limit, cost)
        assert decision.allowed == expected, (clock(), cost, decision)
        outcomes["cached" if decision.cached else "admitted" if decision.allowed else "denied"] += 1
    assert min(outcomes.values()) > 0, outcomes  # the walk exercised every path


def test_refund_and_reset_forget_the_denial(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    limit = Limit.fixed("f", key, 2, 10)
    rl = cached_limiter(server, clock)
    rl.check(limit, 2)
    assert not rl.check(limit).allowed
    assert rl.check(limit).cached
    rl.refund(limit)
    assert rl.check(limit).allowed
    assert not rl.check(limit).allowed
    rl.reset(limit)
    assert rl.check(limit).allowed


def test_check_all_denials_are_cached(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    limits = [Limit.gcra("g", key + ":g", 10, 1, burst=1), Limit.fixed("f", key + ":f", 5, 10)]
    rl = cached_limiter(server, clock)
    assert rl.check_all(limits).allowed
    first = rl.check_all(limits)
    assert (first.allowed, first.retry_after_ms, first.cached) == (False, 100, False)
    clock.advance_ms(60)
    again = rl.check_all(limits)
    assert (again.allowed, again.retry_after_ms, again.cached) == (False, 40, True)
    assert [p.retry_after_ms for p in again.parts] == [40, 0]
    clock.advance_ms(40)
    assert rl.check_all(limits).allowed


def test_what_is_not_cached(server: Server, clock: FakeClock, key: str) -> None:
    cache = DenyCache()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, deny_cache=cache)
    limit = Limit.fixed("f", key, 2, 10)
    assert rl.check(limit).allowed
    assert rl.check(limit, 3).never  # can never pass: nothing to wait for
    assert len(cache) == 0
    rl.check(limit, 2)  # denied: 1 left
    assert len(cache) == 1
    assert rl.check(limit, 1).allowed and not rl.check(limit, 1).cached  # another cost, another entry


def test_cache_is_bounded() -> None:
    from redis_rl import Decision

    cache = DenyCache(max_entries=3)
    for i in range(10):
        cache.remember(("k", i), 0, Decision(False, 0, 1000, 1000))
    assert len(cache) == 3
    assert cache.lookup(("k", 9), 999_999) is not None
    assert cache.lookup(("k", 0), 0) is None
