"""Typed calls and their headers, pinned to exact replies by a fixed NOW."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass
from typing import List, Optional, Tuple

import pytest

from conftest import SECRET, T0, FakeClock, Server
from redis_rl import (
    AsyncRateLimiter,
    FailurePolicy,
    Limit,
    RateLimiter,
    connect,
    connect_async,
    ratelimit_headers,
)


def limiter(server: Server, clock: FakeClock) -> RateLimiter:
    return RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)


@dataclass
class Step:
    cost: int
    reply: Tuple[bool, int, int, int]
    rate: str  # the RateLimit header
    retry_after: Optional[str] = None
    advance_ms: int = 0


# Per algorithm: the limit, then calls at T0 (2024-06-17 07:29:09.8 UTC) and what
# the module answers and the headers say. The last step of each is a cost above
# the limit (or burst): denied for ever, so no Retry-After.
SCENARIOS = {
    "FIXED": (
        Limit.fixed("fixed", "", 8, 10),
        '"fixed";q=8;w=10',
        [
            Step(1, (True, 7, 0, 200), '"fixed";r=7;t=1'),  # the window ends at :10
            Step(7, (True, 0, 0, 200), '"fixed";r=0;t=1'),
            Step(1, (False, 0, 200, 200), '"fixed";r=0;t=1', "1"),
            Step(9, (False, 0, -1, 200), '"fixed";r=0;t=1'),
        ],
    ),
    "SLIDELOG": (
        Limit.slidelog("log", "", 3, "10s"),
        '"log";q=3;w=10',
        [
            Step(1, (True, 2, 0, 10000), '"log";r=2;t=10'),
            Step(2, (True, 0, 0, 10000), '"log";r=0;t=10'),
            Step(1, (False, 0, 5999, 5999), '"log";r=0;t=6', "6", advance_ms=4001),
            Step(4, (False, 0, -1, 5999), '"log";r=0;t=6'),
        ],
    ),
    "SLIDECOUNT": (
        Limit.slidecount("count", "", 100, 60),
        '"count";q=100;w=60',
        [
            Step(1, (True, 99, 0, 50201), '"count";r=99;t=51'),
            Step(99, (True, 0, 0, 109601), '"count";r=0;t=110'),
            Step(1, (False, 0, 50201, 109601), '"count";r=0;t=110', "51"),
            Step(101, (False, 0, -1, 109601), '"count";r=0;t=110'),
        ],
    ),
    "GCRA": (
        Limit.gcra("gcra", "", 10, "1000ms", burst=2),
        '"gcra";q=10;w=1',
        [
            Step(1, (True, 1, 0, 100), '"gcra";r=1;t=1'),
            Step(1, (True, 0, 0, 200), '"gcra";r=0;t=1'),
            Step(1, (False, 0, 100, 200), '"gcra";r=0;t=1', "1"),
            Step(3, (False, 0, -1, 200), '"gcra";r=0;t=1'),
        ],
    ),
}


@pytest.mark.parametrize("algorithm", SCENARIOS)
def test_replies_and_headers(server: Server, clock: FakeClock, key: str, algorithm: str) -> None:
    template, policy, steps = SCENARIOS[algorithm]
    limit = template.with_key(key)
    rl = limiter(server, clock)
    for step in steps:
        clock.advance_ms(step.advance_ms)
        d = rl.check(limit, step.cost)
        assert d.error is None
        assert (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms) == step.reply
        expected = [("RateLimit-Policy", policy), ("RateLimit", step.rate)]
        if step.retry_after:
            expected.append(("Retry-After", step.retry_after))
        assert ratelimit_headers(d) == expected


def test_never_admitted_is_explicit(server: Server, clock: FakeClock, key: str) -> None:
    d = limiter(server, clock).check(Limit.fixed("fixed", key, 8, 10), cost=9)
    assert (d.allowed, d.never, d.retry_after_ms, d.retry_after) == (False, True, -1, None)
    assert [name for name, _ in ratelimit_headers(d)] == ["RateLimit-Policy", "RateLimit"]


def test_legacy_headers(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock)
    limit = Limit.fixed("fixed", key, 8, 10)
    assert ratelimit_headers(rl.check(limit, 3), legacy=True)[2:] == [
        ("X-RateLimit-Limit", "8"),
        ("X-RateLimit-Remaining", "5"),
        ("X-RateLimit-Reset", "1"),
    ]


def test_peek_spends_nothing(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock)
    limit = Limit.slidelog("log", key, 2, 10)
    for _ in range(3):
        assert rl.peek(limit).remaining == 1
    assert server.client().zcard(key) == 0


def test_window_spellings() -> None:
    assert Limit.fixed("a", "k", 1, 60).window_arg == "60"
    assert Limit.fixed("a", "k", 1, "1500ms").window_arg == "1500ms"
    assert Limit.fixed("a", "k", 1, "2s").window_ms == 2000
    with pytest.raises(ValueError):
        Limit("a", "FIXED", "k", 1, 1000, burst=2)
    with pytest.raises(ValueError):
        Limit.fixed('bad\n', "k", 1, 10)


def test_header_names_are_sf_strings() -> None:
    from redis_rl import Decision

    d = Decision(True, 1, 0, 10, limit=Limit.fixed('say "hi"\\', "k", 2, 10))
    assert ratelimit_headers(d)[0] == ("RateLimit-Policy", '"say \\"hi\\"\\\\";q=2;w=10')


def _expected_pseudonym(identity: str, day: str) -> str:
    return hmac.new(SECRET.encode(), f"{identity}|{day}".encode(), hashlib.sha256).hexdigest()[:24]


def test_pseudonym(server: Server, clock: FakeClock) -> None:
    rl = limiter(server, clock)
    # NOW is always sent, so the UTC day is the clock's: 2024-06-17.
    assert rl.pseudonym("::ffff:192.0.2.1") == _expected_pseudonym("192.0.2.1", "2024-06-17")
    assert rl.pseudonym("user-42", "search") == _expected_pseudonym("user-42", "2024-06-17") + ":search"
    assert rl.pseudonym("2001:db8:1:2:aaaa::1", prefix6=64) == _expected_pseudonym(
        "2001:db8:1:2::/64", "2024-06-17"
    )
    clock.advance_ms(86_400_000)
    assert rl.pseudonym("192.0.2.1") == _expected_pseudonym("192.0.2.1", "2024-06-18")


def test_check_many_pipelines_independent_checks(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock)
    a = Limit.fixed("a", key + ":a", 1, 10)
    b = Limit.fixed("b", key + ":b", 5, 10)
    first = rl.check_many([a, b])
    second = rl.check_many([a, b])
    assert [(d.allowed, d.remaining) for d in first] == [(True, 0), (True, 4)]
    # Not all-or-nothing: b still spends when a denies.
    assert [(d.allowed, d.remaining) for d in second] == [(False, 0), (True, 3)]
    assert [d.limit for d in second] == [a, b]


def test_asyncio_client(server: Server, clock: FakeClock, key: str) -> None:
    async def scenario() -> List[Tuple[bool, int, int, int]]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET)
        limit = Limit.gcra("gcra", key, 10, 1, burst=2)
        out = [await rl.check(limit) for _ in range(3)]
        many = await rl.check_many([limit, limit.with_key(key + ":other")])
        name = await rl.pseudonym("192.0.2.1")
        await client.aclose()
        assert name == _expected_pseudonym("192.0.2.1", "2024-06-17")
        return [(d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms) for d in out + many]

    assert asyncio.run(scenario()) == [
        (True, 1, 0, 100),
        (True, 0, 0, 200),
        (False, 0, 100, 200),
        (False, 0, 100, 200),
        (True, 1, 0, 100),
    ]


# RL.ALL, REFUND and RESET.


def test_refund_and_reset(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    rl = limiter(server, clock)
    limit = Limit.fixed("fixed", key, 8, 10)
    assert rl.check(limit, 8).remaining == 0
    assert not rl.check(limit).allowed
    refunded = rl.refund(limit, 3)
    assert refunded.error is None and refunded.allowed
    assert rl.check(limit, 3).allowed
    assert not rl.check(limit).allowed
    reset = rl.reset(limit)
    assert (reset.allowed, reset.error) == (True, None)
    assert rl.check(limit, 8).allowed


def test_check_all(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    rl = limiter(server, clock)
    burst = Limit.gcra("burst", key + ":burst", 10, 1, burst=2)
    window = Limit.fixed("window", key + ":window", 3, 10)
    results = [rl.check_all([burst, window]) for _ in range(3)]
    d1, d2, d3 = results
    assert (d1.allowed, d1.remaining, d1.retry_after_ms, d1.reset_after_ms) == (True, 1, 0, 200)
    assert [(p.limit, p.remaining) for p in d1.parts] == [(burst, 1), (window, 2)]
    assert ratelimit_headers(d1) == [
        ("RateLimit-Policy", '"burst";q=10;w=1, "window";q=3;w=10'),
        ("RateLimit", '"burst";r=1;t=1, "window";r=2;t=1'),
    ]
    assert (d2.allowed, d2.remaining) == (True, 0)
    # The burst denies, so the window spends nothing.
    assert (d3.allowed, d3.retry_after_ms) == (False, 100)
    assert [(p.allowed, p.remaining) for p in d3.parts] == [(False, 0), (True, 0)]
    assert ratelimit_headers(d3, legacy=True) == [
        ("RateLimit-Policy", '"burst";q=10;w=1, "window";q=3;w=10'),
        ("RateLimit", '"burst";r=0;t=1, "window";r=0;t=1'),
        ("Retry-After", "1"),
        ("X-RateLimit-Limit", "10"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "1"),
    ]
    # The window did not spend on the denied call: one unit is still there.
    assert (rl.peek(window).allowed, rl.peek(window, 2).allowed) == (True, False)


def test_check_all_never(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    rl = limiter(server, clock)
    limits = [Limit.fixed("a", key + ":a", 5, 10), Limit.slidelog("b", key + ":b", 5, 10)]
    d = rl.check_all(limits, cost=[1, 6])
    assert (d.allowed, d.never, d.retry_after) == (False, True, None)
    assert [p.never for p in d.parts] == [False, True]
    assert "Retry-After" not in dict(ratelimit_headers(d))
