"""Decisions and call latency in prometheus_client, with the names, labels and buckets
every redis-rl kit uses (docs/metrics.md), so one dashboard serves them all.

Off unless asked: `RateLimiter(client, failure=..., metrics=registry)` records in that
`prometheus_client.CollectorRegistry`, `metrics=True` in prometheus_client's default
`REGISTRY`. prometheus_client is an optional dependency (`pip install prometheus_client`,
or the `metrics` extra): nothing here imports it until metrics are turned on.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional, Union

if TYPE_CHECKING:  # the limiter's own module imports this one
    from .client import _Call, _Core

DECISIONS = "redis_rl_decisions_total"
DURATION = "redis_rl_call_duration_seconds"
OUTCOMES = ("allowed", "denied", "shadow_denied", "failure_open", "failure_closed", "cache_denied")
BACKENDS = ("module", "scripts")
BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
"""Seconds: sub-millisecond calls on a local network, with a tail up to a 300 ms timeout."""

# Set while a caller that lets denials through (shadow mode) asks the limiter: its
# denials are then counted as shadow_denied. A context variable, so a limiter shared by
# a shadowed and an enforcing middleware, or by concurrent asyncio tasks, counts each
# call as its own caller meant it.
_shadowing: ContextVar[bool] = ContextVar("redis_rl_shadowing", default=False)


@contextlib.contextmanager
def shadowing() -> Iterator[None]:
    """Count the denials of the limiter calls made inside as `shadow_denied`: for code
    that lets denied requests through itself (the kit's middlewares and adapters do
    this in shadow mode)."""
    token = _shadowing.set(True)
    try:
        yield
    finally:
        _shadowing.reset(token)


def backend(limiter: Any) -> str:
    """The `backend` label: the backend that answered, or the one the limiter is
    configured for when nothing answered. A limiter that does not say is on the module."""
    name = getattr(limiter, "active_backend", "module")
    return name if name in BACKENDS else "module"


def outcome(result: Any) -> str:
    """The outcome of a Decision or a Throttle that Redis or the failure policy gave."""
    if result.error is not None:
        return "failure_open" if result.allowed else "failure_closed"
    if result.allowed:
        return "allowed"
    return "shadow_denied" if _shadowing.get() else "denied"


def counted(call: "_Call") -> bool:
    """Only admissions are decisions: a spend or an ACQUIRE. A PEEK, REFUND, RESET,
    RELEASE or HEARTBEAT belongs to a request already counted."""
    if call.mode != "spend":
        return False
    return not (call.args[0] == "RL.CONCURRENCY" and call.args[4] in ("RELEASE", "HEARTBEAT"))


class Metrics:
    """The two metrics, registered once per registry (limiters on one registry share
    them: prometheus_client refuses a name registered twice)."""

    _by_registry: "weakref.WeakKeyDictionary[Any, Metrics]" = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    @classmethod
    def of(cls, metrics: Union[bool, None, Any]) -> Optional["Metrics"]:
        """The limiter's `metrics=` option: None or False (off), True (the default
        REGISTRY) or a CollectorRegistry."""
        if metrics is None or metrics is False:
            return None
        try:
            import prometheus_client
        except ImportError:
            raise ImportError(
                "redis-rl metrics need prometheus_client: pip install prometheus_client"
            ) from None
        registry = prometheus_client.REGISTRY if metrics is True else metrics
        if not isinstance(registry, prometheus_client.CollectorRegistry):
            raise TypeError(f"metrics must be True or a prometheus_client.CollectorRegistry, not {metrics!r}")
        with cls._lock:
            found = cls._by_registry.get(registry)
            if found is None:
                found = cls._by_registry[registry] = cls(prometheus_client, registry)
            return found

    def __init__(self, prometheus_client: Any, registry: Any) -> None:
        self.decisions = prometheus_client.Counter(
            DECISIONS,
            "Rate-limit decisions by limit, outcome and backend.",
            ("limit", "outcome", "backend"),
            registry=registry,
        )
        self.duration = prometheus_client.Histogram(
            DURATION,
            "Wall time of each limiter call to Redis, in seconds.",
            ("limit",),
            buckets=BUCKETS,
            registry=registry,
        )

    def record(self, limiter: "_Core", names: Iterable[str], result: Any, took: Optional[float]) -> None:
        """One decision, once per limit it names; `took` is None when no call was made
        (a deny-cache hit)."""
        label = "cache_denied" if took is None else outcome(result)
        where = backend(limiter)
        for name in names:
            self.decisions.labels(name, label, where).inc()
            if took is not None:
                self.duration.labels(name).observe(took)

    def decided(self, limiter: "_Core", call: "_Call", decision: Any, took: Optional[float]) -> None:
        if counted(call):
            self.record(limiter, (limit.name for limit in call.limits), decision, took)

    def throttled(self, limiter: "_Core", args: Any, result: Any, took: float) -> None:
        # RL.THROTTLE has no named limit: it is named by its rate, a bounded label.
        # Quantity 0 only reports.
        count, period, quantity = args[3:6]
        if quantity != 0:
            self.record(limiter, (f"throttle:{count}/{period}s",), result, took)
