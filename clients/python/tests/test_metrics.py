"""The kit's metrics (docs/metrics.md), scraped from a real prometheus_client registry's
text after known sequences of calls on a real server: exact counts per outcome, one
latency per call that reached for Redis."""

from __future__ import annotations

import asyncio
import inspect
import re
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any, Dict, List

import prometheus_client
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import BACKEND as B
from conftest import ON_MODULE
from conftest import KIT_DIR, SECRET, FakeClock, Server, free_port, start_server
from test_examples import run
from redis_rl import (
    AsyncRateLimiter,
    CommandError,
    FailurePolicy,
    Limit,
    RateLimiter,
    RateLimitMiddleware,
    WSGIRateLimitMiddleware,
    connect,
    connect_async,
)
from redis_rl import metrics as rl_metrics
from redis_rl.metrics import BACKENDS, BUCKETS, OUTCOMES, shadowing

DOC = (KIT_DIR / "../../docs/metrics.md").resolve()


def quiet(error: BaseException, command: Any) -> None:
    """on_failure for the tests that fail on purpose."""


def block(lang: str) -> List[str]:
    """The lines of docs/metrics.md's ```<lang> block."""
    found = re.search(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"no ```{lang} block in {DOC}"
    return [line.strip() for line in found.group(1).strip().splitlines()]


def scrape(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def samples(text: str, name: str) -> List[Any]:
    """The samples called `name` in the exposition, read back by prometheus_client's parser."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def decisions(text: str) -> Dict[tuple, float]:
    """(limit, outcome, backend) -> count, from the exposition."""
    found = {}
    for s in samples(text, "redis_rl_decisions_total"):
        assert set(s.labels) == {"limit", "outcome", "backend"}, s
        found[s.labels["limit"], s.labels["outcome"], s.labels["backend"]] = s.value
    return found


def calls(text: str) -> Dict[str, float]:
    """limit -> the histogram's _count."""
    return {s.labels["limit"]: s.value for s in samples(text, "redis_rl_call_duration_seconds_count")}


def buckets(text: str, limit: str) -> List[tuple]:
    """(le, count) of one limit's histogram, in exposition order."""
    return [(s.labels["le"], s.value) for s in samples(text, "redis_rl_call_duration_seconds_bucket")
            if s.labels["limit"] == limit]


async def done(value: Any) -> Any:
    """The sync and asyncio limiters run one scenario: await what needs awaiting."""
    return await value if inspect.isawaitable(value) else value


def limiters(kind: str, url: str, **options: Any) -> Any:
    options.setdefault("pseudonym_secret", SECRET)  # the scripts backend hashes in the kit
    if kind == "sync":
        return RateLimiter(connect(url), **options)
    return AsyncRateLimiter(connect_async(url), **options)


# What the scenario below leaves in the registry, on a module-enabled server.
EXPECTED = {
    ("api", "allowed", B): 3,  # 2, then 1 more after the window
    ("api", "denied", B): 1,
    ("api", "cache_denied", B): 1,  # the cache answered a spend and a peek: only the spend counts
    ("shadowed", "allowed", B): 1,
    ("shadowed", "shadow_denied", B): 1,
    ("shadowed", "denied", B): 1,  # outside shadowing(): enforced again
    ("a", "allowed", B): 1,  # RL.ALL: once per limit it names
    ("b", "allowed", B): 1,
    ("a", "denied", B): 1,  # a denies, and b counts the call's outcome too
    ("b", "denied", B): 1,
    ("x", "allowed", B): 1,  # check_many: one decision per limit
    ("y", "allowed", B): 1,
    ("throttle:1/60s", "allowed", B): 1,
    ("throttle:1/60s", "denied", B): 1,
    ("api", "failure_open", "module"): 1,  # nothing listens: the label is the configured backend
    ("api", "failure_closed", B): 1,  # the server went away: the label is the backend last used
    ("gone", "allowed", B): 1,
    ("gone", "failure_closed", B): 1,
}
# Every decision but the deny-cache hits made one call.
CALLS = {"api": 6, "shadowed": 3, "a": 2, "b": 2, "x": 1, "y": 1, "throttle:1/60s": 2, "gone": 2}


async def scenario(kind: str, server: Server, clock: FakeClock, key: str, registry: CollectorRegistry) -> None:
    rl = limiters(kind, server.url, failure=FailurePolicy.OPEN, clock=clock, deny_cache=True, metrics=registry)
    api = Limit.fixed("api", f"{key}:api", 2, 60)
    for _ in range(3):
        await done(rl.check(api))  # allowed, allowed, denied (and remembered)
    assert (await done(rl.check(api))).cached  # cache_denied: no call
    assert (await done(rl.peek(api))).cached  # a peek is not a decision, cached or not
    clock.advance_ms(60_000)  # the window and the cached denial are over
    assert (await done(rl.check(api))).allowed

    shadowed = Limit.fixed("shadowed", f"{key}:shadowed", 1, 60)
    await done(rl.check(shadowed))
    with shadowing():
        assert not (await done(rl.check(shadowed, cost=2))).allowed  # shadow_denied; the decision is unchanged
    await done(rl.check(shadowed, cost=3))  # denied (another cost: not the cached entry)

    a, b = Limit.fixed("a", f"{key}:a", 1, 60), Limit.slidelog("b", f"{key}:b", 5, 60)
    assert (await done(rl.check_all([a, b]))).allowed
    assert not (await done(rl.check_all([a, b], cost=[1, 2]))).allowed

    await done(rl.check_many([Limit.fixed("x", f"{key}:x", 5, 60), Limit.gcra("y", f"{key}:y", 5, 60)]))
    assert (await done(rl.throttle(f"{key}:t", 0, 1, 60))).allowed
    assert not (await done(rl.throttle(f"{key}:t", 0, 1, 60))).allowed
    await done(rl.throttle(f"{key}:t", 0, 1, 60, quantity=0))  # quantity 0 only reports

    # A caller's mistake is raised, and is no decision.
    server.client().set(f"{key}:wrongtype", "a string")
    with pytest.raises(CommandError):
        await done(rl.check(Limit.slidelog("mistake", f"{key}:wrongtype", 5, 60)))

    nobody = f"redis://127.0.0.1:{free_port()}"
    opened = limiters(kind, nobody, failure=FailurePolicy.OPEN, on_failure=quiet, metrics=registry)
    assert (await done(opened.check(api))).allowed

    going = start_server(module=ON_MODULE)
    try:
        closed = limiters(kind, going.url, failure=FailurePolicy.CLOSED, on_failure=quiet, metrics=registry)
        await done(closed.check(Limit.fixed("gone", f"{key}:gone", 5, 60)))
    finally:
        going.stop()
    assert not (await done(closed.check(Limit.fixed("gone", f"{key}:gone", 5, 60)))).allowed
    assert not (await done(closed.check(api))).allowed


@pytest.mark.parametrize("kind", ["sync", "asyncio"])
def test_a_known_sequence_gives_exact_counts(kind: str, server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    registry = CollectorRegistry()
    asyncio.run(scenario(kind, server, clock, key, registry))
    text = scrape(registry)

    assert decisions(text) == EXPECTED
    assert calls(text) == CALLS
    # _count is the decisions minus the deny-cache hits, limit by limit.
    for limit, count in calls(text).items():
        made = sum(n for (name, outcome, _), n in EXPECTED.items() if name == limit and outcome != "cache_denied")
        assert count == made, limit
    # Label values are limit names: no key, and nothing from the caller's mistake.
    assert key not in text and "mistake" not in text


def test_the_histogram_has_the_documented_buckets(server: Server, key: str) -> None:
    registry = CollectorRegistry()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, metrics=registry, pseudonym_secret=SECRET)
    started = time.perf_counter()
    for _ in range(3):
        rl.check(Limit.gcra("h", f"{key}:h", 10, 60))
    elapsed = time.perf_counter() - started
    text = scrape(registry)

    observed = buckets(text, "h")
    assert [float(le) for le, _ in observed[:-1]] == [float(b) for b in block("buckets")[0].split()]
    assert observed[-1] == ("+Inf", 3.0)
    counts = [n for _, n in observed]
    assert counts == sorted(counts)  # cumulative
    [total] = [s.value for s in samples(text, "redis_rl_call_duration_seconds_sum") if s.labels["limit"] == "h"]
    assert 0 < total <= elapsed  # in seconds, and only the calls' own time


def test_the_names_labels_and_types_are_docs_metrics_md(server: Server, key: str) -> None:
    registry = CollectorRegistry()
    RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, metrics=registry).check(
        Limit.fixed("n", f"{key}:n", 1, 60))
    documented = dict(line.split() for line in block("metrics"))
    labels = {words[0]: words[1:] for words in (line.split() for line in block("labels"))}

    types = re.findall(r"^# TYPE (\S+) (\S+)$", scrape(registry), re.M)
    # prometheus_client adds a `<name>_created` gauge to each counter and histogram
    # (unless PROMETHEUS_DISABLE_CREATED_SERIES is set).
    ours = [(name, kind) for name, kind in types if not name.endswith("_created")]
    assert ours == [("redis_rl_decisions_total", "counter"), ("redis_rl_call_duration_seconds", "histogram")]
    assert all(documented[name] == kind for name, kind in ours)
    assert {name for name, _ in types if name.endswith("_created")} <= {
        "redis_rl_decisions_created", "redis_rl_call_duration_seconds_created"}
    assert list(OUTCOMES) == labels["outcome"] and list(BACKENDS) == labels["backend"]
    assert list(BUCKETS) == [float(b) for b in block("buckets")[0].split()]


def test_only_admissions_are_counted(server: Server, clock: FakeClock, key: str, needs_all: None) -> None:
    registry = CollectorRegistry()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, clock=clock, metrics=registry, pseudonym_secret=SECRET)
    rate, slots = Limit.gcra("rate", f"{key}:r", 10, 60), Limit.concurrency("inflight", f"{key}:c", 2, 30)
    assert rl.acquire(slots, "req-1").allowed
    rl.heartbeat(slots, "req-1")
    rl.release(slots, "req-1")
    rl.check(slots, mode="peek")
    assert rl.check_all([rate, slots], lease="req-2").allowed
    rl.check_all([rate, slots], mode="refund", lease="req-2")
    rl.peek(rate)
    rl.refund(rate)
    rl.reset(rate)
    rl.pseudonym("192.0.2.1")
    text = scrape(registry)

    assert decisions(text) == {("inflight", "allowed", B): 2, ("rate", "allowed", B): 1}
    assert calls(text) == {"inflight": 2, "rate": 1}


def test_off_by_default_and_true_is_the_default_registry(server: Server, key: str) -> None:
    off = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN)
    off.check(Limit.fixed("quiet-limit", f"{key}:q", 1, 60))
    assert off.metrics is None
    assert "quiet-limit" not in scrape(prometheus_client.REGISTRY)

    on = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, metrics=True)
    again = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.OPEN, metrics=True)
    assert on.metrics is again.metrics  # one registration per registry, shared
    on.check(Limit.fixed("loud-limit", f"{key}:l", 1, 60))
    assert decisions(scrape(prometheus_client.REGISTRY))[("loud-limit", "allowed", B)] == 1

    with pytest.raises(TypeError, match="CollectorRegistry"):
        RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, metrics="yes")


def test_the_kit_works_without_prometheus_client_until_metrics_are_asked_for(server: Server, key: str) -> None:
    script = f"""
import sys
sys.modules["prometheus_client"] = None  # as if not installed
from redis_rl import FailurePolicy, Limit, RateLimiter, connect
rl = RateLimiter(connect({server.url!r}), failure=FailurePolicy.OPEN)
print(rl.check(Limit.fixed("x", {key + ':noprom'!r}, 1, 60)).allowed)
try:
    RateLimiter(connect({server.url!r}), failure=FailurePolicy.OPEN, metrics=True)
except ImportError as exc:
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "True", "redis-rl metrics need prometheus_client: pip install prometheus_client"]


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_the_asgi_middleware_counts_shadow_denied_only_in_shadow_mode(server: Server, clock: FakeClock, key: str) -> None:
    registry = CollectorRegistry()
    rl = AsyncRateLimiter(connect_async(server.url), failure=FailurePolicy.OPEN, clock=clock, metrics=registry, pseudonym_secret=SECRET)
    shadowed = RateLimitMiddleware(_ok, rl, [Limit.fixed("s", f"{key}:s", 1, 60)], shadow=True, on_shadow=lambda d, w: None)
    enforced = RateLimitMiddleware(_ok, rl, [Limit.fixed("e", f"{key}:e", 1, 60)])

    async def requests(app: Any, n: int) -> List[int]:
        statuses: List[int] = []

        async def send(message: Dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        async def receive() -> Dict[str, Any]:
            return {"type": "http.request", "body": b""}

        for _ in range(n):
            await app({"type": "http", "method": "GET", "path": "/", "headers": [], "client": ("192.0.2.7", 1)}, receive, send)
        return statuses

    async def both() -> List[List[int]]:
        # Concurrently, so a shadowed call's context cannot leak into the enforced one's.
        return list(await asyncio.gather(requests(shadowed, 3), requests(enforced, 3)))

    assert asyncio.run(both()) == [[200, 200, 200], [200, 429, 429]]
    assert decisions(scrape(registry)) == {
        ("s", "allowed", B): 1, ("s", "shadow_denied", B): 2,
        ("e", "allowed", B): 1, ("e", "denied", B): 2,
    }


def test_the_wsgi_middleware_and_the_limits_storages_count_shadow_denied(server: Server, clock: FakeClock, key: str) -> None:
    from limits import RateLimitItemPerHour, RateLimitItemPerMinute
    from limits.aio.strategies import FixedWindowRateLimiter as AsyncFixedWindowRateLimiter
    from limits.storage import storage_from_string
    from limits.strategies import FixedWindowRateLimiter

    import redis_rl.limits_storage  # noqa: F401  registers redis+rl://

    registry = CollectorRegistry()
    rl = RateLimiter(connect(server.url), failure=FailurePolicy.OPEN, clock=clock, metrics=registry, pseudonym_secret=SECRET)
    app = WSGIRateLimitMiddleware(lambda env, start: start("200 OK", []) or [b"ok"], rl,
                                  [Limit.fixed("w", f"{key}:w", 1, 60)], shadow=True, on_shadow=lambda d, w: None)
    statuses: List[str] = []
    for _ in range(2):
        app({"REMOTE_ADDR": "192.0.2.8", "PATH_INFO": "/"}, lambda status, headers, exc=None: statuses.append(status))
    assert statuses == ["200 OK", "200 OK"]

    storage = storage_from_string(server.url.replace("redis://", "redis+rl://") + "?shadow=true",
                                  metrics=registry, clock=clock, on_shadow=lambda d, w: None, key_prefix=key)
    limiter = FixedWindowRateLimiter(storage)
    item = RateLimitItemPerMinute(1)
    assert [limiter.hit(item, "user") for _ in range(2)] == [True, True]
    limiter.test(item, "user")  # a PEEK: not a decision

    hourly = RateLimitItemPerHour(1)
    on_aio = storage_from_string(server.url.replace("redis://", "async+redis+rl://") + "?shadow=true",
                                 metrics=registry, clock=clock, on_shadow=lambda d, w: None, key_prefix=key)

    async def hits() -> List[bool]:
        return [await AsyncFixedWindowRateLimiter(on_aio).hit(hourly, "user") for _ in range(2)]

    assert asyncio.run(hits()) == [True, True]

    assert decisions(scrape(registry)) == {
        ("w", "allowed", B): 1, ("w", "shadow_denied", B): 1,
        ("slidecount:1/60s", "allowed", B): 1, ("slidecount:1/60s", "shadow_denied", B): 1,
        ("slidecount:1/3600s", "allowed", B): 1, ("slidecount:1/3600s", "shadow_denied", B): 1,
    }


@pytest.mark.parametrize("kind", ["sync", "asyncio"])
def test_the_pyrate_bucket_counts_shadow_denied(kind: str, server: Server, clock: FakeClock, key: str) -> None:
    from pyrate_limiter import Duration, Rate, RateItem

    from redis_rl.pyrate import RedisRLBucket

    registry = CollectorRegistry()
    rl = limiters(kind, server.url, failure=FailurePolicy.OPEN, clock=clock, metrics=registry, pseudonym_secret=SECRET)
    bucket = RedisRLBucket([Rate(1, Duration.MINUTE)], rl, f"{key}:pyrate", shadow=True, item_log=False)

    async def puts() -> List[bool]:
        return [await done(bucket.put(RateItem("item", bucket.now()))) for _ in range(2)]

    assert asyncio.run(puts()) == [True, True]
    assert decisions(scrape(registry)) == {("1/60000ms", "allowed", B): 1, ("1/60000ms", "shadow_denied", B): 1}


def test_the_backend_label_is_what_the_limiter_says() -> None:
    assert rl_metrics.backend(SimpleNamespace()) == "module"  # a limiter that does not say
    assert rl_metrics.backend(SimpleNamespace(active_backend="scripts")) == "scripts"
    assert rl_metrics.backend(SimpleNamespace(active_backend="module")) == "module"


@pytest.mark.parametrize("example, limit", [("fastapi_metrics_app.py", "per-client"), ("flask_metrics_app.py", "slidecount:2/60s")])
def test_the_examples_serve_their_metrics(example: str, limit: str, server: Server) -> None:
    out = run(example, server).splitlines()
    assert out[0] == "200 200 429"
    assert out[1].startswith("200 text/plain; version=")
    assert sorted(out[2:]) == sorted([
        f'redis_rl_decisions_total{{backend="{B}",limit="{limit}",outcome="allowed"}} 2.0',
        f'redis_rl_decisions_total{{backend="{B}",limit="{limit}",outcome="denied"}} 1.0',
        f'redis_rl_call_duration_seconds_count{{limit="{limit}"}} 3.0',
    ])
