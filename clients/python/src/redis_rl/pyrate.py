"""pyrate-limiter buckets on redis-rl (pyrate-limiter 3.9 and 4), and so fastapi-limiter:

    from pyrate_limiter import Duration, Limiter, Rate
    from redis_rl import AsyncRateLimiter, FailurePolicy, connect_async
    from redis_rl.pyrate import RedisRLBucketFactory

    rl = AsyncRateLimiter(connect_async("redis://localhost:6379"), failure=FailurePolicy.OPEN)
    limiter = Limiter(RedisRLBucketFactory([Rate(5, Duration.SECOND), Rate(100, Duration.MINUTE)], rl))

`put` is one RL.ALL over the bucket's rates: all of them admit and spend, or none
does. The module decides on its own clock (or the kit's `clock=`, sent as NOW); the
item's timestamp, which pyrate takes from a clock of its own (monotonic in 4.x), is
not used. `algorithm` is `slidecount` (default), `slidelog`, `gcra` or `fixed`.
Failures go through the kit limiter's failure policy (pyrate has no switch of its own);
a failure-policy refusal reports `waiting() == -1`, so a blocking acquire gives up at
once rather than retrying against a Redis that is down.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, List, Optional, Sequence, Union

from pyrate_limiter import AbstractBucket, BucketFactory, Rate, RateItem

from .client import AsyncRateLimiter, RateLimiter
from .limits import Decision, Limit
from .shadow import Shadow

ALGORITHMS = {"slidecount": "SLIDECOUNT", "slidelog": "SLIDELOG", "gcra": "GCRA", "fixed": "FIXED"}
Kit = Union[RateLimiter, AsyncRateLimiter]


def _algorithm(name: str) -> str:
    try:
        return ALGORITHMS[name.lower()]
    except KeyError:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, not {name!r}") from None


class RedisRLBucket(AbstractBucket):
    """All items share `key` (like pyrate's own RedisBucket); a factory gives one key
    per item name. Sync on a `RateLimiter`, async on an `AsyncRateLimiter`."""

    def __init__(
        self,
        rates: List[Rate],
        limiter: Kit,
        key: str,
        *,
        algorithm: str = "slidecount",
        shadow: Union[Shadow, bool] = False,
    ) -> None:
        if not rates:
            raise ValueError("at least one rate")
        self.rates = rates  # pyrate 4 sorts and validates them here
        self.limiter = limiter
        self.key = key
        self.shadow = shadow if isinstance(shadow, Shadow) else Shadow(shadow)
        self.failing_rate: Optional[Rate] = None
        self._wait_ms = 0
        algo = _algorithm(algorithm)
        # One key per rate, all under the bucket's hash tag (the caller's `{...}` in `key`).
        self._limits = tuple(
            Limit(f"{r.limit}/{r.interval}ms", algo, f"{key}:{r.limit}/{r.interval}ms", r.limit, r.interval)  # type: ignore[arg-type]
            for r in self.rates
        )

    # What pyrate 4's leaker reads: `leak()` is sync (and has nothing to do), whatever the client.
    is_async = False

    def now(self) -> int:
        """Unix ms, from the kit's clock when it has one (pyrate 4 stamps items with it)."""
        clock = self.limiter.clock
        return clock() // 1000 if clock else time.time_ns() // 1_000_000

    def put(self, item: RateItem) -> Union[bool, Awaitable[bool]]:
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._put_async(item)
        return self._settle(item, self.limiter.check_all(self._limits, item.weight))

    async def _put_async(self, item: RateItem) -> bool:
        assert isinstance(self.limiter, AsyncRateLimiter)
        return self._settle(item, await self.limiter.check_all(self._limits, item.weight))

    def _settle(self, item: RateItem, decision: Decision) -> bool:
        admitted = self.shadow.passes(decision, self.key, ", ".join(limit.name for limit in self._limits))
        if admitted:
            self.failing_rate, self._wait_ms = None, 0
        else:
            self.failing_rate = self._binding_rate(decision)
            self._wait_ms = -1 if decision.error is not None else decision.retry_after_ms
        # pyrate 4 reads back the wait of the last put from `_last_wait`.
        self._last_wait = None if admitted or self._wait_ms < 0 else (item.weight, item.timestamp + self._wait_ms)
        return admitted

    def _binding_rate(self, decision: Decision) -> Rate:
        denying = [(p.retry_after_ms < 0, p.retry_after_ms, i) for i, p in enumerate(decision.parts) if not p.allowed]
        return self.rates[max(denying)[2]] if denying else self.rates[-1]

    def waiting(self, item: RateItem) -> int:  # type: ignore[override]
        """The module's retry time for the last denied put (-1: never, or Redis down)."""
        return 0 if self.failing_rate is None else self._wait_ms

    def leak(self, current_timestamp: Optional[int] = None) -> int:
        return 0  # the module trims and expires its own keys

    def flush(self) -> Union[None, Awaitable[None]]:
        self.failing_rate = None
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._flush_async()
        self.limiter.check_all(self._limits, mode="reset")
        return None

    async def _flush_async(self) -> None:
        assert isinstance(self.limiter, AsyncRateLimiter)
        await self.limiter.check_all(self._limits, mode="reset")

    def count(self) -> Union[int, Awaitable[int]]:
        """Units spent under the tightest rate (0 when Redis cannot say)."""
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._count_async()
        return _spent(self.limiter.check_all(self._limits, mode="peek"))

    async def _count_async(self) -> int:
        assert isinstance(self.limiter, AsyncRateLimiter)
        return _spent(await self.limiter.check_all(self._limits, mode="peek"))

    def peek(self, index: int) -> Optional[RateItem]:
        """None: the module keeps counts, not pyrate's items (and `waiting()` needs none)."""
        return None


def _spent(decision: Decision) -> int:
    if decision.error is not None or not decision.parts:
        return 0
    return max(
        (p.limit.limit - p.remaining - (1 if p.allowed else 0)) for p in decision.parts if p.limit is not None
    )


class RedisRLBucketFactory(BucketFactory):
    """One redis-rl bucket per item name, at `<prefix>:{<name>}:<rate>`, so each
    client's rates share a cluster slot. The buckets share one `shadow`."""

    def __init__(
        self,
        rates: Sequence[Rate],
        limiter: Kit,
        *,
        prefix: str = "rl:pyrate",
        algorithm: str = "slidecount",
        shadow: Union[Shadow, bool] = False,
    ) -> None:
        _algorithm(algorithm)
        self.rates = list(rates)
        self.limiter = limiter
        self.prefix = prefix
        self.algorithm = algorithm
        self.shadow = shadow if isinstance(shadow, Shadow) else Shadow(shadow)

    def wrap_item(self, name: str, weight: int = 1) -> RateItem:
        clock = self.limiter.clock
        now_ms = clock() // 1000 if clock else time.time_ns() // 1_000_000
        return RateItem(name, now_ms, weight=weight)

    def get(self, item: RateItem) -> RedisRLBucket:
        # A fresh bucket per call: it holds the last put's verdict for `waiting()`,
        # so concurrent acquires for one name must not share it.
        return RedisRLBucket(self.rates, self.limiter, f"{self.prefix}:{{{item.name}}}",
                             algorithm=self.algorithm, shadow=self.shadow)

    def schedule_leak(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to leak: the module trims and expires its own keys."""

