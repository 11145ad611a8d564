"""RL.SLIDEWINDOW (Symfony's sliding window, anchored at the first admitted call) and
RL.TOKENBUCKET (Symfony's token bucket, refilled in steps) through the kit, on whichever
backend RL_BACKEND names; their decisions depend on NOW only, so the clock is stepped."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import pytest

from conftest import T0, FakeClock, Server, limiter_calls
from redis_rl import FailurePolicy, Limit, RateLimiter, connect
from redis_rl.limits import all_command, command


def limiter(server: Server, clock: FakeClock, **options: Any) -> RateLimiter:
    return RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, **options)


def reply(d: Any) -> Tuple[bool, int, int, int]:
    return d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms


def test_command_lines() -> None:
    window = Limit.slidewindow("w", "k", 10, "1500ms")
    assert (window.algorithm, window.window_ms) == ("SLIDEWINDOW", 1500)
    assert command(window, 2, "spend", 5) == ["RL.SLIDEWINDOW", "k", 10, "1500ms", "COST", 2, "NOW", 5]
    bucket = Limit.tokenbucket("b", "k", 1000, 15, refill=100)
    assert command(bucket, 2, "peek", None) == ["RL.TOKENBUCKET", "k", 1000, "15", "REFILL", 100, "COST", 2, "PEEK"]
    # REFILL 1 is the module's default: not sent.
    assert command(Limit.tokenbucket("b", "k", 5, "1500ms"), 1, "spend", None) == ["RL.TOKENBUCKET", "k", 5, "1500ms"]
    assert all_command([window, bucket], [1, 3], "spend", None) == [
        "RL.ALL", 2, "SLIDEWINDOW", "k", 10, "1500ms", "TOKENBUCKET", "k", 1000, "15", "REFILL", 100, "COST", 3]


@pytest.mark.parametrize(
    "build, error, match",
    [
        (lambda: Limit.slidewindow("w", "k", 0, 10), ValueError, "w: limit must be from 1 to"),
        (lambda: Limit.slidewindow("w", "k", 10**15 + 1, 10), ValueError, "w: limit must be from 1 to"),
        (lambda: Limit.slidewindow("w", "k", 1, "0s"), ValueError, "window '0s' must be from 1 ms"),
        (lambda: Limit.tokenbucket("b", "k", 10, 1, refill=0), ValueError, "b: refill must be from 1 to"),
        (lambda: Limit.tokenbucket("b", "k", 10, 1, refill=10**15 + 1), ValueError, "b: refill must be from 1 to"),
        (lambda: Limit.tokenbucket("b", "k", 10, 1, refill=True), TypeError, "b: refill must be an integer"),
        (lambda: Limit.tokenbucket("b", "k", 0, 1), ValueError, "b: limit must be from 1 to"),
        (lambda: Limit.tokenbucket("b", "k", 10, "soon"), ValueError, "window 'soon' is not understood"),
        (lambda: Limit("g", "GCRA", "k", 1, 1000, refill=2), ValueError, "refill is a TOKENBUCKET option"),
        (lambda: Limit("s", "SLIDEWINDOW", "k", 1, 1000, burst=2), ValueError, "burst is a GCRA option"),
    ],
)
def test_bad_arguments_are_refused_locally(build: Any, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        build()


def test_a_bad_cost_is_refused_before_sending(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock)
    before = limiter_calls(server.client())
    with pytest.raises(ValueError, match="b: cost must be from 1 to"):
        rl.check(Limit.tokenbucket("b", key, 5, 10), 0)
    with pytest.raises(ValueError, match="w: cost must be from 1 to"):
        rl.check_all([Limit.slidewindow("w", key + ":w", 5, 10)], 10**15 + 1)
    assert limiter_calls(server.client()) == before
    assert server.client().exists(key, key + ":w") == 0


def test_slidewindow_weighs_the_previous_window(server: Server, clock: FakeClock, key: str) -> None:
    """docs/commands.md's example, Symfony's own test: 10 per 12 s; 8, then 15 s later
    (a quarter into the next window, 8 x 9 / 12 = 6 still counted) 1 more, 5 more refused."""
    rl = limiter(server, clock)
    limit = Limit.slidewindow("w", key, 10, 12)
    assert reply(rl.check(limit, 8)) == (True, 2, 0, 24000)
    c = server.client()
    assert c.get(key) == f"{T0 + 12_000_000}:8:0"
    clock.advance_ms(15_000)
    assert reply(rl.check(limit)) == (True, 3, 0, 21000)
    assert reply(rl.check(limit, 5)) == (False, 3, 1501, 21000)
    assert c.get(key) == f"{T0 + 24_000_000}:1:8"
    # PEEK writes nothing; REFUND gives back; RESET clears (each replies as a PEEK
    # of its cost would: what would remain after spending it).
    assert reply(rl.peek(limit, 3)) == (True, 0, 0, 21000)
    assert c.get(key) == f"{T0 + 24_000_000}:1:8"
    assert reply(rl.refund(limit)) == (True, 3, 0, 21000)
    assert c.get(key) == f"{T0 + 24_000_000}:0:8"
    assert reply(rl.reset(limit)) == (True, 9, 0, 0)
    assert c.exists(key) == 0


def test_tokenbucket_refills_in_steps(server: Server, clock: FakeClock, key: str) -> None:
    """Symfony's testBucketRefilledWithStrictFrequency: 100 tokens back at each 15 s step."""
    rl = limiter(server, clock)
    limit = Limit.tokenbucket("b", key, 1000, 15, refill=100)
    assert reply(rl.check(limit, 300)) == (True, 700, 0, 45000)
    assert server.client().get(key) == f"700:{T0}"
    seen: List[int] = []
    for _ in range(20):
        seen.append(rl.check(limit).remaining)
        clock.advance_ms(4000)
    assert seen == [699, 698, 697, 696, 795, 794, 793, 792, 891, 890, 889, 888,
                    987, 986, 985, 999, 998, 997, 996, 999]
    # Emptied, it waits for the next step, not for a smooth trickle.
    rl.check(limit, 999)
    denied = rl.check(limit)
    assert (denied.allowed, denied.retry_after_ms) == (False, 15000 - 4000)
    assert reply(rl.peek(limit))[:2] == (False, 0)
    assert rl.refund(limit, 5).remaining == 0
    assert rl.peek(limit).remaining == 4
    # A cost above the capacity is the module's denial that never passes, not an error.
    assert rl.check(limit, 1001).never
    assert reply(rl.reset(limit)) == (True, 999, 0, 0)
    assert server.client().exists(key) == 0


def test_rl_all_spends_on_both_or_neither(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock)
    window = Limit.slidewindow("w", key + ":w", 6, 10)
    bucket = Limit.tokenbucket("b", key + ":b", 4, 10, refill=2)
    c = server.client()
    assert [rl.check_all([window, bucket], 2).allowed for _ in range(3)] == [True, True, False]
    # The bucket refused the third: the window did not spend either.
    assert c.get(window.key) == f"{T0 + 10_000_000}:4:0"
    denied = rl.check_all([window, bucket], 2)
    assert [reply(p) for p in denied.parts] == [(True, 0, 0, 20000), (False, 0, 10000, 20000)]
    # REFILL 2 inside RL.ALL: one step brings two tokens, not one.
    clock.advance_ms(10_000)
    # (The window's end is included: it still counts its 4.)
    stepped = rl.check_all([window, bucket], [1, 2])
    assert (stepped.allowed, [p.remaining for p in stepped.parts]) == (True, [1, 0])
    assert c.get(bucket.key) == f"0:{T0 + 10_000_000}"


def answers(server: Server, backend: str, limit: Limit, steps: List[Tuple[int, int]]) -> Tuple[Any, Optional[str]]:
    clock = FakeClock()
    rl = limiter(server, clock, backend=backend)
    seen = []
    for advance_ms, cost in steps:
        clock.advance_ms(advance_ms)
        seen.append(reply(rl.check(limit, cost)))
    stored = server.client().get(limit.key)
    rl.reset(limit)
    return seen, stored


@pytest.mark.parametrize(
    "build",
    [
        lambda key: Limit.slidewindow("w", key, 10, 12),
        lambda key: Limit.tokenbucket("b", key, 3, 10, refill=2),
    ],
    ids=["slidewindow", "tokenbucket"],
)
def test_the_scripts_answer_as_the_module(module_server: Server, key: str, build: Any) -> None:
    limit = build(key)
    steps = [(0, 2), (0, 1), (1, 9), (9_999, 2), (1, 2), (5_000, 3), (12_000, 1), (30_000, 4)]
    native = answers(module_server, "module", limit, steps)
    scripts = answers(module_server, "scripts", limit, steps)
    assert scripts == native
    assert [a for a, *_ in native[0]] != [True] * len(steps), "the steps reach a denial"
