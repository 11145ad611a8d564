"""redis-py clients with limiter-friendly defaults.

A rate limiter sits in front of every request, so a Redis that is down or stuck
must cost milliseconds, not the seconds redis-py waits and retries by default:
short timeouts, no retries, and the failure policy takes it from there.
"""

from __future__ import annotations

from typing import Any, Dict

import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from .client import AsyncClient, SyncClient

CONNECT_TIMEOUT = 2.0
"""Seconds to open a connection. Above 1 s on purpose: under a burst of new
connections the server's accept queue overflows and the kernel drops SYNs, which
are retransmitted after 1 s; a shorter timeout sends those requests to the failure
policy although Redis is fine. Connections are pooled, so this is paid rarely."""
READ_TIMEOUT = 0.25
"""Seconds to wait for a reply; a limiter call normally takes well under 1 ms."""


def connect(
    url: str = "redis://127.0.0.1:6379",
    *,
    cluster: bool = False,
    connect_timeout: float = CONNECT_TIMEOUT,
    timeout: float = READ_TIMEOUT,
    **kwargs: Any,
) -> SyncClient:
    """A `redis.Redis`, or a `RedisCluster` for `cluster=True` (which contacts the
    cluster right away to learn its slot map)."""
    options: Dict[str, Any] = dict(
        socket_connect_timeout=connect_timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )
    options.update(kwargs)
    if cluster:
        return RedisCluster.from_url(url, **options)
    return redis.Redis.from_url(url, **options)


def connect_async(
    url: str = "redis://127.0.0.1:6379",
    *,
    cluster: bool = False,
    connect_timeout: float = CONNECT_TIMEOUT,
    timeout: float = READ_TIMEOUT,
    **kwargs: Any,
) -> AsyncClient:
    """The asyncio counterpart of `connect` (the cluster client connects on first use)."""
    options: Dict[str, Any] = dict(
        socket_connect_timeout=connect_timeout,
        socket_timeout=timeout,
        retry=AsyncRetry(NoBackoff(), 0),
    )
    options.update(kwargs)
    if cluster:
        return AsyncRedisCluster.from_url(url, **options)
    return redis.asyncio.Redis.from_url(url, **options)
