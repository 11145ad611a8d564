"""The limiter: typed calls, failure policy, cluster routing, the deny cache."""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from . import backend as scripts
from . import limits as wire
from .cache import DenyCache
from .limits import Decision, Limit, Mode, Throttle
from .metrics import Metrics
from .pseudonym import pseudonym as local_pseudonym

logger = logging.getLogger("redis_rl")

SyncClient = Union[redis.Redis, RedisCluster]
AsyncClient = Union[redis.asyncio.Redis, AsyncRedisCluster]
Clock = Callable[[], int]
"""Unix time in microseconds."""
FailureHandler = Callable[[BaseException, Sequence[Any]], None]
"""Called with the error and the command that failed."""

Costs = Union[int, Sequence[int]]


class FailurePolicy(enum.Enum):
    """What a check answers when Redis cannot: admit (OPEN) or refuse (CLOSED).

    There is no default on purpose: a limiter that fails open by accident is an
    outage waiting for a flood, one that fails closed by accident turns a Redis
    blip into one.
    """

    OPEN = "open"
    CLOSED = "closed"


class LimiterUnavailable(Exception):
    """Raised by `pseudonym()` when Redis cannot answer; `decision` is what the
    failure policy decided for the request that needed it (already reported)."""

    def __init__(self, decision: Decision) -> None:
        super().__init__(f"redis-rl unavailable: {decision.error}")
        self.decision = decision


class CommandError(ValueError):
    """Redis refused the call's arguments (an `ERR` reply): a caller's mistake, raised
    to the caller, never decided by the failure policy (which is for Redis being
    unreachable or failing)."""


class ModuleNotLoaded(CommandError):
    """The server does not know the RL.* commands: the module is not loaded there."""


class PseudonymSecretRequired(ValueError):
    """`pseudonym()` on the scripts backend without `pseudonym_secret`: Redis Lua has no
    SHA-256, so the kit computes RL.PSEUDONYM itself and needs the module's secret.
    Raised, not decided by the failure policy: it is a setup mistake, not an outage."""


# Error replies that mean the server cannot serve now (not that the call is wrong):
# those go to the failure policy.
_SERVER_STATES = frozenset(
    ("BUSY", "OOM", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK", "MISCONF",
     "NOREPLICAS", "LOADING", "READONLY", "UNBLOCKED", "NOSCRIPT", "EXECABORT")
)


def caller_error(error: BaseException, args: Sequence[Any]) -> Optional[CommandError]:
    """The error to raise when `error` is Redis refusing the call itself, else None."""
    if not isinstance(error, redis.ResponseError) or isinstance(
        error, (redis.exceptions.BusyLoadingError, redis.exceptions.ReadOnlyError)
    ):
        return None
    message = str(error)
    if message.split(" ", 1)[0] in _SERVER_STATES:
        return None
    command = str(args[0]) if args else "the command"
    if message.lower().startswith("unknown command"):
        return ModuleNotLoaded(
            f"{command}: unknown command on this server: the redis-rl module is not loaded there. "
            "Load it with `loadmodule /path/to/libredis_rl.so` in redis.conf, "
            "`redis-server --loadmodule /path/to/libredis_rl.so`, or MODULE LOAD at runtime "
            f"(the server said: {message})"
        )
    return CommandError(f"{command} refused: {message}")


def _log_failure(policy: FailurePolicy) -> FailureHandler:
    def report(error: BaseException, command: Sequence[Any]) -> None:
        logger.warning(
            "redis-rl: %s failed, failing %s: %s: %s",
            command[0] if command else "command",
            policy.value,
            type(error).__name__,
            error,
        )

    return report


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


def _monotonic_us() -> int:
    return time.monotonic_ns() // 1000


@dataclass(frozen=True)
class _Call:
    """One command to send, and what is needed to read its answer."""

    args: List[Any]
    limits: Tuple[Limit, ...]
    costs: Tuple[int, ...]
    mode: Mode
    many: bool  # RL.ALL
    instant: int  # on the deny cache's timeline
    # A lease's denial can end early (another request releases), and a counter that
    # counts its denials (count_all, escalate) must see each one, so the deny cache
    # answers for neither.
    cacheable: bool = True

    @property
    def entry(self) -> Tuple[Tuple[Limit, ...], Tuple[int, ...], bool]:
        return (self.limits, self.costs, self.many)

    @property
    def keys(self) -> List[str]:
        return [limit.key for limit in self.limits]


# What `_wire` answers for RL.PSEUDONYM on the scripts: computed here, not sent.
_LOCAL: List[Any] = []


class _Core:
    """Everything but the I/O, shared by the sync and the asyncio limiter."""

    def __init__(
        self,
        *,
        failure: FailurePolicy,
        on_failure: Optional[FailureHandler] = None,
        clock: Optional[Clock] = None,
        deny_cache: Union[DenyCache, bool] = False,
        metrics: Any = None,
        backend: str = "auto",
        pseudonym_secret: Optional[Union[str, bytes]] = None,
    ) -> None:
        if not isinstance(failure, FailurePolicy):
            raise TypeError("failure must be FailurePolicy.OPEN or FailurePolicy.CLOSED")
        self.backend = scripts.check_backend(backend)
        self.active_backend = "scripts" if backend == "scripts" else "module"
        """What answers now, 'module' or 'scripts' (with auto: the last answer's; 'module'
        before the first)."""
        self._recheck_at = 0  # auto on the scripts: when (now_us) to ask the module again
        self._secret = pseudonym_secret
        self.failure = failure
        self.on_failure = on_failure or _log_failure(failure)
        self.clock = clock
        if deny_cache is True:
            deny_cache = DenyCache()
        # Not `or None`: an empty DenyCache is falsy (it has a length).
        self.deny_cache: Optional[DenyCache] = deny_cache if isinstance(deny_cache, DenyCache) else None
        self.metrics = Metrics.of(metrics)

    def now_us(self) -> int:
        """The wall-clock time this limiter works with (the injected clock, if any)."""
        return self.clock() if self.clock else _wall_clock_us()

    def _plan(
        self, limits: Sequence[Limit], costs: Costs, mode: Mode, many: bool, lease: Optional[str] = None
    ) -> _Call:
        limits = tuple(limits)
        if not limits:
            raise ValueError("at least one limit")
        # One cost for all, or one per limit: anything that is not a list is one cost
        # (checked below, so a float is named as such, not "not iterable").
        cost_list = tuple(costs) if isinstance(costs, (list, tuple)) else (costs,) * len(limits)
        if len(cost_list) != len(limits):
            raise ValueError("one cost per limit")
        if len(limits) > wire.MAX_LIMITS:
            raise ValueError(f"RL.ALL takes at most {wire.MAX_LIMITS} limits, not {len(limits)}")
        if mode == "spend":  # PEEK, REFUND and RESET send the cost as given only when it matters
            cost_list = tuple(wire.check_cost(limit, cost) for limit, cost in zip(limits, cost_list))
        else:
            cost_list = tuple(
                1 if limit.algorithm == "CONCURRENCY" else wire.check_cost(limit, cost)
                for limit, cost in zip(limits, cost_list)
            )
        if lease is not None:
            lease = wire.check_lease(lease)
        # With an injected clock its time goes to the server as NOW, so the deny
        # cache and the module share one timeline. Without one the server's clock
        # decides, and the cache uses the monotonic clock read *before* sending:
        # the server decides no earlier, so the cached denial expires no later
        # than the real one, whatever the clocks' offset.
        now = self.clock() if self.clock else None
        instant = now if now is not None else _monotonic_us()
        if many:
            args = wire.all_command(limits, cost_list, mode, now, lease)
        else:
            args = wire.command(limits[0], cost_list[0], mode, now)
        cacheable = all(
            limit.algorithm != "CONCURRENCY" and not (limit.count_all or limit.escalate) for limit in limits
        )
        return _Call(args, limits, cost_list, mode, many, instant, cacheable)

    def _lease(self, limit: Limit, op: str, lease: str) -> _Call:
        lease = wire.check_lease(lease)
        now = self.clock() if self.clock else None
        args = wire.lease_command(limit, op, lease, now)
        return _Call(args, (limit,), (1,), "spend", False, now if now is not None else _monotonic_us(), False)

    def _throttle_args(self, key: str, max_burst: int, count: int, period: int, quantity: int) -> List[Any]:
        return wire.throttle_command(key, max_burst, count, period, quantity, self.clock() if self.clock else None)

    def _throttled(self, args: List[Any], reply: Any, took: float) -> Throttle:
        result = self._read_throttle(args, reply)
        if self.metrics is not None:
            self.metrics.throttled(self, args, result, took)
        return result

    def _read_throttle(self, args: List[Any], reply: Any) -> Throttle:
        if not isinstance(reply, BaseException):
            try:
                return wire.parse_throttle(reply)
            except (TypeError, ValueError, IndexError) as exc:
                reply = exc
        decision = self._fail(reply, args)
        return Throttle(not decision.allowed, int(args[2]) + 1, 0, -1 if decision.allowed else 0, 0, error=reply)

    def _cached(self, call: _Call) -> Optional[Decision]:
        if self.deny_cache is None or not call.cacheable:
            return None
        if call.mode in ("refund", "reset"):
            self.deny_cache.forget(call.limits)
            return None
        hit = self.deny_cache.lookup(call.entry, call.instant)
        if hit is not None and self.metrics is not None:
            self.metrics.decided(self, call, hit, None)
        return hit

    def _finish(self, call: _Call, reply: Any, took: float) -> Decision:
        """The decision on Redis's reply (or error) to `call`, which took `took` seconds."""
        decision = self._read(call, reply)
        if self.metrics is not None:
            self.metrics.decided(self, call, decision, took)
        return decision

    def _read(self, call: _Call, reply: Any) -> Decision:
        if isinstance(reply, BaseException):
            return self._fail(reply, call.args)
        try:
            if call.many:
                decision = wire.parse_all(reply, call.limits)
            else:
                decision = wire.parse(reply, call.limits[0])
        except (TypeError, ValueError, IndexError) as exc:
            return self._fail(exc, call.args)
        if self.deny_cache is not None and call.cacheable and call.mode in ("spend", "peek"):
            self.deny_cache.remember(call.entry, call.instant, decision)
        return decision

    def _fail(self, error: BaseException, args: Sequence[Any]) -> Decision:
        caller = caller_error(error, args)
        if caller is not None:
            raise caller from error
        try:
            self.on_failure(error, args)
        except Exception:  # a broken reporter must not take the request down with it
            logger.exception("redis-rl: the on_failure handler raised")
        return Decision(
            allowed=self.failure is FailurePolicy.OPEN,
            remaining=0,
            retry_after_ms=0,
            reset_after_ms=0,
            error=error,
        )

    def _pseudonym_args(self, identity: str, scope: Optional[str], prefix6: Optional[int]) -> List[Any]:
        args: List[Any] = ["RL.PSEUDONYM", identity]
        if scope is not None:
            args.append(scope)
        if prefix6 is not None:
            if isinstance(prefix6, bool) or not isinstance(prefix6, int) or not 1 <= prefix6 <= 128:
                raise ValueError(f"prefix6 must be a prefix length from 1 to 128, not {prefix6!r}")
            args += ["PREFIX6", prefix6]
        # Always NOW: the UTC day is then the caller's, which is what per-day caches key on.
        return args + ["NOW", self.now_us()]

    def _local_pseudonym(self, identity: str, scope: Optional[str], prefix6: Optional[int], args: List[Any]) -> str:
        if self._secret is None:
            raise PseudonymSecretRequired(
                "RL.PSEUDONYM needs the redis-rl module, or the secret: Redis Lua has no SHA-256, so on "
                "the scripts backend the kit computes pseudonyms itself; pass the server's RL_SECRET "
                "to the limiter as pseudonym_secret="
            )
        return local_pseudonym(self._secret, identity, scope, prefix6, args[-1])

    # The backend. A call is sent as `_wire` says; `_next` reads the answer and says what
    # to send instead, if anything: its script when auto meets a server without the
    # module (so that call is decided too), the script's text when the server answers
    # NOSCRIPT. At most three sends, module -> EVALSHA -> EVAL.

    def _module_first(self) -> bool:
        if self.backend != "auto":
            return self.backend == "module"
        return self.active_backend == "module" or self.now_us() >= self._recheck_at

    def _wire(self, args: List[Any], keys: Sequence[str]) -> List[Any]:
        if self._module_first():
            return args
        return scripts.evalsha(args, keys) if scripts.has_script(args[0]) else _LOCAL

    def _next(self, args: List[Any], keys: Sequence[str], sent: List[Any], reply: Any) -> Optional[List[Any]]:
        if sent[0] == "EVALSHA" and scripts.no_script(reply):
            return scripts.eval_(args, keys)
        if sent is args and self.backend == "auto":  # the module's command
            if scripts.no_module(reply):
                self.active_backend, self._recheck_at = "scripts", self.now_us() + scripts.RECHECK_US
                return scripts.evalsha(args, keys) if scripts.has_script(args[0]) else _LOCAL
            if not isinstance(reply, BaseException):
                self.active_backend = "module"
        if scripts.lost(reply):
            self._recheck_at = 0
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# Cluster routing. redis-py learns key positions from COMMAND, which covers the
# single commands (key at 1), but RL.ALL's keys move, so redis-py would ask
# COMMAND GETKEYS on every call, and RL.PSEUDONYM has no key, so it refuses to
# send it at all. We always know the key, so every call names its node:
# `target_nodes` is public API, works the same in the sync and asyncio clients
# and their pipelines, and redis-py still follows a MOVED if the slot map is stale.


def _route(client: Any, key: Optional[str]) -> Dict[str, Any]:
    if not isinstance(client, (RedisCluster, AsyncRedisCluster)):
        return {}
    node = client.get_default_node() if key is None else client.get_node_from_key(key)
    return {"target_nodes": node}


class RateLimiter(_Core):
    """Rate-limit checks on a `redis.Redis` or `redis.cluster.RedisCluster`.

    `failure` is required: FailurePolicy.OPEN admits and FailurePolicy.CLOSED
    refuses when Redis cannot decide (refused or lost connection, timeout, any
    error reply), after reporting the error to `on_failure` (default: a warning
    on the `redis_rl` logger). `clock` (unix µs) is sent as NOW on every call;
    leave it out to let the server's clock decide. `deny_cache=True` answers
    repeated denials in-process until their retry time. `metrics=registry` (a
    prometheus_client CollectorRegistry, or True for its default REGISTRY) counts
    every decision and times every call (see `redis_rl.metrics`).
    """

    def __init__(self, client: SyncClient, **options: Any) -> None:
        super().__init__(**options)
        self.client = client

    def check(self, limit: Limit, cost: int = 1, mode: Mode = "spend") -> Decision:
        return self._run(self._plan((limit,), cost, mode, many=False))

    def peek(self, limit: Limit, cost: int = 1) -> Decision:
        return self.check(limit, cost, "peek")

    def refund(self, limit: Limit, cost: int = 1) -> Decision:
        return self.check(limit, cost, "refund")

    def reset(self, limit: Limit) -> Decision:
        return self.check(limit, 1, "reset")

    def check_all(
        self, limits: Sequence[Limit], cost: Costs = 1, mode: Mode = "spend", *, lease: Optional[str] = None
    ) -> Decision:
        """RL.ALL: admitted only if every limit admits; then all spend, else none.
        `cost` is one for all limits or one per limit; `lease` names the lease of
        its `Limit.concurrency` limits (spending acquires it, `refund` releases it)."""
        return self._run(self._plan(limits, cost, mode, many=True, lease=lease))

    def acquire(self, limit: Limit, lease: str) -> Decision:
        """RL.CONCURRENCY ACQUIRE: take (or renew: idempotent) the lease `lease`."""
        return self._run(self._lease(limit, "ACQUIRE", lease))

    def release(self, limit: Limit, lease: str) -> Decision:
        """RL.CONCURRENCY RELEASE (an unknown or expired lease is not an error)."""
        return self._run(self._lease(limit, "RELEASE", lease))

    def heartbeat(self, limit: Limit, lease: str) -> Decision:
        """RL.CONCURRENCY HEARTBEAT: push a held lease's expiry to now + ttl;
        denied when the lease is gone (its slot may be someone else's)."""
        return self._run(self._lease(limit, "HEARTBEAT", lease))

    def throttle(self, key: str, max_burst: int, count: int, period: int, quantity: int = 1) -> Throttle:
        """RL.THROTTLE, redis-cell's CL.THROTTLE: `count` per `period` seconds,
        `max_burst + 1` at once; quantity 0 reports without spending."""
        args = self._throttle_args(key, max_burst, count, period, quantity)
        started = time.perf_counter()
        try:
            reply = self._send(args, [key])
        except Exception as exc:
            reply = exc
        return self._throttled(args, reply, time.perf_counter() - started)

    def check_many(self, limits: Sequence[Limit], cost: int = 1, mode: Mode = "spend") -> List[Decision]:
        """Independent checks (not all-or-nothing) in one pipelined round trip."""
        calls = [self._plan((limit,), cost, mode, many=False) for limit in limits]
        decisions: List[Optional[Decision]] = [self._cached(call) for call in calls]
        todo = [i for i, d in enumerate(decisions) if d is None]
        if todo:
            started = time.perf_counter()
            replies = self._send_many([calls[i] for i in todo])
            took = time.perf_counter() - started
            for i, reply in zip(todo, replies):
                decisions[i] = self._finish(calls[i], reply, took)
        return [d for d in decisions if d is not None]

    def pseudonym(self, identity: str, scope: Optional[str] = None, *, prefix6: Optional[int] = None) -> str:
        """RL.PSEUDONYM: a daily-rotating pseudonym, so no raw IP becomes a key. On the
        scripts it is computed here from `pseudonym_secret` (else PseudonymSecretRequired)."""
        args = self._pseudonym_args(identity, scope, prefix6)
        try:
            return _text(self._send(args, [], lambda: self._local_pseudonym(identity, scope, prefix6, args)))
        except PseudonymSecretRequired:
            raise
        except Exception as exc:
            raise LimiterUnavailable(self._fail(exc, args)) from exc

    def _run(self, call: _Call) -> Decision:
        hit = self._cached(call)
        if hit is not None:
            return hit
        started = time.perf_counter()
        try:
            reply = self._send(call.args, call.keys)
        except Exception as exc:
            reply = exc
        return self._finish(call, reply, time.perf_counter() - started)

    def _send(self, args: List[Any], keys: List[str], local: Optional[Callable[[], str]] = None) -> Any:
        """One command on the backend in force: its reply, or its error raised."""
        route = _route(self.client, keys[0] if keys else None)
        sent: Optional[List[Any]] = self._wire(args, keys)
        while sent is not None:
            if sent is _LOCAL:
                assert local is not None
                return local()
            try:
                reply = self.client.execute_command(*sent, **route)
            except Exception as exc:
                reply = exc
            sent = self._next(args, keys, sent, reply)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _send_many(self, calls: List[_Call]) -> List[Any]:
        """Independent calls in one pipeline; those to send again (their script, its
        text) in a second and third."""
        sent: List[Optional[List[Any]]] = [self._wire(c.args, c.keys) for c in calls]
        replies: List[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        while todo:
            try:
                pipe = self.client.pipeline(transaction=False)
                for i in todo:
                    pipe.execute_command(*sent[i], **_route(self.client, calls[i].keys[0]))  # type: ignore[misc]
                got = pipe.execute(raise_on_error=False)
            except Exception as exc:
                got = [exc] * len(todo)
            for i, reply in zip(todo, got):
                replies[i] = reply
                sent[i] = self._next(calls[i].args, calls[i].keys, sent[i], reply)  # type: ignore[arg-type]
            todo = [i for i in todo if sent[i] is not None]
        return replies


class AsyncRateLimiter(_Core):
    """`RateLimiter` for `redis.asyncio.Redis` and `redis.asyncio.cluster.RedisCluster`."""

    def __init__(self, client: AsyncClient, **options: Any) -> None:
        super().__init__(**options)
        self.client = client

    async def check(self, limit: Limit, cost: int = 1, mode: Mode = "spend") -> Decision:
        return await self._run(self._plan((limit,), cost, mode, many=False))

    async def peek(self, limit: Limit, cost: int = 1) -> Decision:
        return await self.check(limit, cost, "peek")

    async def refund(self, limit: Limit, cost: int = 1) -> Decision:
        return await self.check(limit, cost, "refund")

    async def reset(self, limit: Limit) -> Decision:
        return await self.check(limit, 1, "reset")

    async def check_all(
        self, limits: Sequence[Limit], cost: Costs = 1, mode: Mode = "spend", *, lease: Optional[str] = None
    ) -> Decision:
        return await self._run(self._plan(limits, cost, mode, many=True, lease=lease))

    async def acquire(self, limit: Limit, lease: str) -> Decision:
        return await self._run(self._lease(limit, "ACQUIRE", lease))

    async def release(self, limit: Limit, lease: str) -> Decision:
        return await self._run(self._lease(limit, "RELEASE", lease))

    async def heartbeat(self, limit: Limit, lease: str) -> Decision:
        return await self._run(self._lease(limit, "HEARTBEAT", lease))

    async def throttle(self, key: str, max_burst: int, count: int, period: int, quantity: int = 1) -> Throttle:
        args = self._throttle_args(key, max_burst, count, period, quantity)
        started = time.perf_counter()
        try:
            reply = await self._send(args, [key])
        except Exception as exc:
            reply = exc
        return self._throttled(args, reply, time.perf_counter() - started)

    async def check_many(self, limits: Sequence[Limit], cost: int = 1, mode: Mode = "spend") -> List[Decision]:
        calls = [self._plan((limit,), cost, mode, many=False) for limit in limits]
        decisions: List[Optional[Decision]] = [self._cached(call) for call in calls]
        todo = [i for i, d in enumerate(decisions) if d is None]
        if todo:
            started = time.perf_counter()
            replies = await self._send_many([calls[i] for i in todo])
            took = time.perf_counter() - started
            for i, reply in zip(todo, replies):
                decisions[i] = self._finish(calls[i], reply, took)
        return [d for d in decisions if d is not None]

    async def pseudonym(self, identity: str, scope: Optional[str] = None, *, prefix6: Optional[int] = None) -> str:
        args = self._pseudonym_args(identity, scope, prefix6)
        try:
            return _text(await self._send(args, [], lambda: self._local_pseudonym(identity, scope, prefix6, args)))
        except PseudonymSecretRequired:
            raise
        except Exception as exc:
            raise LimiterUnavailable(self._fail(exc, args)) from exc

    async def _ready(self) -> None:
        # The asyncio cluster client learns its slot map lazily; routing needs it first.
        if isinstance(self.client, AsyncRedisCluster):
            await self.client.initialize()

    async def _run(self, call: _Call) -> Decision:
        hit = self._cached(call)
        if hit is not None:
            return hit
        started = time.perf_counter()
        try:
            reply = await self._send(call.args, call.keys)
        except Exception as exc:
            reply = exc
        return self._finish(call, reply, time.perf_counter() - started)

    async def _send(self, args: List[Any], keys: List[str], local: Optional[Callable[[], str]] = None) -> Any:
        await self._ready()
        route = _route(self.client, keys[0] if keys else None)
        sent: Optional[List[Any]] = self._wire(args, keys)
        while sent is not None:
            if sent is _LOCAL:
                assert local is not None
                return local()
            try:
                reply = await self.client.execute_command(*sent, **route)
            except Exception as exc:
                reply = exc
            sent = self._next(args, keys, sent, reply)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    async def _send_many(self, calls: List[_Call]) -> List[Any]:
        sent: List[Optional[List[Any]]] = [self._wire(c.args, c.keys) for c in calls]
        replies: List[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        while todo:
            try:
                await self._ready()
                pipe = self.client.pipeline(transaction=False)
                for i in todo:
                    pipe.execute_command(*sent[i], **_route(self.client, calls[i].keys[0]))  # type: ignore[misc]
                got = await pipe.execute(raise_on_error=False)
            except Exception as exc:
                got = [exc] * len(todo)
            for i, reply in zip(todo, got):
                replies[i] = reply
                sent[i] = self._next(calls[i].args, calls[i].keys, sent[i], reply)  # type: ignore[arg-type]
            todo = [i for i in todo if sent[i] is not None]
        return replies
