"""In-process caches: denials (opt-in) and pseudonyms (used by the middlewares)."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, Hashable, Optional, Sequence, Set, Tuple

from .limits import Decision, Limit

_US_PER_DAY = 86_400_000_000


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class DenyCache:
    """Remembers denials until their retry time, so a client hammering a closed
    limiter costs no Redis round trip.

    Safe by construction: the module's `retry_after_ms` is the smallest wait after
    which the same request passes *if nothing else arrives*; anything else arriving
    only spends more, so until then Redis would deny it too. Two things can make
    Redis admit earlier and are handled: a REFUND or RESET through this limiter
    forgets every entry on that key; a request with a different cost or a
    different set of limits is a different entry. A REFUND or RESET sent by
    another process is not seen here: keep the cache off where that matters.

    Instants are microseconds on the limiter's clock (see `RateLimiter`).
    """

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        # entry -> (instant of the decision, instant it stops applying, decision)
        self._entries: Dict[Hashable, Tuple[int, int, Decision]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, entry: Hashable, now: int) -> Optional[Decision]:
        hit = self._entries.get(entry)
        if hit is None:
            return None
        decided_at, until, decision = hit
        if now >= until:
            del self._entries[entry]
            return None
        return _aged(decision, now - decided_at, cached=True)

    def remember(self, entry: Hashable, now: int, decision: Decision) -> None:
        if decision.allowed or decision.retry_after_ms <= 0 or decision.error is not None:
            return
        if len(self._entries) >= self.max_entries:
            self._evict(now)
        self._entries[entry] = (now, now + decision.retry_after_ms * 1000, decision)

    def forget(self, limits: Sequence[Limit]) -> None:
        keys = {limit.key for limit in limits}
        stale = [e for e, (_, _, d) in self._entries.items() if keys & _keys_of(d)]
        for entry in stale:
            del self._entries[entry]

    def _evict(self, now: int) -> None:
        expired = [e for e, (_, until, _) in self._entries.items() if until <= now]
        for entry in expired:
            del self._entries[entry]
        while len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]


def _keys_of(decision: Decision) -> Set[str]:
    parts = decision.parts or (decision,)
    return {p.limit.key for p in parts if p.limit is not None}


def _aged(decision: Decision, elapsed_us: int, cached: bool) -> Decision:
    """The decision as it reads `elapsed_us` later: waits shrink, counts stay."""

    def shrink(ms: int) -> int:
        return ms if ms <= 0 else max(0, _ceil_div(ms * 1000 - elapsed_us, 1000))

    return replace(
        decision,
        retry_after_ms=shrink(decision.retry_after_ms),
        reset_after_ms=shrink(decision.reset_after_ms),
        parts=tuple(_aged(p, elapsed_us, cached) for p in decision.parts),
        cached=cached,
    )


class PseudonymCache:
    """RL.PSEUDONYM answers per identity and UTC day.

    The pseudonym only changes at UTC midnight, so one lookup per client IP per
    day is enough. The day comes from the same clock whose time is sent as NOW,
    so the cached day and the module's day always agree.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.max_entries = max_entries
        self._day: Optional[int] = None
        self._names: Dict[str, str] = {}

    def get(self, identity: str, now_us: int) -> Optional[str]:
        self._roll(now_us)
        return self._names.get(identity)

    def put(self, identity: str, now_us: int, pseudonym: str) -> None:
        self._roll(now_us)
        if len(self._names) >= self.max_entries:
            del self._names[next(iter(self._names))]
        self._names[identity] = pseudonym

    def _roll(self, now_us: int) -> None:
        day = now_us // _US_PER_DAY
        if day != self._day:
            self._day, self._names = day, {}
