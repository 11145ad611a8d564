"""Where decisions are made: the module's RL.* commands, or the Lua scripts in
`scripts/` with the same contract (arguments, replies, error texts, keys) on a server
that cannot load the module. Both work on the same keys, so a fleet can deploy the kit
first and load the module later.

A script call is `EVALSHA <sha> <numkeys> <KEYS...> <ARGV...>`: ARGV is the module
command's arguments after its name, unchanged; KEYS are its keys, in order (the limits'
keys). The keys the scripts derive from them (window counters, lease sets) are named
inside the script and share the key's slot through its {hash tag}, as the module's do.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from typing import Any, List, Sequence, Tuple

import redis

BACKENDS = ("auto", "module", "scripts")

RECHECK_US = 60_000_000
"""Auto, on the scripts: how often (the limiter's time) a call asks the module again.
redis-py reconnects silently and MODULE LOAD needs no reconnect at all, so a change of
server cannot always be seen; a lost connection also makes the next call ask."""

_FILES = {
    "RL.FIXED": "fixed", "RL.COUNTER": "counter", "RL.SLIDECOUNT": "slidecount", "RL.SLIDELOG": "slidelog",
    "RL.SLIDEWINDOW": "slidewindow", "RL.GCRA": "gcra", "RL.TOKENBUCKET": "tokenbucket", "RL.CONCURRENCY": "concurrency", "RL.THROTTLE": "throttle",
    "RL.ALL": "all",
}


def check_backend(backend: Any) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'auto', 'module' or 'scripts', not {backend!r}")
    return str(backend)


def has_script(command: Any) -> bool:
    """RL.PSEUDONYM has none: Redis Lua has no SHA-256 (the kit computes it)."""
    return command in _FILES


@lru_cache(maxsize=None)
def script(command: str) -> Tuple[str, str]:
    """(sha1, body) of the script that answers `command`, read once."""
    body = resources.files(__package__).joinpath(f"scripts/{_FILES[command]}.lua").read_text()
    return hashlib.sha1(body.encode()).hexdigest(), body


def evalsha(args: Sequence[Any], keys: Sequence[str]) -> List[Any]:
    sha, _ = script(str(args[0]))
    return ["EVALSHA", sha, len(keys), *keys, *args[1:]]


def eval_(args: Sequence[Any], keys: Sequence[str]) -> List[Any]:
    """The same call with the script's text: it runs, and the server caches it under
    the same sha, on the node that owns the keys."""
    _, body = script(str(args[0]))
    return ["EVAL", body, len(keys), *keys, *args[1:]]


def no_module(error: Any) -> bool:
    """Whether a reply says the server has no such RL.* command (Redis 7+ quotes the
    name with ', Redis 6.2 with `)."""
    text = str(error).lower()
    return (
        isinstance(error, redis.ResponseError)
        and text.startswith("unknown command")
        and ("'rl." in text or "`rl." in text)
    )


def no_script(error: Any) -> bool:
    """NOSCRIPT: a restart, a failover or SCRIPT FLUSH emptied the server's cache."""
    return isinstance(error, redis.exceptions.NoScriptError)


def lost(error: Any) -> bool:
    """A lost or refused connection: the next one may be another server, or one that
    has loaded the module since."""
    return isinstance(error, (redis.ConnectionError, redis.TimeoutError))
