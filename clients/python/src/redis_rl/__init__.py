"""Python client kit for the redis-rl module (native rate-limiter commands)."""

from .cache import DenyCache, PseudonymCache
from .client import (
    AsyncRateLimiter,
    CommandError,
    FailurePolicy,
    LimiterUnavailable,
    ModuleNotLoaded,
    RateLimiter,
)
from .connect import connect, connect_async
from .headers import ratelimit_headers
from .limits import Decision, Limit, Throttle
from .middleware import RateLimitMiddleware, WSGIRateLimitMiddleware
from .shadow import Shadow
from .top import TopEntry, top

__all__ = [
    "AsyncRateLimiter",
    "CommandError",
    "Decision",
    "DenyCache",
    "FailurePolicy",
    "Limit",
    "LimiterUnavailable",
    "ModuleNotLoaded",
    "PseudonymCache",
    "RateLimitMiddleware",
    "RateLimiter",
    "Shadow",
    "Throttle",
    "TopEntry",
    "WSGIRateLimitMiddleware",
    "connect",
    "connect_async",
    "ratelimit_headers",
    "top",
]
