"""limits' storage, strategy and aio tests (4.8 and 5.8) on one module-enabled server.

The suite parametrizes each backend test by `(uri, args[, expected_instance], fixture)`;
we keep the basic Redis backend's items (the ones on `redis://localhost:7379`), swap
their arguments for our storage (or the stock Redis storage on our server) and their
docker fixture for `rl_server`, and deselect the other backends' items.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import List

import pytest
from pytest_lazy_fixtures import lf

import rl_shim

BASIC = ("redis://localhost:7379", "async+redis://localhost:7379")

# limits 4.8's conftest imports the etcd client for its etcd fixtures, whose tests we
# deselect; an empty module stands in when python-etcd3 (and its grpc) is not installed.
if importlib.util.find_spec("etcd3") is None:
    sys.modules["etcd3"] = types.ModuleType("etcd3")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    from redis_rl.limits_storage import AsyncRedisRLStorage, RedisRLStorage

    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        uri = params.get("uri")
        if uri not in BASIC:
            drop.append(item)
            continue
        is_async = uri.startswith("async+")
        values = {"uri": rl_shim.target_url("async+redis" if is_async else "redis"), "fixture": lf("rl_server")}
        if rl_shim.TARGET == "stock":
            # the suite's default async client is coredis; redis-py is what ours uses
            values["args"] = {"implementation": "redispy"} if is_async else {}
        else:
            # The stock storage waits for a reply without a timeout; ours gives up after
            # 0.25 s by default (a limiter's budget), and the suite's moving-window hit of
            # cost 999,999 holds the Redis thread for about a second (a member per unit).
            values["args"] = {"timeout": 30}
            if "expected_instance" in params:
                values["expected_instance"] = AsyncRedisRLStorage if is_async else RedisRLStorage
        rl_shim.swap_params(item, values, "rl_server")
        keep.append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
