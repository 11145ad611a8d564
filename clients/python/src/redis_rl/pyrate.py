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

`count()`, `peek()` and `leak()` answer as pyrate's own RedisBucket does, from an item
log the bucket keeps at `<key>:items` (a sorted set, one member per unit, scored by the
item's timestamp): an admitted put writes it in a second, pipelined round trip, and it
expires two widest intervals after the last admission. A `RedisRLBucket` keeps it by
default; a `RedisRLBucketFactory` does not (`item_log=True` to turn it on): pyrate's
Limiter and fastapi-limiter never read a factory bucket's items, so the log would only
cost a round trip per request. Without it `count()` reports the units spent under the tightest rate (at most its limit),
`peek()` None, `leak()` 0.
"""

from __future__ import annotations

import os
import time
from typing import Any, Awaitable, List, Optional, Sequence, Union

from pyrate_limiter import AbstractBucket, BucketFactory, Rate, RateItem

import redis

from .client import AsyncRateLimiter, RateLimiter, logger
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
        item_log: bool = True,
    ) -> None:
        if not rates:
            raise ValueError("at least one rate")
        self.item_log = item_log
        self.log_key = f"{key}:items"  # the caller's hash tag in `key` keeps it in the bucket's slot
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

    @property
    def is_async(self) -> bool:  # type: ignore[override]
        """What pyrate 4's leaker reads: `leak()` is a coroutine only with the item log
        on an asyncio client (without the log it has nothing to do)."""
        return self.item_log and isinstance(self.limiter, AsyncRateLimiter)

    def now(self) -> int:
        """Unix ms, from the kit's clock when it has one (pyrate 4 stamps items with it)."""
        clock = self.limiter.clock
        return clock() // 1000 if clock else time.time_ns() // 1_000_000

    def put(self, item: RateItem) -> Union[bool, Awaitable[bool]]:
        _check_weight(item)
        if item.weight == 0:  # pyrate's buckets admit a weightless item and store nothing
            self.failing_rate, self._wait_ms, self._last_wait = None, 0, None
            if isinstance(self.limiter, AsyncRateLimiter):
                return _admitted()
            return True
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._put_async(item)
        with self.shadow.watching():
            decision = self.limiter.check_all(self._limits, item.weight)
        admitted = self._settle(item, decision)
        if admitted and self.item_log and decision.error is None:
            try:
                self._log(item).execute()
            except redis.RedisError as exc:  # the verdict stands; only the log missed it
                logger.warning("redis-rl: pyrate item log not written: %s: %s", type(exc).__name__, exc)
        return admitted

    async def _put_async(self, item: RateItem) -> bool:
        assert isinstance(self.limiter, AsyncRateLimiter)
        with self.shadow.watching():
            decision = await self.limiter.check_all(self._limits, item.weight)
        admitted = self._settle(item, decision)
        if admitted and self.item_log and decision.error is None:
            try:
                await self._log(item).execute()
            except redis.RedisError as exc:
                logger.warning("redis-rl: pyrate item log not written: %s: %s", type(exc).__name__, exc)
        return admitted

    def _log(self, item: RateItem) -> Any:
        """The pipeline that records an admitted item, one member per unit as pyrate's
        RedisBucket does (its `count()` is the number of units)."""
        token = os.urandom(6).hex()
        pipe = self.limiter.client.pipeline(transaction=False)
        pipe.zadd(self.log_key, {f"{item.name}:{token}:{i}": item.timestamp for i in range(item.weight)})
        # Two widest intervals: long enough that leak() still finds what it would drop,
        # bounded when nothing leaks (a factory's buckets are not leaked).
        pipe.pexpire(self.log_key, 2 * max(r.interval for r in self.rates))
        return pipe

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

    def leak(self, current_timestamp: Optional[int] = None) -> Union[int, Awaitable[int]]:
        """Drops logged items outside every rate's window (the module trims and expires
        its own keys); returns how many, as pyrate's buckets do."""
        if not self.item_log:
            return 0
        now = current_timestamp if current_timestamp is not None else self.now()
        return self.limiter.client.zremrangebyscore(self.log_key, 0, now - max(r.interval for r in self.rates))

    def flush(self) -> Union[None, Awaitable[None]]:
        self.failing_rate = None
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._flush_async()
        self.limiter.check_all(self._limits, mode="reset")
        self.limiter.client.delete(self.log_key)
        return None

    async def _flush_async(self) -> None:
        assert isinstance(self.limiter, AsyncRateLimiter)
        await self.limiter.check_all(self._limits, mode="reset")
        await self.limiter.client.delete(self.log_key)

    def count(self) -> Union[int, Awaitable[int]]:
        """Units in the item log (pyrate's count); without it, units spent under the
        tightest rate (0 when Redis cannot say)."""
        if self.item_log:
            return self.limiter.client.zcard(self.log_key)
        if isinstance(self.limiter, AsyncRateLimiter):
            return self._count_async()
        return _spent(self.limiter.check_all(self._limits, mode="peek"))

    async def _count_async(self) -> int:
        assert isinstance(self.limiter, AsyncRateLimiter)
        return _spent(await self.limiter.check_all(self._limits, mode="peek"))

    def peek(self, index: int) -> Union[Optional[RateItem], Awaitable[Optional[RateItem]]]:
        """The `index`-th newest logged item (0 the newest), None past the oldest or
        without the item log."""
        if not self.item_log:
            return None
        found = self.limiter.client.zrange(self.log_key, -1 - index, -1 - index, withscores=True)
        if isinstance(self.limiter, AsyncRateLimiter):
            return _peeked_async(found)
        return _peeked(found)


def _peeked(found: List[Any]) -> Optional[RateItem]:
    if not found:
        return None
    member, score = found[0]
    member = member.decode() if isinstance(member, bytes) else str(member)
    return RateItem(member.rsplit(":", 2)[0], int(score))


async def _admitted() -> bool:
    return True


async def _peeked_async(found: Awaitable[List[Any]]) -> Optional[RateItem]:
    return _peeked(await found)


def _check_weight(item: RateItem) -> None:
    """pyrate's weights are non-negative integers; a weight the module would refuse is
    raised here. Weight 0 is pyrate's "ask without taking", sent as a PEEK-free no-op."""
    weight = item.weight
    if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
        raise ValueError(f"pyrate item weight must be a non-negative integer, not {weight!r}")


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
        item_log: bool = False,
    ) -> None:
        _algorithm(algorithm)
        self.item_log = item_log
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
                             algorithm=self.algorithm, shadow=self.shadow, item_log=self.item_log)

    def schedule_leak(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to leak: the module trims and expires its own keys."""

