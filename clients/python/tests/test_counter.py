"""RL.COUNTER: the fixed window that starts at a key's first hit (`limits`' own layout:
one counter at the key, TTL = window), in the kit and in the `limits` storage.

Its window ends at the key's expiry on the server clock, which the module compares with
NOW, so the clocks here start at the real time instead of T0."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any, List, Tuple

import pytest
from limits import parse
from limits.errors import ConfigurationError
from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixedWindowRateLimiter
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter

import redis_rl.limits_storage  # noqa: F401  (registers redis+rl://)
from conftest import FakeClock, Server, free_port, limiter_calls
from redis_rl import AsyncRateLimiter, FailurePolicy, Limit, RateLimiter, connect, connect_async, ratelimit_headers
from redis_rl.limits import all_command, command

# How far the server's clock may run ahead of a NOW read just before a call: the
# expiry a write sets is the server's now plus the window.
SLACK_MS = 1000
# NOW half a second behind the server: the window's end is then reported 0.5 s to
# 0.5 s + SLACK_MS late, never early, so the rounded-up header seconds are fixed.
BEHIND_US = 500_000


@pytest.fixture
def real_clock() -> FakeClock:
    return FakeClock(int(time.time() * 1e6) - BEHIND_US)


def limiter(server: Server, clock: FakeClock, **options: Any) -> RateLimiter:
    return RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, **options)


def reply(d: Any) -> Tuple[bool, int, int]:
    return d.allowed, d.remaining, d.retry_after_ms


def test_command_and_validation() -> None:
    limit = Limit.counter("c", "k", 8, "1500ms")
    assert (limit.algorithm, limit.window_ms) == ("COUNTER", 1500)
    assert command(limit, 2, "spend", None) == ["RL.COUNTER", "k", 8, "1500ms", "COST", 2]
    assert command(Limit.counter("c", "k", 8, 60), 1, "peek", 5) == ["RL.COUNTER", "k", 8, "60", "NOW", 5, "PEEK"]
    assert all_command([limit, Limit.fixed("f", "j", 3, 10)], [1, 1], "spend", None) == [
        "RL.ALL", 2, "COUNTER", "k", 8, "1500ms", "FIXED", "j", 3, "10"]
    with pytest.raises(ValueError, match="limit must be from 1"):
        Limit.counter("c", "k", 0, 10)
    with pytest.raises(ValueError, match="window"):
        Limit.counter("c", "k", 1, "soon")
    with pytest.raises(ValueError, match="burst is a GCRA option"):
        Limit("c", "COUNTER", "k", 1, 1000, burst=2)
    counting = Limit.counter("c", "k", 8, 60, count_all=True, renew=True)
    assert command(counting, 2, "spend", None) == ["RL.COUNTER", "k", 8, "60", "COST", 2, "COUNTALL", "RENEW"]
    with pytest.raises(ValueError, match="count_all is a COUNTER option"):
        Limit("c", "FIXED", "k", 1, 1000, count_all=True)
    with pytest.raises(ValueError, match="renew is a COUNTER option"):
        Limit("c", "GCRA", "k", 1, 1000, renew=True)
    with pytest.raises(TypeError, match="count_all must be True or False"):
        Limit("c", "COUNTER", "k", 1, 1000, count_all=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="RL.COUNTER's alone"):
        all_command([counting, Limit.fixed("f", "j", 3, 10)], [1, 1], "spend", None)


def test_escalate_is_sent_and_refused_where_the_module_refuses_it() -> None:
    """ESCALATE goes last, as COUNTALL and RENEW; everything the module refuses about it
    is raised here, on a limiter whose every send would fail the test."""
    escalating = Limit.counter("e", "k", 8, 60, escalate=True)
    assert command(escalating, 2, "spend", None) == ["RL.COUNTER", "k", 8, "60", "COST", 2, "ESCALATE"]
    assert command(Limit.counter("e", "k", 8, 60, count_all=True, escalate=True), 1, "peek", 5) == [
        "RL.COUNTER", "k", 8, "60", "COUNTALL", "ESCALATE", "NOW", 5, "PEEK"]
    with pytest.raises(ValueError, match="e: renew and escalate exclude each other"):
        Limit.counter("e", "k", 8, 60, renew=True, escalate=True)
    with pytest.raises(ValueError, match="escalate is a COUNTER option"):
        Limit("e", "FIXED", "k", 1, 1000, escalate=True)
    with pytest.raises(TypeError, match="escalate must be True or False"):
        Limit.counter("e", "k", 8, 60, escalate="yes")  # type: ignore[arg-type]
    sent: List[Any] = []
    rl = RateLimiter(connect(f"redis://127.0.0.1:{free_port()}"), failure=FailurePolicy.OPEN,
                     on_failure=lambda e, c: sent.append(c))
    for limits in ([escalating], [Limit.fixed("f", "j", 3, 10), escalating]):
        with pytest.raises(ValueError, match="e: count_all, renew and escalate are RL.COUNTER's alone"):
            rl.check_all(limits)
    assert sent == []
    rl.check(escalating)  # alone it is sent (to a closed port: the policy's)
    assert sent == [["RL.COUNTER", "k", 8, "60", "ESCALATE"]]


def test_window_bound_is_the_algorithms() -> None:
    """RL.COUNTER's window may last 2^63 - 1 µs (it keeps only the key's TTL); every
    other algorithm's stays at ten years, and each error names its own bound."""
    longest = Limit.counter("c", "k", 1, "9223372036854775ms")
    assert (longest.window_ms, longest.window_arg) == (9_223_372_036_854_775, "9223372036854775ms")
    assert Limit.counter("c", "k", 1, timedelta(days=365 * 285_421)).window_arg == str(365 * 285_421 * 86_400)
    assert Limit("c", "COUNTER", "k", 1, 9_223_372_036_854_775).window_ms == 9_223_372_036_854_775
    past = r"from 1 ms to 9223372036854775 ms \(about 292,000 years\)"
    with pytest.raises(ValueError, match=r"window '9223372036854776ms' must be " + past):
        Limit.counter("c", "k", 1, "9223372036854776ms")
    with pytest.raises(ValueError, match="must be " + past):
        Limit.counter("c", "k", 1, 9_223_372_036_854_776)  # seconds
    with pytest.raises(ValueError, match=r"c: window must be " + past + ", not 9223372036854776 ms"):
        Limit("c", "COUNTER", "k", 1, 9_223_372_036_854_776)
    ten_years = r"from 1 ms to ten years \(315360000000 ms\)"
    with pytest.raises(ValueError, match=r"window '315360000001ms' must be " + ten_years):
        Limit.slidecount("s", "k", 1, "315360000001ms")
    with pytest.raises(ValueError, match="must be " + ten_years):
        Limit.fixed("f", "k", 1, "9223372036854775ms")
    with pytest.raises(ValueError, match=r"f: window must be " + ten_years + ", not 315360000001 ms"):
        Limit("f", "FIXED", "k", 1, 315_360_000_001)


def test_window_starts_at_the_first_hit(server: Server, real_clock: FakeClock, key: str) -> None:
    rl = limiter(server, real_clock)
    limit = Limit.counter("c", key, 8, 10)
    first = rl.check(limit)
    # A whole window from the first hit, at the key itself: no clock boundary, no `:<n>`.
    assert (reply(first), first.reset_after_ms) == ((True, 7, 0), 10000)
    assert ratelimit_headers(first) == [("RateLimit-Policy", '"c";q=8;w=10'), ("RateLimit", '"c";r=7;t=10')]
    c = server.client()
    assert (c.get(key), c.keys(key + "*")) == ("1", [key])
    assert 10000 - SLACK_MS < c.pttl(key) <= 10000

    full = rl.check(limit, 7)
    assert reply(full) == (True, 0, 0)
    assert 10000 + BEHIND_US // 1000 <= full.reset_after_ms <= 10000 + BEHIND_US // 1000 + SLACK_MS
    assert c.get(key) == "8"

    real_clock.advance_ms(4000)
    denied = rl.check(limit)
    assert (denied.allowed, denied.remaining) == (False, 0)
    assert denied.retry_after_ms == denied.reset_after_ms
    assert 6500 <= denied.retry_after_ms <= 6500 + SLACK_MS
    assert ratelimit_headers(denied) == [
        ("RateLimit-Policy", '"c";q=8;w=10'), ("RateLimit", '"c";r=0;t=7'), ("Retry-After", "7")]
    assert c.get(key) == "8"  # a denial spends nothing
    assert rl.check(limit, 9).never

    # NOW past the key's expiry: that window ended, the next hit starts a new one.
    real_clock.advance_ms(6500 + SLACK_MS)
    again = rl.check(limit, 2)
    assert (reply(again), again.reset_after_ms) == ((True, 6, 0), 10000)
    assert c.get(key) == "2"


def test_escalate_doubles_the_ttl_on_each_denial(server: Server, real_clock: FakeClock, key: str) -> None:
    """@fastify/rate-limit's exponential backoff: every call counts, and a denial sets
    the counter's TTL to window × 2^(count − limit − 1), the count being the one after
    it. The TTL is set from the server's clock (PTTL reads it); the reply is exact."""
    rl = limiter(server, real_clock)
    limit = Limit.counter("esc", key, 2, 10, escalate=True)
    c = server.client()
    assert [reply(rl.check(limit)) for _ in range(2)] == [(True, 1, 0), (True, 0, 0)]
    for count, cost, ttl in ((3, 1, 10000), (4, 1, 20000), (5, 1, 40000), (7, 2, 160000)):
        denied = rl.check(limit, cost)
        assert (denied.allowed, denied.retry_after_ms, denied.reset_after_ms) == (False, ttl, ttl), count
        assert ttl - SLACK_MS < c.pttl(key) <= ttl, (count, c.pttl(key))
        assert c.get(key) == str(count)  # the denial counted
    # PEEK: the next doubling, nothing written.
    peek = rl.peek(limit)
    assert (peek.allowed, peek.retry_after_ms) == (False, 320000)
    assert c.get(key) == "7" and 160000 - SLACK_MS < c.pttl(key) <= 160000
    # NOW past the key's expiry: a new window starts, a full window long.
    real_clock.advance_ms(160000 + SLACK_MS)
    again = rl.check(limit)
    assert (reply(again), again.reset_after_ms) == ((True, 1, 0), 10000)
    assert c.get(key) == "1"


def test_a_counting_counter_is_never_answered_by_the_deny_cache(server: Server, real_clock: FakeClock, key: str) -> None:
    """With count_all or escalate the server counts every denial (and escalate doubles the
    wait on each), so the deny cache never answers for such a counter: each call reaches
    Redis, as the other kits do."""
    rl = limiter(server, real_clock, deny_cache=True)
    limit = Limit.counter("e", key, 1, 10, escalate=True)
    seen = [rl.check(limit) for _ in range(3)]
    assert [(d.allowed, d.retry_after_ms, d.cached) for d in seen] == [(True, 0, False), (False, 10000, False), (False, 20000, False)]
    assert server.client().get(key) == "3"
    counting = Limit.counter("a", key + ":a", 1, 10, count_all=True)
    seen = [rl.check(counting) for _ in range(3)]
    assert [d.cached for d in seen] == [False, False, False] and server.client().get(key + ":a") == "3"
    plain = Limit.counter("p", key + ":p", 1, 10)
    assert [rl.check(plain).cached for _ in range(3)] == [False, False, True]


def test_a_counter_window_of_292000_years(server: Server, real_clock: FakeClock, key: str) -> None:
    """The longest counter window is accepted by the module and the scripts, alone and in
    RL.ALL (the scripts' replies past 2^53 ms are doubles: within 2 ms)."""
    rl = limiter(server, real_clock)
    longest = Limit.counter("long", key + ":l", 1, "9223372036854775ms")
    first = rl.check(longest)
    assert first.allowed and abs(first.reset_after_ms - 9_223_372_036_854_775) <= 2, first
    c = server.client()
    assert 9_223_372_036_854_775 - SLACK_MS < c.pttl(longest.key) <= 9_223_372_036_854_775 + 2
    denied = rl.check(longest)
    assert not denied.allowed and denied.retry_after_ms > 9_223_372_036_854_775 - SLACK_MS
    both = rl.check_all([Limit.counter("c", key + ":a", 1, "9223372036854775ms"), Limit.fixed("f", key + ":f", 1, 60)])
    assert both.allowed and [p.allowed for p in both.parts] == [True, True]
    assert 9_223_372_036_854_775 - SLACK_MS < c.pttl(key + ":a")


def test_in_rl_all(server: Server, real_clock: FakeClock, key: str) -> None:
    rl = limiter(server, real_clock)
    counter, fixed = Limit.counter("c", key + ":c", 2, 60), Limit.fixed("f", key + ":f", 5, 60)
    results = [rl.check_all([counter, fixed]) for _ in range(3)]
    assert [(d.allowed, [p.remaining for p in d.parts]) for d in results] == [
        (True, [1, 4]), (True, [0, 3]), (False, [0, 2])]  # RL.ALL's denial: what each would leave
    assert [p.limit.name for p in results[-1].parts if not p.allowed] == ["c"]
    assert 60000 - SLACK_MS < results[-1].retry_after_ms <= 60000 + BEHIND_US // 1000 + SLACK_MS
    c = server.client()
    assert c.get(key + ":c") == "2" and 60000 - SLACK_MS < c.pttl(key + ":c") <= 60000


def test_the_scripts_answer_it_where_the_module_is(module_server: Server, real_clock: FakeClock, key: str) -> None:
    """backend=scripts sends counter.lua (its keys: the key itself), the module's answers."""
    c = module_server.client()
    answers: List[Any] = []
    for backend in ("module", "scripts"):
        rl = limiter(module_server, real_clock, backend=backend)
        limit = Limit.counter("c", f"{key}:{backend}", 2, 60)
        c.config_resetstat()
        answers.append([(d.allowed, d.remaining, d.retry_after_ms > 60000) for d in (rl.check(limit) for _ in range(3))])
        assert limiter_calls(c) == ({"rl.counter": 3} if backend == "module" else {"script": 3})
        assert c.get(limit.key) == "2" and 60000 - SLACK_MS < c.pttl(limit.key) <= 60000
    assert answers[0] == answers[1] == [(True, 1, False), (True, 0, False), (False, 0, True)]


def test_the_scripts_escalate_as_the_module(module_server: Server, real_clock: FakeClock, key: str) -> None:
    c = module_server.client()
    answers: List[Any] = []
    for backend in ("module", "scripts"):
        rl = limiter(module_server, real_clock, backend=backend)
        limit = Limit.counter("e", f"{key}:{backend}", 2, 10, escalate=True)
        c.config_resetstat()
        answers.append([(d.allowed, d.remaining, d.retry_after_ms) for d in (rl.check(limit) for _ in range(5))])
        assert limiter_calls(c) == ({"rl.counter": 5} if backend == "module" else {"script": 5})
        assert c.get(limit.key) == "5" and 40000 - SLACK_MS < c.pttl(limit.key) <= 40000
    assert answers[0] == answers[1] == [(True, 1, 0), (True, 0, 0), (False, 0, 10000), (False, 0, 20000), (False, 0, 40000)]


def test_asyncio(server: Server, real_clock: FakeClock, key: str) -> None:
    async def run() -> List[Any]:
        rl = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=real_clock)
        limit = Limit.counter("c", key, 2, 30)
        out = [await rl.check(limit) for _ in range(3)]
        out.append(await rl.check_all([limit]))
        return out

    first, second, denied, in_all = asyncio.run(run())
    assert [reply(d) for d in (first, second)] == [(True, 1, 0), (True, 0, 0)]
    assert (denied.allowed, in_all.allowed) == (False, False)
    assert 30000 < denied.retry_after_ms <= 30000 + BEHIND_US // 1000 + SLACK_MS
    assert server.client().get(key) == "2"


def test_asyncio_escalate(server: Server, real_clock: FakeClock, key: str) -> None:
    async def run() -> List[Any]:
        rl = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.CLOSED, clock=real_clock)
        limit = Limit.counter("e", key, 1, 10, escalate=True)
        out = [await rl.check(limit) for _ in range(3)]
        with pytest.raises(ValueError, match="RL.COUNTER's alone"):
            await rl.check_all([limit])
        return out

    assert [(d.allowed, d.retry_after_ms) for d in asyncio.run(run())] == [(True, 0), (False, 10000), (False, 20000)]
    assert server.client().get(key) == "3" and 20000 - SLACK_MS < server.client().pttl(key) <= 20000


# The `limits` storage: algorithm=counter is the library's own fixed window.

def stock_and_ours(server: Server, how: str) -> Tuple[Any, Any]:
    stock = storage_from_string(server.url)
    if how == "uri":
        ours = storage_from_string(server.url.replace("redis://", "redis+rl://") + "?algorithm=counter")
    else:
        ours = storage_from_string(server.url.replace("redis://", "redis+rl://"), algorithm="counter")
    return stock, ours


@pytest.mark.parametrize("how", ["uri", "option"])
def test_storage_reports_what_the_stock_redis_storage_does(server: Server, key: str, how: str) -> None:
    stock, ours = stock_and_ours(server, how)
    item = parse("3/hour")  # an hour: a window on the clock's hours would end elsewhere
    name = f"stock-vs-ours-{how}"
    stock_hits = [stock.incr(item.key_for(name), item.get_expiry(), 1) for _ in range(4)]
    our_hits = [ours.incr(item.key_for(name), item.get_expiry(), 1) for _ in range(4)]
    # The same counts: both count the denied 4th hit (RL.COUNTER COUNTALL), and `get`
    # reads the counter, past the limit.
    assert stock_hits == our_hits == [1, 2, 3, 4]
    assert stock.get(item.key_for(name)) == ours.get(item.key_for(name)) == 4
    now = time.time()
    # The window ends an hour after the first hit in both (stock reads whole-second TTLs).
    assert abs(stock.get_expiry(item.key_for(name)) - (now + 3600)) <= 1.5
    assert abs(ours.get_expiry(item.key_for(name)) - (now + 3600)) <= 1.5
    # Our counter is one key holding the count, as the stock one, under our prefix.
    c = server.client()
    [raw] = c.keys(f"rl:limits:*{name}*")
    assert raw.endswith(":counter:3/1/hour") and c.get(raw) == "4" and 3590_000 < c.pttl(raw) <= 3600_000

    ours.clear(item.key_for(name))
    assert ours.get(item.key_for(name)) == 0 and abs(ours.get_expiry(item.key_for(name)) - time.time()) < 1


def test_fixed_window_strategy_on_it(server: Server, key: str) -> None:
    """limits' FixedWindowRateLimiter, stock and ours: the same answers and stats."""
    stock, ours = stock_and_ours(server, "uri")
    item = parse("2/minute")
    results = []
    for storage in (stock, ours):
        strategy = FixedWindowRateLimiter(storage)
        hits = [strategy.hit(item, key) for _ in range(3)]
        stats = strategy.get_window_stats(item, key)
        results.append((hits, stats.remaining, round(stats.reset_time - time.time())))
    assert results[0] == results[1] == ([True, True, False], 0, 60)


def test_fixed_window_strategy_on_limits_aio(server: Server, key: str) -> None:
    async def run() -> Tuple[List[bool], Any]:
        storage = storage_from_string(server.url.replace("redis://", "async+redis+rl://") + "?algorithm=counter")
        strategy = AsyncFixedWindowRateLimiter(storage)
        item = parse("2/minute")
        hits = [await strategy.hit(item, key) for _ in range(3)]
        return hits, await strategy.get_window_stats(item, key)

    hits, stats = asyncio.run(run())
    assert (hits, stats.remaining, round(stats.reset_time - time.time())) == ([True, True, False], 0, 60)
    # The denied third hit is counted, as RedisStorage's INCRBY counts it.
    assert [server.client().get(k) for k in server.client().keys(f"rl:limits:*{key}*:counter:*")] == ["3"]


@pytest.mark.parametrize("run", ["sync", "aio"])
def test_elastic_expiry_counts_every_hit_and_moves_the_end(server: Server, key: str, run: str) -> None:
    """fixed-window-elastic-expiry on algorithm=counter: every hit, denied ones too, is
    counted (COUNTALL) and sets the window's end back to a whole window away (RENEW), so
    a client that keeps calling stays limited. The window's end is the key's expiry on
    the server clock: the test shortens it in Redis rather than wait."""
    scheme = "redis+rl://" if run == "sync" else "async+redis+rl://"
    ours = storage_from_string(server.url.replace("redis://", scheme) + "?algorithm=counter")
    name = f"LIMITER/{key}/1/1/minute"
    c = server.client()
    raw = f"rl:limits:{{LIMITER/{key}}}:counter:1/1/minute"

    async def call(result: Any) -> Any:
        return await result if run == "aio" else result

    async def steps() -> List[Tuple[int, int, int]]:
        seen = []
        for _ in range(3):
            hit = await call(ours.incr(name, 60, elastic_expiry=True))
            seen.append((hit, await call(ours.get(name)), c.pttl(raw)))
            c.pexpire(raw, 5000)  # as if 55 s had passed since this hit
        return seen

    seen = asyncio.run(steps())
    assert [(hit, count) for hit, count, _ in seen] == [(1, 1), (2, 2), (2, 3)]
    # Each hit, the denied ones too, set the end a whole minute after itself.
    assert all(60_000 - SLACK_MS < ttl <= 60_000 for _, _, ttl in seen), seen
    # Elastic expiry on another algorithm is refused, naming algorithm=counter.
    other = storage_from_string(server.url.replace("redis://", "redis+rl://") + "?algorithm=slidecount")
    with pytest.raises(NotImplementedError, match="needs algorithm=counter"):
        other.incr(name, 60, elastic_expiry=True)


def test_unknown_algorithm_names_counter(server: Server) -> None:
    with pytest.raises(ConfigurationError, match="'counter'"):
        storage_from_string(server.url.replace("redis://", "redis+rl://") + "?algorithm=count")

