"""The backend option: which of the module's commands or its scripts decide, how auto
finds out and changes its mind, NOSCRIPT, and RL.PSEUDONYM computed in the kit."""

from __future__ import annotations

import asyncio
from typing import Iterator, List

import pytest
import redis
from limits import parse
from limits.errors import ConfigurationError
from limits.storage import storage_from_string

import redis_rl.limits_storage  # noqa: F401  (registers redis+rl://)
from conftest import MODULE, SECRET, T0, FakeClock, Server, limiter_calls, start_server
from redis_rl import (
    AsyncRateLimiter,
    CommandError,
    FailurePolicy,
    Limit,
    ModuleNotLoaded,
    PseudonymSecretRequired,
    RateLimiter,
    connect,
    connect_async,
)
from redis_rl.backend import RECHECK_US, no_module
from test_failure import Reports


def limiter(server: Server, clock: FakeClock, **options: object) -> RateLimiter:
    return RateLimiter(connect(server.url), failure=FailurePolicy.CLOSED, clock=clock, **options)  # type: ignore[arg-type]


def noscripts(server: Server) -> int:
    return server.client().info("errorstats").get("errorstat_NOSCRIPT", {}).get("count", 0)


def test_auto_finds_the_module_or_the_scripts_on_the_first_call(
    module_server: Server, bare_server: Server, clock: FakeClock, key: str
) -> None:
    for server, found in ((module_server, "module"), (bare_server, "scripts")):
        rl = limiter(server, clock)
        assert rl.active_backend == "module"  # until a server answers
        server.client().config_resetstat()
        limit = Limit.fixed("f", key, 2, 10)
        # The first call decides on whatever the server has: no decision is lost.
        assert [(d.allowed, d.remaining, d.error) for d in (rl.check(limit), rl.check(limit), rl.check(limit))] == [
            (True, 1, None), (True, 0, None), (False, 0, None)
        ]
        assert rl.active_backend == found
        calls = limiter_calls(server.client())
        # On the scripts: the one unknown RL.FIXED (an error, not counted), then scripts only.
        assert calls == ({"rl.fixed": 3} if found == "module" else {"script": 3}), calls


def test_backend_scripts_runs_the_scripts_where_the_module_is(module_server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(module_server, clock, backend="scripts")
    assert rl.active_backend == "scripts"
    module_server.client().config_resetstat()
    assert rl.check(Limit.gcra("g", key, 10, 1, burst=1)).allowed
    assert rl.check_all([Limit.gcra("g", key, 10, 1, burst=1), Limit.fixed("f", key + ":f", 1, 10)]).allowed is False
    assert limiter_calls(module_server.client()) == {"script": 2}
    # The same keys as the module's: the module's PEEK reads what the scripts wrote.
    assert limiter(module_server, clock, backend="module").peek(Limit.gcra("g", key, 10, 1, burst=1)).allowed is False


def test_backend_is_checked() -> None:
    with pytest.raises(ValueError, match="backend must be 'auto', 'module' or 'scripts', not 'lua'"):
        RateLimiter(connect(), failure=FailurePolicy.OPEN, backend="lua")
    with pytest.raises(ConfigurationError, match="backend must be"):
        storage_from_string("redis+rl://127.0.0.1:1?backend=lua")


def test_limits_storage_takes_the_backend(module_server: Server) -> None:
    storage = storage_from_string(module_server.url.replace("redis://", "redis+rl://") + "?failure=closed&backend=scripts")
    assert storage.limiter.backend == "scripts"
    module_server.client().config_resetstat()
    item = parse("5/minute")
    assert storage.incr(item.key_for("backend-uri"), item.get_expiry()) == 1
    assert set(limiter_calls(module_server.client())) == {"script"}


@pytest.fixture
def changing() -> Iterator[List[Server]]:
    """A server without the module that can load it (MODULE LOAD), and be replaced."""
    servers = [start_server(module=False, extra=["--enable-module-command", "yes"])]
    yield servers
    for s in servers:
        s.stop()


def test_auto_switches_to_the_module_loaded_later(changing: List[Server], clock: FakeClock, key: str) -> None:
    server = changing[0]
    rl = limiter(server, clock)
    limit = Limit.fixed("f", key, 3, 3600)
    assert rl.check(limit).remaining == 2 and rl.active_backend == "scripts"
    server.client().execute_command("MODULE", "LOAD", str(MODULE))
    clock.advance_ms(RECHECK_US // 1000 - 1)
    assert rl.check(limit).remaining == 1 and rl.active_backend == "scripts"  # not asked again yet
    clock.advance_ms(1)
    server.client().config_resetstat()
    # A minute on: asked again, answered by the module, on the scripts' counter.
    assert rl.check(limit).remaining == 0 and rl.active_backend == "module"
    assert limiter_calls(server.client()) == {"rl.fixed": 1}


def test_auto_asks_again_after_a_lost_connection(changing: List[Server], clock: FakeClock, key: str) -> None:
    """A restart (or a failover) onto a server with the module: the next call after the
    outage is the module's, without waiting for the minute."""
    old = changing[0]
    rl = limiter(old, clock, on_failure=Reports())
    limit = Limit.slidecount("c", key, 5, 60)
    assert rl.check(limit).allowed and rl.active_backend == "scripts"
    old.process.kill()
    old.process.wait()
    assert rl.check(limit).error is not None  # the outage: the failure policy's
    changing.append(start_server(port=old.port))
    assert rl.check(limit).allowed and rl.active_backend == "module"


def test_noscript_reloads_the_script(server: Server, clock: FakeClock, key: str) -> None:
    rl = limiter(server, clock, backend="scripts")
    limit = Limit.fixed("f", key, 4, 10)
    assert rl.check(limit).remaining == 3
    server.client().script_flush()
    before = noscripts(server)
    assert (rl.check(limit).remaining, rl.check(limit).remaining) == (2, 1)
    assert noscripts(server) == before + 1  # one NOSCRIPT, then the reloaded script
    server.client().script_flush()
    # A pipeline reloads only what it needs, in one more round.
    many = rl.check_many([limit, limit.with_key(key + ":2")])
    assert [(d.remaining, d.error) for d in many] == [(0, None), (3, None)]
    assert noscripts(server) == before + 3


def test_noscript_reloads_the_script_asyncio(server: Server, clock: FakeClock, key: str) -> None:
    async def scenario() -> List[int]:
        client = connect_async(server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, backend="scripts")
        limit = Limit.gcra("g", key, 10, 1, burst=3)
        server.client().script_flush()
        out = [(await rl.check(limit)).remaining]
        server.client().script_flush()
        out.append((await rl.check(limit)).remaining)
        server.client().script_flush()
        out += [d.remaining for d in await rl.check_many([limit, limit.with_key(key + ":2")])]
        server.client().script_flush()
        out.append((await rl.throttle(key + ":t", 1, 1, 60)).remaining)
        await client.aclose()
        return out

    before = noscripts(server)
    assert asyncio.run(scenario()) == [2, 1, 0, 2, 1]
    assert noscripts(server) == before + 5  # one per call after each flush


# Identities whose canonical forms the module's parser decides: every kind of IP text,
# and strings that only look like one.
IDENTITIES = [
    ("192.0.2.1", None, None), ("::ffff:192.0.2.1", "api", None), ("::FFFF:c000:0201", None, 64),
    ("2001:0DB8:0000:0000:0000:0000:0000:0001", None, None), ("2001:db8:1:2:3:4:5:6", None, 64),
    ("2001:db8:1:2:3:4:5:6", None, 128), ("2001:db8:1:2:3:4:5:6", None, 1), ("1:0:0:2:0:0:0:3", None, None),
    ("1:0:2:3:4:5:6:7", None, None), ("::", None, None), ("::1", "s", 127), ("64:ff9b::1.2.3.4", None, None),
    ("fe80::1%eth0", None, None), ("FE80::0001%eth0", None, None), ("01.2.3.4", None, None), ("1.2.3", None, None), ("192.0.2.1 ", None, None),
    ("api-key-123", None, 64), ("user:42", "a:b", None), ("ümlaut", "scope", None), ("", None, None),
]


@pytest.mark.parametrize("at", [T0, T0 + 86_400_000_000, 1_764_460_799_999_999, 1_764_460_800_000_000])
def test_local_pseudonym_is_the_modules(module_server: Server, at: int) -> None:
    clock = FakeClock(at)
    native = limiter(module_server, clock, backend="module")
    local = limiter(module_server, clock, backend="scripts", pseudonym_secret=SECRET)
    module_server.client().config_resetstat()
    for identity, scope, prefix6 in IDENTITIES:
        assert local.pseudonym(identity, scope, prefix6=prefix6) == native.pseudonym(identity, scope, prefix6=prefix6), identity
    calls = limiter_calls(module_server.client())
    assert calls == {"rl.pseudonym": len(IDENTITIES)}, "only the module's were asked of the server"


def test_local_pseudonym_asyncio_and_bytes_secret(bare_server: Server, clock: FakeClock) -> None:
    async def scenario() -> str:
        client = connect_async(bare_server.url)
        rl = AsyncRateLimiter(client, failure=FailurePolicy.CLOSED, clock=clock, pseudonym_secret=SECRET.encode())
        name = await rl.pseudonym("192.0.2.1", "api")
        assert rl.active_backend == "scripts"  # auto: the unknown RL.PSEUDONYM, then computed here
        await client.aclose()
        return name

    sync = limiter(bare_server, clock, pseudonym_secret=SECRET)
    assert asyncio.run(scenario()) == sync.pseudonym("192.0.2.1", "api")


def test_pseudonym_without_the_secret_says_so(bare_server: Server, clock: FakeClock) -> None:
    reports = Reports()
    for rl in (limiter(bare_server, clock, on_failure=reports),
               RateLimiter(connect("redis://127.0.0.1:1"), failure=FailurePolicy.OPEN, backend="scripts")):
        with pytest.raises(PseudonymSecretRequired, match="needs the redis-rl module, or the secret.*pseudonym_secret="):
            rl.pseudonym("192.0.2.1")
    assert reports.seen == []  # a setup mistake, not an outage


def test_prefix6_is_checked_before_redis() -> None:
    rl = RateLimiter(connect("redis://127.0.0.1:1"), failure=FailurePolicy.OPEN, on_failure=Reports())
    for bad in (0, 129, True, "64"):
        with pytest.raises(ValueError, match="prefix6 must be a prefix length from 1 to 128"):
            rl.pseudonym("2001:db8::1", prefix6=bad)  # type: ignore[arg-type]


def test_a_mistake_the_scripts_judge_is_raised_as_the_modules(bare_server: Server) -> None:
    reports = Reports()
    rl = RateLimiter(connect(bare_server.url), failure=FailurePolicy.OPEN, on_failure=reports)
    with pytest.raises(CommandError, match="RL.SLIDELOG refused: limit must be a positive integer no larger than 1000000") as raised:
        rl.check(Limit.slidelog("log", "rl:{bad}", 2_000_000, 10))
    assert not isinstance(raised.value, ModuleNotLoaded) and rl.active_backend == "scripts"
    assert reports.seen == []


def test_unknown_command_is_read_in_both_quotings() -> None:
    # Redis 7+ and Valkey quote the name with ', Redis 6.2 with `: both mean no module.
    assert no_module(redis.ResponseError("unknown command 'RL.FIXED', with args beginning with: 'k' "))
    assert no_module(redis.ResponseError("unknown command `RL.FIXED`, with args beginning with: `k`, "))
    assert not no_module(redis.ResponseError("unknown command `FOO`, with args beginning with: "))
    assert not no_module(redis.ResponseError("syntax error: unknown option 'RL.X'"))
