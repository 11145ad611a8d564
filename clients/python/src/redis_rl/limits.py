"""Limits, decisions, and the wire format of the module's commands.

Nothing here talks to Redis: the module decides, this file only spells the
command and reads the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, List, Literal, Optional, Sequence, Tuple, Union

Algorithm = Literal[
    "SLIDELOG", "SLIDECOUNT", "SLIDEWINDOW", "FIXED", "COUNTER", "GCRA", "TOKENBUCKET", "CONCURRENCY"
]
ALGORITHMS: Tuple[str, ...] = (
    "SLIDELOG", "SLIDECOUNT", "SLIDEWINDOW", "FIXED", "COUNTER", "GCRA", "TOKENBUCKET", "CONCURRENCY"
)

# RL.CONCURRENCY's operations on a lease (PEEK and RESET are the modes).
LeaseOp = Literal["ACQUIRE", "RELEASE", "HEARTBEAT"]

Mode = Literal["spend", "peek", "refund", "reset"]
_MODE_WORD = {"spend": None, "peek": "PEEK", "refund": "REFUND", "reset": "RESET"}

# An int is seconds, as in the module's own `60`; a string is passed through the
# module's syntax (`60s`, `1500ms`).
Window = Union[int, str, timedelta]


# The module's bounds (src/args.rs, src/algo/slidelog.rs): checked here too, so a
# mistake is raised where the limit is built, never sent to Redis.
MAX_AMOUNT = 10**15
"""Largest limit, burst, refill and cost the module accepts."""
MAX_WINDOW_MS = 10 * 365 * 24 * 3600 * 1000
"""Longest window of every algorithm but COUNTER: ten years."""
MAX_COUNTER_WINDOW_MS = 9_223_372_036_854_775
"""RL.COUNTER's longest window, 2^63 - 1 µs (about 292,000 years): it keeps no instant
of its own, only the key's TTL, so the µs instants' end in 2265 does not bound it."""
MAX_LOG_LIMIT = 1_000_000
"""RL.SLIDELOG's largest limit, and so its largest cost: each unit is one sorted-set member."""
MAX_LIMITS = 16
"""Most limits in one RL.ALL."""

WINDOW_FORMATS = "seconds as an int (60), a string '60', '60s' or '1500ms', or a timedelta"
_WINDOW = re.compile(r"(\d+)(ms|s)?", re.IGNORECASE)


def longest_window_ms(algorithm: str) -> int:
    return MAX_COUNTER_WINDOW_MS if algorithm == "COUNTER" else MAX_WINDOW_MS


def _window_bound(longest: int) -> str:
    if longest == MAX_WINDOW_MS:
        return f"1 ms to ten years ({longest} ms)"
    return f"1 ms to {longest} ms (about 292,000 years)"


def window_ms(window: Window, longest: int = MAX_WINDOW_MS) -> int:
    """A window as whole milliseconds (the module's resolution for windows), at most
    `longest` (see `longest_window_ms`)."""
    if isinstance(window, bool) or not isinstance(window, (int, str, timedelta)):
        raise TypeError(f"window must be {WINDOW_FORMATS}, not {window!r}")
    if isinstance(window, timedelta):
        ms, rest = divmod(window, timedelta(milliseconds=1))
        if rest:
            raise ValueError(f"window {window} is not a whole number of milliseconds")
    elif isinstance(window, int):
        ms = window * 1000
    else:
        match = _WINDOW.fullmatch(window.strip())
        if not match:
            raise ValueError(f"window {window!r} is not understood: use {WINDOW_FORMATS}")
        ms = int(match.group(1)) * (1 if (match.group(2) or "").lower() == "ms" else 1000)
    if not 0 < ms <= longest:
        raise ValueError(f"window {window!r} must be from {_window_bound(longest)}")
    return ms


def amount(name: str, value: Any, maximum: int = MAX_AMOUNT) -> int:
    """A limit, burst or cost: a positive integer up to `maximum` (bool is refused:
    `True` as a cost is a bug, not 1)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, not {value!r}")
    if not 1 <= value <= maximum:
        raise ValueError(f"{name} must be from 1 to {maximum}, not {value}")
    return value


def check_cost(limit: "Limit", cost: Any) -> int:
    """What the module would refuse for this limit's cost, raised here."""
    if limit.algorithm == "CONCURRENCY" and cost != 1:
        raise ValueError(f"{limit.name}: a lease is one slot, a CONCURRENCY limit takes no cost (got {cost!r})")
    return amount(f"{limit.name}: cost", cost, MAX_LOG_LIMIT if limit.algorithm == "SLIDELOG" else MAX_AMOUNT)


def check_lease(lease: Any) -> str:
    if isinstance(lease, bytes):
        lease = lease.decode()
    if not isinstance(lease, str) or not lease:
        raise ValueError(f"lease must be a non-empty string, not {lease!r}")
    return lease


def ceil_seconds(ms: int) -> int:
    """Milliseconds to whole seconds, rounded up (a client that waits less is refused)."""
    return -(-ms // 1000)


def _header_safe(name: str) -> bool:
    # The name becomes a Structured Field string in RateLimit headers, which only
    # carries printable ASCII.
    return bool(name) and all(" " <= ch <= "~" for ch in name)


@dataclass(frozen=True)
class Limit:
    """One limiter: what the module needs to decide, plus a name for the headers.

    The module's reply carries neither the limit nor the window, so they live here.
    """

    name: str
    algorithm: Algorithm
    key: str
    limit: int
    window_ms: int
    burst: Optional[int] = None
    count_all: bool = False
    """COUNTER only (COUNTALL): every spending call adds its cost, denied ones too, as
    the stock stores' INCR does."""
    renew: bool = False
    """COUNTER only (RENEW): every counted call sets the TTL back to the full window."""
    refill: Optional[int] = None
    """TOKENBUCKET only (REFILL): the tokens each whole interval brings back."""
    escalate: bool = False
    """COUNTER only (ESCALATE): every call counts, and each denial sets the TTL to
    window × 2^(count − limit − 1), @fastify/rate-limit's exponential backoff."""

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, not {self.algorithm!r}")
        if self.burst is not None and self.algorithm != "GCRA":
            raise ValueError("burst is a GCRA option")
        if not _header_safe(self.name):
            raise ValueError("name must be non-empty printable ASCII (it goes into headers)")
        amount(f"{self.name}: limit", self.limit)
        longest = longest_window_ms(self.algorithm)
        if isinstance(self.window_ms, bool) or not isinstance(self.window_ms, int) or not 0 < self.window_ms <= longest:
            raise ValueError(f"{self.name}: window must be from {_window_bound(longest)}, not {self.window_ms!r} ms")
        if self.burst is not None:
            amount(f"{self.name}: burst", self.burst)
        if self.refill is not None:
            if self.algorithm != "TOKENBUCKET":
                raise ValueError("refill is a TOKENBUCKET option")
            amount(f"{self.name}: refill", self.refill)
        for flag in ("count_all", "renew", "escalate"):
            value = getattr(self, flag)
            if not isinstance(value, bool):
                raise TypeError(f"{self.name}: {flag} must be True or False, not {value!r}")
            if value and self.algorithm != "COUNTER":
                raise ValueError(f"{self.name}: {flag} is a COUNTER option")
        # One restarts the window on every counted call, the other lengthens it on
        # every denial: the module refuses the two together.
        if self.renew and self.escalate:
            raise ValueError(f"{self.name}: renew and escalate exclude each other")

    @classmethod
    def fixed(cls, name: str, key: str, limit: int, window: Window) -> Limit:
        return cls(name, "FIXED", key, limit, window_ms(window))

    @classmethod
    def counter(
        cls,
        name: str,
        key: str,
        limit: int,
        window: Window,
        *,
        count_all: bool = False,
        renew: bool = False,
        escalate: bool = False,
    ) -> Limit:
        """A fixed window that starts at the key's first hit, not on a clock boundary:
        one counter at `key` itself whose TTL is the window (the layout of `limits`',
        express-rate-limit's and @fastify/rate-limit's Redis stores). Its end is the
        key's expiry on the server clock, so a `clock` given to the limiter must keep
        the server's time. `count_all` counts denied calls too and `renew` re-arms the
        TTL on every counted call (the stock stores' INCR, and `limits`' elastic expiry);
        `escalate` counts every call and doubles the wait on each denial (the TTL becomes
        window × 2^(count − limit − 1), @fastify/rate-limit's exponential backoff), and
        excludes `renew`. The window may last up to MAX_COUNTER_WINDOW_MS."""
        return cls(
            name, "COUNTER", key, limit, window_ms(window, MAX_COUNTER_WINDOW_MS),
            count_all=count_all, renew=renew, escalate=escalate,
        )

    @classmethod
    def slidelog(cls, name: str, key: str, limit: int, window: Window) -> Limit:
        return cls(name, "SLIDELOG", key, limit, window_ms(window))

    @classmethod
    def slidecount(cls, name: str, key: str, limit: int, window: Window) -> Limit:
        return cls(name, "SLIDECOUNT", key, limit, window_ms(window))

    @classmethod
    def slidewindow(cls, name: str, key: str, limit: int, window: Window) -> Limit:
        """Symfony's sliding window, anchored at the key's first admitted call rather
        than a clock boundary: its end, its count and the previous window's, one string
        at `key` (RL.SLIDEWINDOW)."""
        return cls(name, "SLIDEWINDOW", key, limit, window_ms(window))

    @classmethod
    def tokenbucket(cls, name: str, key: str, capacity: int, interval: Window, refill: int = 1) -> Limit:
        """Symfony's token bucket (RL.TOKENBUCKET): up to `capacity` tokens, `refill`
        of them back at each whole `interval`, all at once, never beyond the capacity.
        A cost above the capacity is not an error: it is denied, `never`."""
        return cls(name, "TOKENBUCKET", key, capacity, window_ms(interval), refill=refill)

    @classmethod
    def concurrency(cls, name: str, key: str, limit: int, ttl: Window) -> Limit:
        """At most `limit` leases in flight; a lease not released or renewed
        (heartbeat) expires `ttl` after it was taken. Use with the limiter's
        `acquire`/`release`/`heartbeat`, or in `check_all(..., lease=id)`."""
        return cls(name, "CONCURRENCY", key, limit, window_ms(ttl))

    @classmethod
    def gcra(
        cls, name: str, key: str, limit: int, window: Window, burst: Optional[int] = None
    ) -> Limit:
        return cls(name, "GCRA", key, limit, window_ms(window), burst)

    def with_key(self, key: str) -> Limit:
        return replace(self, key=key)

    @property
    def window_arg(self) -> str:
        # Whole seconds go as seconds so the module names FIXED's window key in
        # seconds, like the Lua scripts do.
        ms = self.window_ms
        return str(ms // 1000) if ms % 1000 == 0 else f"{ms}ms"

    def spec(self, cost: int) -> List[Any]:
        """`<key> <limit> <window> [BURST b] [REFILL r] [COST n] [COUNTALL] [RENEW] [ESCALATE]`,
        shared by single calls and RL.ALL (which refuses the last three)."""
        args: List[Any] = [self.key, self.limit, self.window_arg]
        if self.burst is not None:
            args += ["BURST", self.burst]
        if self.refill not in (None, 1):  # the module's default
            args += ["REFILL", self.refill]
        if cost != 1:
            args += ["COST", cost]
        if self.count_all:
            args.append("COUNTALL")
        if self.renew:
            args.append("RENEW")
        if self.escalate:
            args.append("ESCALATE")
        return args


@dataclass(frozen=True)
class Decision:
    """What the module answered, or what the failure policy decided instead.

    `retry_after_ms` is signed: -1 means this request can never be admitted (its
    cost is above the limit or the burst). `error` is set when Redis could not
    decide; the numbers then carry no information and no headers are produced.
    """

    allowed: bool
    remaining: int
    retry_after_ms: int
    reset_after_ms: int
    limit: Optional[Limit] = None
    parts: Tuple[Decision, ...] = ()
    error: Optional[BaseException] = None
    cached: bool = False

    @property
    def never(self) -> bool:
        """Denied, and waiting will not help."""
        return not self.allowed and self.retry_after_ms < 0

    @property
    def retry_after(self) -> Optional[int]:
        """Seconds to wait, rounded up; 0 when allowed; None when it never passes."""
        return None if self.never else ceil_seconds(max(self.retry_after_ms, 0))

    @property
    def reset_after(self) -> int:
        """Seconds until the full budget is back, rounded up."""
        return ceil_seconds(self.reset_after_ms)


def command(limit: Limit, cost: int, mode: Mode, now_us: Optional[int]) -> List[Any]:
    if limit.algorithm == "CONCURRENCY":
        if mode in ("spend", "refund"):
            raise ValueError("a CONCURRENCY limit takes a lease: use acquire/release/heartbeat")
        return lease_command(limit, mode.upper(), None, now_us)
    return [f"RL.{limit.algorithm}", *limit.spec(cost), *_tail(mode, now_us)]


def lease_command(limit: Limit, op: str, lease: Optional[str], now_us: Optional[int]) -> List[Any]:
    """`RL.CONCURRENCY <key> <limit> <ttl> ACQUIRE|RELEASE|HEARTBEAT <id>|PEEK|RESET [NOW t]`."""
    if limit.algorithm != "CONCURRENCY":
        raise ValueError(f"{op} needs a Limit.concurrency, not {limit.algorithm}")
    args: List[Any] = ["RL.CONCURRENCY", limit.key, limit.limit, limit.window_arg, op]
    if lease is not None:
        args.append(lease)
    return args + (["NOW", now_us] if now_us is not None else [])


def all_command(
    limits: Sequence[Limit],
    costs: Sequence[int],
    mode: Mode,
    now_us: Optional[int],
    lease: Optional[str] = None,
) -> List[Any]:
    args: List[Any] = ["RL.ALL", len(limits)]
    for limit, cost in zip(limits, costs):
        if limit.count_all or limit.renew or limit.escalate:
            raise ValueError(
                f"{limit.name}: count_all, renew and escalate are RL.COUNTER's alone, not a limit's in RL.ALL"
            )
        args += [limit.algorithm, *limit.spec(cost)]
    if lease is not None:
        args += ["LEASE", lease]
    elif any(limit.algorithm == "CONCURRENCY" for limit in limits) and mode in ("spend", "refund"):
        raise ValueError("a CONCURRENCY limit in RL.ALL needs lease=")
    return args + _tail(mode, now_us)


@dataclass(frozen=True)
class Throttle:
    """RL.THROTTLE's reply, redis-cell's CL.THROTTLE shape: `limited`, `limit`
    (max_burst + 1), `remaining`, and whole seconds `retry_after` (-1 when allowed)
    and `reset_after`. `error` is set when the failure policy decided instead."""

    limited: bool
    limit: int
    remaining: int
    retry_after: int
    reset_after: int
    error: Optional[BaseException] = None

    @property
    def allowed(self) -> bool:
        return not self.limited


def throttle_command(
    key: str, max_burst: int, count: int, period: int, quantity: int, now_us: Optional[int]
) -> List[Any]:
    args: List[Any] = ["RL.THROTTLE", key, max_burst, count, period, quantity]
    return args + (["NOW", now_us] if now_us is not None else [])


def parse_throttle(reply: Sequence[Any]) -> Throttle:
    limited, limit, remaining, retry, reset = (int(x) for x in reply[:5])
    if limited not in (0, 1) or len(reply) != 5:
        raise ValueError(f"unexpected RL.THROTTLE reply {reply!r}")
    return Throttle(bool(limited), limit, remaining, retry, reset)


def _tail(mode: Mode, now_us: Optional[int]) -> List[Any]:
    if mode not in _MODE_WORD:
        raise ValueError(f"mode must be one of {tuple(_MODE_WORD)}, not {mode!r}")
    args: List[Any] = []
    if now_us is not None:
        args += ["NOW", now_us]
    word = _MODE_WORD[mode]
    if word:
        args.append(word)
    return args


def parse(reply: Sequence[Any], limit: Limit) -> Decision:
    allowed, remaining, retry, reset = (int(x) for x in reply[:4])
    if allowed not in (0, 1):
        raise ValueError(f"unexpected reply {reply!r}")
    return Decision(bool(allowed), remaining, retry, reset, limit=limit)


def parse_all(reply: Sequence[Any], limits: Sequence[Limit]) -> Decision:
    if len(reply) != 5 or len(reply[4]) != len(limits):
        raise ValueError(f"unexpected RL.ALL reply {reply!r}")
    parts = tuple(parse(part, limit) for part, limit in zip(reply[4], limits))
    aggregate = parse(reply[:4], limits[0])
    return replace(aggregate, limit=None, parts=parts)
