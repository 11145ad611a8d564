"""Plain ASGI and WSGI middlewares: identify the client, check its limits, add
the headers, answer 429 (or 503 when Redis is down and the policy fails closed).

Each limit in `limits` is a template: its `key` is a prefix, and a request's key
is `<prefix>:{<identity>}`. The identity is the hash tag, so all of one client's
limits share a cluster slot, as RL.ALL requires.
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

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


def _refusal(decision: Decision, headers: Headers) -> Tuple[int, Headers, bytes]:
    """Status, headers and body for a request that does not go through."""
    if decision.error is not None:
        status, reason = 503, "rate_limiter_unavailable"
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
    counted in `self.shadow`.
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
    ) -> None:
        if not limits:
            raise ValueError("at least one limit")
        self.app = app
        self.limiter = limiter
        self.limits = list(limits)
        self.identify = identify or self.client_pseudonym
        self.legacy_headers = legacy_headers
        self.pseudonyms = pseudonyms or PseudonymCache()
        self.shadow = Shadow(shadow, on_shadow)

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
        try:
            identity = await self.identify(scope)
        except LimiterUnavailable as exc:
            return exc.decision
        limits = keyed(self.limits, identity)
        if len(limits) == 1:
            return await self.limiter.check(limits[0])
        return await self.limiter.check_all(limits)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision = await self.decide(scope)
        headers = ratelimit_headers(decision, legacy=self.legacy_headers)
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

        await self.app(scope, receive, send_with_headers)


def _raw(headers: Headers) -> List[Tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]


class WSGIRateLimitMiddleware:
    """The WSGI counterpart, on a sync `RateLimiter`; the default identity is the
    RL.PSEUDONYM of REMOTE_ADDR. `shadow` and `on_shadow` as for the ASGI one."""

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
    ) -> None:
        if not limits:
            raise ValueError("at least one limit")
        self.app = app
        self.limiter = limiter
        self.limits = list(limits)
        self.identify = identify or self.client_pseudonym
        self.legacy_headers = legacy_headers
        self.pseudonyms = pseudonyms or PseudonymCache()
        self.shadow = Shadow(shadow, on_shadow)

    def client_pseudonym(self, environ: Dict[str, Any]) -> str:
        ip = environ.get("REMOTE_ADDR") or UNKNOWN_CLIENT
        now = self.limiter.now_us()
        name = self.pseudonyms.get(ip, now)
        if name is None:
            name = self.limiter.pseudonym(ip)
            self.pseudonyms.put(ip, now, name)
        return name

    def decide(self, environ: Dict[str, Any]) -> Decision:
        try:
            identity = self.identify(environ)
        except LimiterUnavailable as exc:
            return exc.decision
        limits = keyed(self.limits, identity)
        if len(limits) == 1:
            return self.limiter.check(limits[0])
        return self.limiter.check_all(limits)

    def __call__(self, environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        decision = self.decide(environ)
        headers = ratelimit_headers(decision, legacy=self.legacy_headers)
        if not self.shadow.passes(decision, environ.get("PATH_INFO", ""), _denied_by(decision)):
            status, all_headers, body = _refusal(decision, headers)
            start_response(f"{status} {self._REASONS[status]}", all_headers)
            return [body]

        def start_with_headers(status: str, response_headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*response_headers, *headers], exc_info)

        return self.app(environ, start_with_headers)
