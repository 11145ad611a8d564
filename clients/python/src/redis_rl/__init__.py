"""Python client kit for redis-rl: the module's rate-limiter commands, or its Lua scripts
where the module cannot be loaded."""

from .cache import DenyCache, PseudonymCache
from .client import (
    AsyncRateLimiter,
    CommandError,
    FailurePolicy,
    LimiterUnavailable,
    ModuleNotLoaded,
    PseudonymSecretRequired,
    RateLimiter,
)
from .connect import connect, connect_async
from .headers import ratelimit_headers
from .limits import Decision, Limit, Throttle
from .middleware import RateLimitMiddleware, WSGIRateLimitMiddleware
from .shadow import Shadow
from .top import TopEntry, top, top_async

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
    "PseudonymSecretRequired",
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
    "top_async",
]
