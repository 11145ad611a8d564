"""Plain ASGI and WSGI middlewares: identify the client, check its limits, add
the headers, answer 429 (or 503 when Redis is down and the policy fails closed).

Each limit in `limits` is a template: its `key` is a prefix, and a request's key
is `<prefix>:{<identity>}`. The identity is the hash tag, so all of one client's
limits share a cluster slot, as RL.ALL requires.

`concurrency=Limit.concurrency(name, prefix, n, ttl)` also caps the requests in
flight per client: a lease, named by a request id the middleware generates, is
taken in the same RL.ALL as the rate limits (a denied rate limit takes no lease, a
full concurrency limit spends no rate budget), and released once the response is
sent, also when the app raises. A handler that hangs keeps its slot only until the
lease's ttl: the module reclaims expired leases.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .cache import PseudonymCache
from .client import AsyncRateLimiter, LimiterUnavailable, RateLimiter
from .headers import Headers, ratelimit_headers
from .limits import Decision, Limit
from .shadow import Shadow, ShadowHandler

Scope = Dict[str, Any]
Message = Dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
WSGIApp = Callable[[Dict[str, Any], Callable[..., Any]], Iterable[bytes]]

UNKNOWN_CLIENT = "unknown"
"""The identity of a request whose peer address the server did not give."""


def keyed(limits: Sequence[Limit], identity: str) -> List[Limit]:
    return [limit.with_key(f"{limit.key}:{{{identity}}}") for limit in limits]


def _denied_by(decision: Decision) -> str:
    """The names of the limits that deny: shadow mode's label (never the client)."""
    return ", ".join(p.limit.name for p in (decision.parts or (decision,)) if not p.allowed and p.limit)


def _is_lease(part: Decision) -> bool:
    return part.limit is not None and part.limit.algorithm == "CONCURRENCY"


@dataclass(frozen=True)
class _Checked:
    """A request's decision, and the lease it holds (to release) if any."""

    decision: Decision
    lease: Optional[Limit] = None
    lease_id: Optional[str] = None

    @property
    def holds_lease(self) -> bool:
        return self.lease is not None and self.decision.allowed and self.decision.error is None

    def headers(self, legacy: bool) -> Headers:
        # The RateLimit fields describe rates; a lease's "window" is its ttl, so the
        # concurrency limit is left out of them (its denial still gets Retry-After:
        # when the oldest lease expires at the latest).
        d = self.decision
        parts = tuple(p for p in d.parts if not _is_lease(p))
        if parts or not d.parts:
            return ratelimit_headers(replace(d, parts=parts) if parts else d, legacy=legacy)
        if d.error is None and not d.allowed and d.retry_after is not None:  # the lease alone
            return [("Retry-After", str(d.retry_after))]
        return []


class _Policy:
    """What both middlewares share: the limits, the lease, shadow mode."""

    def __init__(
        self,
        limits: Sequence[Limit],
        concurrency: Optional[Limit],
        shadow: bool,
        on_shadow: Optional[ShadowHandler],
    ) -> None:
        if not limits and concurrency is None:
            raise ValueError("at least one limit (or a concurrency limit)")
        if concurrency is not None and concurrency.algorithm != "CONCURRENCY":
            raise ValueError("concurrency must be a Limit.concurrency")
        self.limits = list(limits)
        self.concurrency = concurrency
        self.shadow = Shadow(shadow, on_shadow)

    def plan(self, identity: str) -> Tuple[List[Limit], Optional[Limit], Optional[str]]:
        limits = keyed(self.limits, identity)
        if self.concurrency is None:
            return limits, None, None
        [lease] = keyed([self.concurrency], identity)
        return limits + [lease], lease, uuid.uuid4().hex


def _refusal(decision: Decision, headers: Headers) -> Tuple[int, Headers, bytes]:
    """Status, headers and body for a request that does not go through."""
    if decision.error is not None:
        status, reason = 503, "rate_limiter_unavailable"
    elif decision.parts and all(_is_lease(p) for p in decision.parts if not p.allowed):
        status, reason = 429, "too_many_in_flight"
    else:
        status, reason = 429, "rate_limited"
    body = json.dumps({"error": reason}).encode()
    all_headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *headers]
    return status, all_headers, body


class RateLimitMiddleware:
    """ASGI middleware (Starlette, FastAPI or any ASGI app) on an `AsyncRateLimiter`.

    `identify(scope)` returns the client's identity; the default is the
    RL.PSEUDONYM of the peer IP, looked up once per IP and UTC day. `shadow=True`
    lets would-be-limited requests through with their real headers, reported to
    `on_shadow(decision, path)` (default: a warning on the `redis_rl` logger) and
    counted in `self.shadow`. `concurrency` caps the requests in flight (see above).
    """

    def __init__(
        self,
        app: ASGIApp,
        limiter: AsyncRateLimiter,
        limits: Sequence[Limit],
        *,
        identify: Optional[Callable[[Scope], Awaitable[str]]] = None,
        legacy_headers: bool = False,
        pseudonyms: Optional[PseudonymCache] = None,
        shadow: bool = False,
        on_shadow: Optional[ShadowHandler] = None,
        concurrency: Optional[Limit] = None,
    ) -> None:
        self.policy = _Policy(limits, concurrency, shadow, on_shadow)
        self.limits = self.policy.limits
        self.app = app
        self.limiter = limiter
        self.identify = identify or self.client_pseudonym
        self.legacy_headers = legacy_headers
        self.pseudonyms = pseudonyms or PseudonymCache()
        self.shadow = self.policy.shadow

    async def client_pseudonym(self, scope: Scope) -> str:
        client = scope.get("client")
        ip = client[0] if client else UNKNOWN_CLIENT
        now = self.limiter.now_us()
        name = self.pseudonyms.get(ip, now)
        if name is None:
            name = await self.limiter.pseudonym(ip)
            self.pseudonyms.put(ip, now, name)
        return name

    async def decide(self, scope: Scope) -> Decision:
        return (await self._check(scope)).decision

    async def _check(self, scope: Scope) -> _Checked:
        try:
            identity = await self.identify(scope)
        except LimiterUnavailable as exc:
            return _Checked(exc.decision)
        limits, lease, lease_id = self.policy.plan(identity)
        if lease is not None:
            return _Checked(await self.limiter.check_all(limits, lease=lease_id), lease, lease_id)
        if len(limits) == 1:
            return _Checked(await self.limiter.check(limits[0]))
        return _Checked(await self.limiter.check_all(limits))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.shadow.watching():
            checked = await self._check(scope)
        decision = checked.decision
        headers = checked.headers(self.legacy_headers)
        if not self.shadow.passes(decision, scope.get("path", ""), _denied_by(decision)):
            status, all_headers, body = _refusal(decision, headers)
            await send({"type": "http.response.start", "status": status, "headers": _raw(all_headers)})
            await send({"type": "http.response.body", "body": body})
            return
        extra = _raw(headers)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            if checked.holds_lease:
                assert checked.lease is not None and checked.lease_id is not None
                await self.limiter.release(checked.lease, checked.lease_id)


def _raw(headers: Headers) -> List[Tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


class WSGIRateLimitMiddleware:
    """The WSGI counterpart, on a sync `RateLimiter`; the default identity is the
    RL.PSEUDONYM of REMOTE_ADDR. `shadow`, `on_shadow` and `concurrency` as for the
    ASGI one; the lease is released when the server closes the response iterable
    (PEP 3333), or at once when the app raises."""

    _REASONS = {429: "Too Many Requests", 503: "Service Unavailable"}

    def __init__(
        self,
        app: WSGIApp,
        limiter: RateLimiter,
        limits: Sequence[Limit],
        *,
        identify: Optional[Callable[[Dict[str, Any]], str]] = None,
        legacy_headers: bool = False,
        pseudonyms: Optional[PseudonymCache] = None,
        shadow: bool = False,
        on_shadow: Optional[ShadowHandler] = None,
        concurrency: Optional[Limit] = None,
    ) -> None:
        self.policy = _Policy(limits, concurrency, shadow, on_shadow)
        self.limits = self.policy.limits
        self.app = app
        self.limiter = limiter
        self.identify = identify or self.client_pseudonym
        self.legacy_headers = legacy_headers
        self.pseudonyms = pseudonyms or PseudonymCache()
        self.shadow = self.policy.shadow

    def client_pseudonym(self, environ: Dict[str, Any]) -> str:
        ip = environ.get("REMOTE_ADDR") or UNKNOWN_CLIENT
        now = self.limiter.now_us()
        name = self.pseudonyms.get(ip, now)
        if name is None:
            name = self.limiter.pseudonym(ip)
            self.pseudonyms.put(ip, now, name)
        return name

    def decide(self, environ: Dict[str, Any]) -> Decision:
        return self._check(environ).decision

    def _check(self, environ: Dict[str, Any]) -> _Checked:
        try:
            identity = self.identify(environ)
        except LimiterUnavailable as exc:
            return _Checked(exc.decision)
        limits, lease, lease_id = self.policy.plan(identity)
        if lease is not None:
            return _Checked(self.limiter.check_all(limits, lease=lease_id), lease, lease_id)
        if len(limits) == 1:
            return _Checked(self.limiter.check(limits[0]))
        return _Checked(self.limiter.check_all(limits))

    def __call__(self, environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self.shadow.watching():
            checked = self._check(environ)
        decision = checked.decision
        headers = checked.headers(self.legacy_headers)
        if not self.shadow.passes(decision, environ.get("PATH_INFO", ""), _denied_by(decision)):
            status, all_headers, body = _refusal(decision, headers)
            start_response(f"{status} {self._REASONS[status]}", all_headers)
            return [body]

        def start_with_headers(status: str, response_headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*response_headers, *headers], exc_info)

        if not checked.holds_lease:
            return self.app(environ, start_with_headers)
        assert checked.lease is not None and checked.lease_id is not None
        lease, lease_id = checked.lease, checked.lease_id
        try:
            body = self.app(environ, start_with_headers)
        except BaseException:
            self.limiter.release(lease, lease_id)
            raise
        return _Releasing(body, lambda: self.limiter.release(lease, lease_id))


class _Releasing:
    """A WSGI response iterable that releases the lease when the server closes it."""

    def __init__(self, body: Iterable[bytes], release: Callable[[], Any]) -> None:
        self.body = body
        self.release = release

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.release()
