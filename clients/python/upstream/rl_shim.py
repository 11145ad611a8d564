"""The pytest plugin that points a library's own, unmodified test suite at a real
module-enabled redis-server, with only the store swapped.

Loaded with `-p rl_shim` by run.sh, with the suite's own `shim.py` (`-p shim`) next to
it. Settings (environment):

- RL_UPSTREAM_TARGET: `ours` (redis-rl's storage/bucket) or `stock` (the library's
  own Redis store on the same server: the control).
- RL_UPSTREAM_ALGORITHM: the storage's `algorithm` for `ours` (default slidecount).
- RL_UPSTREAM_EXPECTED: the expected-differences file; every test listed there becomes
  a strict xfail, so a listed test that passes fails the run (the list only shrinks).

The server is started here, once per run, on a free loopback port (never a fixed
one), and every test starts on an empty server (FLUSHALL), as the suites' docker
fixtures do.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import redis
import redis.asyncio

KIT = Path(__file__).resolve().parent.parent
TARGET = os.environ.get("RL_UPSTREAM_TARGET", "ours")
ALGORITHM = os.environ.get("RL_UPSTREAM_ALGORITHM", "slidecount")
if TARGET not in ("ours", "stock"):
    raise pytest.UsageError(f"RL_UPSTREAM_TARGET must be ours or stock, not {TARGET!r}")


def _kit_servers() -> Any:
    """The kit's own server helpers (tests/conftest.py), loaded under another name:
    the upstream trees have a `tests` package of their own."""
    spec = importlib.util.spec_from_file_location("rl_kit_servers", KIT / "tests" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


class _State:
    server: Any = None
    port: int = 0


STATE = _State()


def port() -> int:
    return STATE.port


def redis_url() -> str:
    """The stock store's URL on our server."""
    return f"redis://127.0.0.1:{STATE.port}"


def rl_url(scheme: str = "redis+rl") -> str:
    """Our storage's URL on the same server."""
    query = "" if ALGORITHM == "slidecount" else f"?algorithm={ALGORITHM}"
    return f"{scheme}://127.0.0.1:{STATE.port}{query}"


def target_url(stock_scheme: str = "redis") -> str:
    """The URL of the store under test: ours, or the stock one (`async+redis`...)."""
    if TARGET == "stock":
        return f"{stock_scheme}://127.0.0.1:{STATE.port}"
    return rl_url("async+redis+rl" if stock_scheme.startswith("async+") else "redis+rl")


# Where a suite's fixed address (its docker-compose port) is rewritten to ours.
FIXED_ADDRESSES: List[str] = []


def rewrite(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "", parts.port)
    for address in FIXED_ADDRESSES:
        h, p = address.rsplit(":", 1)
        if host == (h, int(p)):
            netloc = parts.netloc.rsplit("@", 1)
            netloc[-1] = f"127.0.0.1:{STATE.port}"
            return urllib.parse.urlunsplit(parts._replace(netloc="@".join(netloc)))
    return url


def _patch_from_url() -> None:
    """redis-py clients made from a suite's fixed address reach our server instead."""
    for cls in (redis.Redis, redis.asyncio.Redis):
        original = cls.from_url.__func__  # type: ignore[attr-defined]

        def from_url(klass: Any, url: str, *a: Any, _original: Any = original, **k: Any) -> Any:
            return _original(klass, rewrite(url), *a, **k)

        cls.from_url = classmethod(from_url)  # type: ignore[method-assign]


def pytest_configure(config: pytest.Config) -> None:
    # Marks from plugins the suites use only on backends we do not run (memcached).
    config.addinivalue_line("markers", "flaky: rerun marker of pytest-rerunfailures")
    servers = _kit_servers()
    STATE.server = servers.start_server()
    STATE.port = STATE.server.port
    _patch_from_url()
    import redis_rl.limits_storage  # noqa: F401  (registers redis+rl://)


def pytest_unconfigure(config: pytest.Config) -> None:
    if STATE.server is not None:
        STATE.server.stop()
        STATE.server = None


class _NoDocker:
    """Stands in for pytest-docker's `docker_services`: the server is already up."""

    def start(self, *names: str) -> None:
        pass

    def wait_for_service(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture(scope="session")
def docker_services() -> _NoDocker:
    return _NoDocker()


@pytest.fixture(autouse=True)
def _rl_empty_server() -> None:
    redis.Redis(port=STATE.port).flushall()


@pytest.fixture
def rl_server() -> redis.Redis:
    """The suite's per-test server fixture, swapped in for its docker ones."""
    client = redis.Redis(port=STATE.port)
    client.flushall()
    return client


# Expected differences: `<test id> <why>` per line, `#` comments. A listed test is a
# strict xfail: if it passes, the run fails. The one exception is written `?<test id>`:
# a test whose outcome depends on where the wall clock's window boundary falls during
# the run (it passes in some seconds and fails in others on our epoch-aligned windows),
# so it may pass without failing the run; the why says which boundary.
def expected_differences() -> Dict[str, str]:
    path = os.environ.get("RL_UPSTREAM_EXPECTED")
    listed: Dict[str, str] = {}
    if not path or not Path(path).is_file():
        return listed
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test_id, _, why = line.partition(" ")
        listed[test_id] = why.strip() or "(no reason given)"
    return listed


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    listed = expected_differences() if TARGET == "ours" else {}
    seen = set()
    for item in items:
        for test_id, strict in ((item.nodeid, True), ("?" + item.nodeid, False)):
            why = listed.get(test_id)
            if why is not None:
                seen.add(test_id)
                item.add_marker(pytest.mark.xfail(reason=f"expected difference: {why}", strict=strict, run=True))
    missing = sorted(set(listed) - seen)
    selecting = config.option.keyword or config.option.markexpr  # a -k/-m run sees a part
    if missing and not selecting:
        raise pytest.UsageError(
            "expected-differences lists tests that this run did not collect (renamed or removed?):\n  "
            + "\n  ".join(missing)
        )


def swap_params(item: pytest.Item, values: Dict[str, Any], fixture: Optional[str] = None) -> None:
    """Replace a parametrized item's arguments (its backend) with ours; `fixture`
    names the per-test fixture that stands in for the suite's docker one."""
    callspec = item.callspec  # type: ignore[attr-defined]
    callspec.params.update(values)
    if fixture:
        names = item.fixturenames  # type: ignore[attr-defined]
        for name in list(names):
            if name.startswith(("redis_", "docker_", "valkey_", "memcached", "mongodb")):
                names.remove(name)
        if fixture not in names:
            names.append(fixture)


def swap_storage_uris(module: Any, stock_uris: List[str]) -> None:
    """The framework's storage (`module.storage_from_string`) for `memory://` (its
    default) and the suite's fixed Redis address becomes the store under test on our
    server: ours, or for `stock` the library's own Redis storage."""
    original = module.storage_from_string

    def storage_from_string(uri: str, **options: Any) -> Any:
        if uri.split("?", 1)[0] in stock_uris:
            uri = target_url("async+redis" if uri.startswith("async+") else "redis")
        return original(uri, **options)

    module.storage_from_string = storage_from_string
