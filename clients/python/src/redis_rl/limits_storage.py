"""A `limits` storage on redis-rl, so Flask-Limiter and SlowAPI (and anything else
built on `limits` 4 or 5) switch by their storage URI:

    import redis_rl.limits_storage  # registers the schemes below
    RATELIMIT_STORAGE_URI = "redis+rl://localhost:6379"

Schemes: `redis+rl://`, `rediss+rl://` (TLS), `redis+rl+cluster://`, and each with
`async+` in front for `limits.aio`. Options, in the URI's query or as storage options:

- `algorithm`: what the fixed-window strategy (the libraries' default) runs on:
  `slidecount` (default), `slidelog`, `gcra`, `counter` (RL.COUNTER COUNTALL: `limits`'
  own fixed window, which starts at the first hit and ends when its key expires,
  boundary burst included, and counts every hit, denied ones too, as RedisStorage
  does; the fixed-window-elastic-expiry strategy adds RENEW, and needs it) or `fixed`
  (RL.FIXED: windows on clock boundaries). The
  moving-window strategy always runs on RL.SLIDELOG, the sliding-window-counter one
  on RL.SLIDECOUNT.
- `failure`: `open` or `closed` to let the kit's failure policy decide when Redis
  cannot (reported, never raised). Without it the error is reported and raised, so
  the library's own switch decides (Flask-Limiter's and SlowAPI's `swallow_errors`,
  `in_memory_fallback`).
- `shadow`: `true` to let would-be-limited requests through, reported and counted.
- `backend`: `auto` (default: the module's commands where the server has the module,
  else its Lua scripts), `module` or `scripts`.
- `key_prefix` (default `rl:limits`), and as storage options only: `clock` (unix µs,
  sent as NOW), `on_failure`, `on_shadow`, `metrics` (a prometheus_client registry, or
  `True` for its default one: see `redis_rl.metrics`), and a ready-made redis-py `client`.

The module decides. The strategies read a hit count, so an admitted hit reports
`limit - remaining` and a denied one `limit + 1`; the window stats come from a PEEK:
the count, and as reset time the module's retry time when the next request would be
denied, else its reset time. A request's keys (and the module's derived keys) share
the hash tag `{<namespace>/<identifiers>}`.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import redis
from limits.aio.storage import MovingWindowSupport as AsyncMovingWindowSupport
from limits.aio.storage import SlidingWindowCounterSupport as AsyncSlidingWindowCounterSupport
from limits.aio.storage import Storage as AsyncStorage
from limits.errors import ConfigurationError
from limits.limits import TIME_TYPES
from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage
from limits.storage.base import TimestampedSlidingWindow

from .backend import BACKENDS
from .client import AsyncRateLimiter, FailurePolicy, RateLimiter, logger
from .connect import connect, connect_async
from .limits import Decision, Limit
from .shadow import Shadow

ALGORITHMS = {
    "slidecount": "SLIDECOUNT", "slidelog": "SLIDELOG", "gcra": "GCRA", "counter": "COUNTER", "fixed": "FIXED",
}
DEFAULT_PREFIX = "rl:limits"
_OPTIONS = ("algorithm", "failure", "shadow", "key_prefix", "backend")
_TRUE = ("1", "true", "yes", "on")
STATS_AFTER_FAILURE_S = 1.0


class _Settings:
    """What the URI and the storage options say, shared by the sync and async storage."""

    def __init__(self, uri: str, options: Dict[str, Any]) -> None:
        parsed = urllib.parse.urlsplit(uri)
        scheme = parsed.scheme.removeprefix("async+")
        self.cluster = scheme.endswith("+cluster")
        base = scheme.removesuffix("+cluster").removesuffix("+rl")
        query = urllib.parse.parse_qsl(parsed.query, keep_blank_values=True)
        given = {k: v for k, v in query if k in _OPTIONS}
        rest = urllib.parse.urlencode([(k, v) for k, v in query if k not in _OPTIONS])
        self.url = urllib.parse.urlunsplit((base, parsed.netloc, parsed.path, rest, ""))
        for name in _OPTIONS:
            if name in options:
                given[name] = options.pop(name)

        algorithm = str(given.get("algorithm", "slidecount")).lower()
        if algorithm not in ALGORITHMS:
            raise ConfigurationError(f"redis+rl: algorithm must be one of {sorted(ALGORITHMS)}, not {algorithm!r}")
        self.algorithm = ALGORITHMS[algorithm]

        failure = given.get("failure")
        if failure is None or isinstance(failure, FailurePolicy):
            self.failure: Optional[FailurePolicy] = failure
        elif str(failure).lower() in ("open", "closed"):
            self.failure = FailurePolicy(str(failure).lower())
        else:
            raise ConfigurationError(f"redis+rl: failure must be 'open' or 'closed', not {failure!r}")

        shadow = given.get("shadow", False)
        enabled = shadow if isinstance(shadow, bool) else str(shadow).lower() in _TRUE
        self.shadow = Shadow(enabled, options.pop("on_shadow", None))
        self.prefix = str(given.get("key_prefix", DEFAULT_PREFIX))
        self.client = options.pop("client", None)
        self.limiter_options: Dict[str, Any] = {
            # Without a policy of ours, the limiter reports and we raise the error on.
            "failure": self.failure or FailurePolicy.OPEN,
            "on_failure": options.pop("on_failure", None) or (None if self.failure else _log_raised),
            "clock": options.pop("clock", None),
            "metrics": options.pop("metrics", None),
            "backend": _backend(given.get("backend", "auto")),
        }
        self.connect_options = options
        self._failed = threading.local()

    def now(self) -> float:
        clock = self.limiter_options["clock"]
        return clock() / 1e6 if clock else time.time()

    def failed(self, decision: Decision) -> Decision:
        """Remembers the last call's failure on this thread (a success forgets it)."""
        self._failed.at = (time.monotonic(), decision) if decision.error is not None else None
        return decision

    def recent_failure(self) -> Optional[Decision]:
        """The last failure on this thread if it is under a second old: the stats
        reads behind a library's headers answer from it rather than wait out another
        timeout each (the hits still ask Redis, so recovery is seen at once)."""
        at = getattr(self._failed, "at", None)
        if self.failure is None or at is None or time.monotonic() - at[0] > STATS_AFTER_FAILURE_S:
            return None
        return at[1]


def _backend(name: Any) -> str:
    if name not in BACKENDS:
        raise ConfigurationError(f"redis+rl: backend must be 'auto', 'module' or 'scripts', not {name!r}")
    return str(name)


def _log_raised(error: BaseException, command: Sequence[Any]) -> None:
    logger.warning(
        "redis-rl: %s failed, raised to the library (no failure= option): %s: %s",
        command[0] if command else "command",
        type(error).__name__,
        error,
    )


def _parse_key(key: str) -> Tuple[str, int, int]:
    """`<namespace>/<identifiers...>/<amount>/<multiples>/<granularity>` (limits'
    `key_for`) → (the part before the amount, amount, window in seconds)."""
    parts = key.rsplit("/", 3)
    try:
        head, amount, multiples, granularity = parts
        seconds = TIME_TYPES[granularity].seconds * int(multiples)
        limit = int(amount)
    except (ValueError, KeyError):
        raise ConfigurationError(
            f"redis+rl: {key!r} is not a key made by limits' RateLimitItem.key_for, so its limit is unknown"
        ) from None
    return head, limit, seconds


class _Keys:
    def __init__(self, settings: _Settings) -> None:
        self.s = settings

    def limit(
        self,
        algorithm: str,
        key: str,
        limit: Optional[int] = None,
        expiry: Optional[int] = None,
        count_all: bool = False,
        renew: bool = False,
    ) -> Limit:
        head, parsed_limit, seconds = _parse_key(key)
        suffix = key[len(head) + 1 :]
        amount = limit if limit is not None else parsed_limit
        window_s = expiry if expiry is not None else seconds
        return Limit(
            # Named by its rate: the metrics' `limit` label, bounded by the app's rules.
            f"{algorithm.lower()}:{amount}/{window_s}s",
            algorithm,  # type: ignore[arg-type]
            f"{self.s.prefix}:{{{head}}}:{algorithm.lower()}:{suffix}",
            amount,
            window_s * 1000,
            count_all=count_all,
            renew=renew,
        )

    def fixed(self, key: str, expiry: Optional[int] = None, elastic_expiry: bool = False) -> Limit:
        """The fixed-window strategies' limit: elastic expiry (every hit moves the end of
        the window to now + window) is RL.COUNTER's RENEW. On RL.COUNTER, `limits`' own
        fixed window, every hit is counted (COUNTALL), as RedisStorage's INCRBY counts it."""
        counter = self.s.algorithm == "COUNTER"
        if elastic_expiry and not counter:
            raise NotImplementedError(ELASTIC_REFUSED)
        return self.limit(self.s.algorithm, key, expiry=expiry, count_all=counter, renew=elastic_expiry)


def _count(decision: Decision, limit: Limit) -> int:
    """Units spent in the window, read from a PEEK of cost 1 (which reports what
    would remain *after* one more when it admits)."""
    if decision.error is not None:
        return limit.limit if not decision.allowed else 0
    if decision.allowed:
        return max(limit.limit - decision.remaining - 1, 0)
    return limit.limit - decision.remaining


def _counted(value: Any) -> int:
    """RL.COUNTER's counter as RedisStorage's `get` reads its key: every hit counted,
    past the limit too, where a PEEK's remaining stops at 0. The key expires with its
    window, so a missing key is 0."""
    return int(value) if value is not None else 0


def _until_s(decision: Decision, limit: Limit) -> float:
    """Seconds until the window stats' "reset": when a denied request may retry,
    else when the full budget is back."""
    if decision.error is not None:
        return 0.0 if decision.allowed else limit.window_ms / 1000
    if decision.allowed and _count(decision, limit) == 0:
        return 0.0  # nothing spent, nothing to wait for
    ms = decision.retry_after_ms if not decision.allowed else decision.reset_after_ms
    return max(ms, 0) / 1000


def _at(settings: _Settings, decision: Decision, limit: Limit) -> float:
    """The stats' reset as a unix time. The clock is read after the reply: the server
    decided no later, so the time is never early (a library that rounds it down, as
    Flask-Limiter's Retry-After does, would otherwise lose a whole second)."""
    return settings.now() + _until_s(decision, limit)


def _raised(settings: _Settings, decision: Decision) -> Decision:
    """Without a failure policy of ours, the library's own switch decides: raise."""
    if settings.failed(decision).error is not None and settings.failure is None:
        raise decision.error
    return decision


def _spent(settings: _Settings, decision: Decision, limit: Limit) -> bool:
    """The hit's answer: the module's, the failure policy's, or shadow mode's."""
    label = f"{limit.algorithm} {limit.key.rsplit(':', 1)[-1]}"  # e.g. "SLIDELOG 5/1/minute"
    return settings.shadow.passes(_raised(settings, decision), limit.key, label)


def _hit_count(settings: _Settings, decision: Decision, limit: Limit, amount: int) -> int:
    """`incr`'s answer, the counter the fixed-window strategy compares with the limit:
    admitted, the count after this hit (`limit - remaining`); denied, the count the
    window holds plus `amount` (at least the limit plus `amount` where the denial was
    counted, COUNTALL, whose remaining stops at 0), so it is above the limit exactly
    when the hit is denied."""
    if not _spent(settings, decision, limit):
        if decision.error is not None:
            return limit.limit + amount
        return limit.limit - decision.remaining + amount
    if decision.error is not None or not decision.allowed:  # the policy's or shadow's pass
        return limit.limit
    return limit.limit - decision.remaining


class _OnRedisRL:
    """What the sync and async storages share: the URI's settings, the kit's limiter
    on a client made from them, the key names, the shadow switch."""

    def _connect(self, uri: str, options: Dict[str, Any], connect_fn: Any, limiter_cls: Any) -> None:
        self.settings = _Settings(uri, dict(options))
        s = self.settings
        client = s.client or connect_fn(s.url, cluster=s.cluster, **s.connect_options)
        self.limiter = limiter_cls(client, **s.limiter_options)
        self.keys = _Keys(s)

    @property
    def shadow(self) -> Shadow:
        return self.settings.shadow

    @property
    def base_exceptions(self) -> Union[type, Tuple[type, ...]]:
        return redis.RedisError

    @property
    def storage(self) -> Any:
        """The redis-py client, as every stock `limits` Redis storage exposes it
        (Flask-Limiter's `flask limiter config` reads it)."""
        return self.limiter.client


class RedisRLStorage(_OnRedisRL, Storage, MovingWindowSupport, SlidingWindowCounterSupport, TimestampedSlidingWindow):
    """`limits` storage on redis-rl (sync): `redis+rl://`, `rediss+rl://`, `redis+rl+cluster://`."""

    STORAGE_SCHEME = ["redis+rl", "rediss+rl", "redis+rl+cluster"]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        self._connect(uri, options, connect, RateLimiter)
        super().__init__(uri, wrap_exceptions=wrap_exceptions)

    def _hit(self, limit: Limit, cost: int) -> bool:
        return _spent(self.settings, self._spend(limit, cost), limit)

    def _spend(self, limit: Limit, cost: int) -> Decision:
        with self.shadow.watching():
            return self.limiter.check(limit, cost)

    def _peek(self, limit: Limit) -> Decision:
        return self.settings.recent_failure() or _raised(self.settings, self.limiter.check(limit, 1, "peek"))

    # The fixed-window strategy: incr/get/get_expiry, on the `algorithm` option.
    def incr(self, key: str, expiry: int, amount: int = 1, elastic_expiry: bool = False) -> int:
        limit = self.keys.fixed(key, expiry, elastic_expiry)
        return _hit_count(self.settings, self._spend(limit, amount), limit, amount)

    def get(self, key: str) -> int:
        limit = self.keys.fixed(key)
        if limit.count_all and self.settings.recent_failure() is None:
            try:
                return _counted(self.limiter.client.get(limit.key))
            except redis.RedisError:
                pass  # the PEEK below meets the same failure and applies the policy
        return _count(self._peek(limit), limit)

    def get_expiry(self, key: str) -> float:
        limit = self.keys.fixed(key)
        return _at(self.settings, self._peek(limit), limit)

    def check(self) -> bool:
        try:
            return bool(self.limiter.client.ping())
        except Exception:
            return False

    def reset(self) -> Optional[int]:
        deleted = 0
        for name in self.limiter.client.scan_iter(match=f"{self.settings.prefix}:*", count=1000):
            deleted += int(self.limiter.client.delete(name))
        return deleted

    def clear(self, key: str) -> None:
        limits = [self.keys.limit(a, key) for a in _cleared(self.settings)]
        _raised(self.settings, self.limiter.check_all(limits, mode="reset"))

    # The moving-window strategy, on RL.SLIDELOG.
    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False  # never fits: stock answers without a call, and so do we
        return self._hit(self.keys.limit("SLIDELOG", key, limit, expiry), amount)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        lim = self.keys.limit("SLIDELOG", key, limit, expiry)
        decision = self._peek(lim)
        return _at(self.settings, decision, lim) - expiry, _count(decision, lim)

    # The sliding-window-counter strategy, on RL.SLIDECOUNT.
    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return self._hit(self.keys.limit("SLIDECOUNT", key, limit, expiry), amount)

    def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        lim = self.keys.limit("SLIDECOUNT", key, expiry=expiry)
        now = self.settings.now()
        if self.settings.recent_failure() is None:
            try:
                return _counters(lim, now, self.limiter.client.mget(_counter_keys(lim, now)))
            except redis.RedisError:
                pass  # the PEEK below meets the same failure and applies the policy
        return _sliding_window(self._peek(lim), lim, expiry)

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        _raised(self.settings, self.limiter.reset(self.keys.limit("SLIDECOUNT", key, expiry=expiry)))


class AsyncRedisRLStorage(
    _OnRedisRL, AsyncStorage, AsyncMovingWindowSupport, AsyncSlidingWindowCounterSupport, TimestampedSlidingWindow
):
    """The `limits.aio` counterpart: `async+redis+rl://`, `async+rediss+rl://`,
    `async+redis+rl+cluster://`, on redis-py's asyncio clients."""

    STORAGE_SCHEME = ["async+redis+rl", "async+rediss+rl", "async+redis+rl+cluster"]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options: Any) -> None:
        self._connect(uri, options, connect_async, AsyncRateLimiter)
        super().__init__(uri, wrap_exceptions=wrap_exceptions)

    async def _hit(self, limit: Limit, cost: int) -> bool:
        return _spent(self.settings, await self._spend(limit, cost), limit)

    async def _spend(self, limit: Limit, cost: int) -> Decision:
        with self.shadow.watching():
            return await self.limiter.check(limit, cost)

    async def _peek(self, limit: Limit) -> Decision:
        recent = self.settings.recent_failure()
        return recent or _raised(self.settings, await self.limiter.check(limit, 1, "peek"))

    async def incr(self, key: str, expiry: int, amount: int = 1, elastic_expiry: bool = False) -> int:
        limit = self.keys.fixed(key, expiry, elastic_expiry)
        return _hit_count(self.settings, await self._spend(limit, amount), limit, amount)

    async def get(self, key: str) -> int:
        limit = self.keys.fixed(key)
        if limit.count_all and self.settings.recent_failure() is None:
            try:
                await self.limiter._ready()
                return _counted(await self.limiter.client.get(limit.key))
            except redis.RedisError:
                pass
        return _count(await self._peek(limit), limit)

    async def get_expiry(self, key: str) -> float:
        limit = self.keys.fixed(key)
        return _at(self.settings, await self._peek(limit), limit)

    async def check(self) -> bool:
        try:
            return bool(await self.limiter.client.ping())
        except Exception:
            return False

    async def reset(self) -> Optional[int]:
        deleted = 0
        async for name in self.limiter.client.scan_iter(match=f"{self.settings.prefix}:*", count=1000):
            deleted += int(await self.limiter.client.delete(name))
        return deleted

    async def clear(self, key: str) -> None:
        limits = [self.keys.limit(a, key) for a in _cleared(self.settings)]
        _raised(self.settings, await self.limiter.check_all(limits, mode="reset"))

    async def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False  # never fits: stock answers without a call, and so do we
        return await self._hit(self.keys.limit("SLIDELOG", key, limit, expiry), amount)

    async def get_moving_window(self, key: str, limit: int, expiry: int) -> Tuple[float, int]:
        lim = self.keys.limit("SLIDELOG", key, limit, expiry)
        decision = await self._peek(lim)
        return _at(self.settings, decision, lim) - expiry, _count(decision, lim)

    async def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        return await self._hit(self.keys.limit("SLIDECOUNT", key, limit, expiry), amount)

    async def get_sliding_window(self, key: str, expiry: int) -> Tuple[int, float, int, float]:
        lim = self.keys.limit("SLIDECOUNT", key, expiry=expiry)
        now = self.settings.now()
        if self.settings.recent_failure() is None:
            try:
                await self.limiter._ready()
                return _counters(lim, now, await self.limiter.client.mget(_counter_keys(lim, now)))
            except redis.RedisError:
                pass
        return _sliding_window(await self._peek(lim), lim, expiry)

    async def clear_sliding_window(self, key: str, expiry: int) -> None:
        _raised(self.settings, await self.limiter.reset(self.keys.limit("SLIDECOUNT", key, expiry=expiry)))


ELASTIC_REFUSED = (
    "redis+rl: the fixed-window-elastic-expiry strategy counts every hit, denied ones included, "
    "and moves the window's end to now + window on each: that is RL.COUNTER's COUNTALL RENEW, "
    "so it needs algorithm=counter (the storage's other algorithms never count a denied hit "
    "nor move a window). Use algorithm=counter, or the fixed-window or moving-window strategy."
)


def _cleared(settings: _Settings) -> List[str]:
    # `clear(key)` serves the fixed-window and the moving-window strategies.
    return sorted({settings.algorithm, "SLIDELOG"})


def _counter_keys(limit: Limit, now: float) -> List[str]:
    """RL.SLIDECOUNT's two counters, `<key>:<i-1>` and `<key>:<i>` with i = floor(now /
    window): the layout of limits' own timestamped sliding windows, so the strategy's
    stats are read from the module's state (the hits are still the module's)."""
    index = int(now * 1000) // limit.window_ms
    return [f"{limit.key}:{index - 1}", f"{limit.key}:{index}"]


def _counters(limit: Limit, now: float, values: Sequence[Any]) -> Tuple[int, float, int, float]:
    """(previous count, its weight in seconds, current count, its ttl), as limits'
    timestamped sliding windows report them."""
    previous, current = (int(v) if v is not None else 0 for v in values)
    window = limit.window_ms / 1000
    into = (now * 1000 % limit.window_ms) / 1000  # seconds since the current window began
    previous_ttl = (window - into) if previous else 0.0
    return previous, previous_ttl, current, window - into + window


def _sliding_window(decision: Decision, limit: Limit, expiry: int) -> Tuple[int, float, int, float]:
    """The four numbers the sliding-window-counter strategy reads, chosen so that
    it derives the module's state: all of the count in the current window, the
    previous one empty. The strategy takes the reset modulo the window, so a
    module reset longer than the window is reported just under it."""
    until = min(_until_s(decision, limit), expiry - 0.001)
    return 0, 0.0, _count(decision, limit), until
