"""pyrate-limiter's bucket tests with our bucket: the suite's `create_bucket` fixture
is parametrized by bucket factories; the Redis ones (sync and asyncio) are swapped for
factories of redis-rl buckets on our server (or, for `stock`, pointed at our server),
the other backends' items are deselected."""

from __future__ import annotations

from typing import Any, List

import pytest

import rl_shim


async def create_rl_bucket(rates: List[Any]) -> Any:
    from pyrate_limiter import id_generator

    from redis_rl import FailurePolicy, RateLimiter, connect
    from redis_rl.pyrate import RedisRLBucket

    limiter = RateLimiter(connect(rl_shim.redis_url()), failure=FailurePolicy.CLOSED)
    return RedisRLBucket(rates, limiter, f"test-bucket:{{{id_generator()}}}", algorithm=rl_shim.ALGORITHM)


async def create_async_rl_bucket(rates: List[Any]) -> Any:
    from pyrate_limiter import id_generator

    from redis_rl import AsyncRateLimiter, FailurePolicy, connect_async
    from redis_rl.pyrate import RedisRLBucket

    limiter = AsyncRateLimiter(connect_async(rl_shim.redis_url()), failure=FailurePolicy.CLOSED)
    return RedisRLBucket(rates, limiter, f"test-bucket:{{{id_generator()}}}", algorithm=rl_shim.ALGORITHM)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    import os

    os.environ["REDIS"] = rl_shim.redis_url()  # the stock factories read it
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        factory = params.get("create_bucket")
        if factory is None:
            drop.append(item)
            continue
        name = getattr(factory, "__name__", "")
        if name not in ("create_redis_bucket", "create_async_redis_bucket"):
            drop.append(item)
            continue
        if rl_shim.TARGET == "ours":
            swap = create_rl_bucket if name == "create_redis_bucket" else create_async_rl_bucket
            rl_shim.swap_params(item, {"create_bucket": swap})
        keep.append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
