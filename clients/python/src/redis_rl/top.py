"""RL.TOP across a deployment: the keys the servers denied most, merged.

Each server keeps its own summary (RL.TOP is not replicated), so in a cluster every
primary is asked and the answers are merged: a key lives on one primary, so merging
is a union sorted by denials (after a slot migration a key may appear on two, and its
counts add, errors included)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["TopEntry", "top", "top_async"]


@dataclass(frozen=True)
class TopEntry:
    key: str
    denied: int
    admitted: int
    #: The true denial count is between ``denied - error`` and ``denied``.
    error: int
    last_denied_ms: int
    command: str
    algorithm: str


def _text(v: Any) -> str:
    return v.decode("utf-8", "backslashreplace") if isinstance(v, bytes) else str(v)


def _entry(row: Any) -> TopEntry:
    if isinstance(row, dict):  # RESP3
        fields = {_text(k): v for k, v in row.items()}
    else:  # RESP2: field, value, field, value...
        fields = {_text(row[i]): row[i + 1] for i in range(0, len(row) - 1, 2)}
    return TopEntry(
        key=_text(fields["key"]),
        denied=int(fields["denied"]),
        admitted=int(fields["admitted"]),
        error=int(fields["error"]),
        last_denied_ms=int(fields["last_denied_ms"]),
        command=_text(fields["command"]),
        algorithm=_text(fields["algorithm"]),
    )


def _args(count: int, algorithm: Optional[str], reset: bool) -> List[Any]:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError("count must be a positive integer")
    args: List[Any] = ["RL.TOP", "COUNT", count]
    if algorithm is not None:
        args += ["ALGORITHM", algorithm]
    if reset:
        args.append("RESET")
    return args


def merge(answers: Sequence[Sequence[TopEntry]], count: int) -> List[TopEntry]:
    """The servers' answers as one list, worst first."""
    by_key: Dict[str, TopEntry] = {}
    for answer in answers:
        for e in answer:
            seen = by_key.get(e.key)
            if seen is None:
                by_key[e.key] = e
                continue
            latest = e if e.last_denied_ms >= seen.last_denied_ms else seen
            by_key[e.key] = TopEntry(
                key=e.key,
                denied=seen.denied + e.denied,
                admitted=seen.admitted + e.admitted,
                error=seen.error + e.error,
                last_denied_ms=latest.last_denied_ms,
                command=latest.command,
                algorithm=latest.algorithm,
            )
    return sorted(by_key.values(), key=lambda e: (-e.denied, e.key))[:count]


def top(client: Any, count: int = 10, algorithm: Optional[str] = None, reset: bool = False) -> List[TopEntry]:
    """RL.TOP on a redis-py client: a ``Redis`` (one server) or a ``RedisCluster``
    (every primary, merged). Errors (an unknown algorithm, a server without the
    module) are raised as redis-py raises them."""
    args = _args(count, algorithm, reset)
    primaries = getattr(client, "get_primaries", None)
    if primaries is None:
        return merge([[_entry(r) for r in client.execute_command(*args)]], count)
    answers = []
    for node in primaries():
        rows = client.execute_command(*args, target_nodes=node)
        answers.append([_entry(r) for r in rows])
    return merge(answers, count)


async def top_async(
    client: Any, count: int = 10, algorithm: Optional[str] = None, reset: bool = False
) -> List[TopEntry]:
    """`top` on a ``redis.asyncio`` client: a ``Redis`` or a ``RedisCluster``, whose
    primaries are asked at once."""
    args = _args(count, algorithm, reset)
    if getattr(client, "get_primaries", None) is None:
        return merge([[_entry(r) for r in await client.execute_command(*args)]], count)
    # The asyncio cluster client learns its primaries on first use.
    await client.initialize()
    answers = await asyncio.gather(
        *(client.execute_command(*args, target_nodes=node) for node in client.get_primaries())
    )
    return merge([[_entry(r) for r in rows] for rows in answers], count)
