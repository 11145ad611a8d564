"""HTTP headers from a decision: the IETF RateLimit fields and the legacy ones.

draft-ietf-httpapi-ratelimit-headers:
  RateLimit-Policy: "<name>";q=<limit>;w=<window s>      one item per limit
  RateLimit:        "<name>";r=<remaining>;t=<seconds until full budget>
plus Retry-After on denials that can pass later. All seconds are rounded up,
so a client that honours them is never refused for having come a few ms early.
"""

from __future__ import annotations

from typing import List, Tuple

from .limits import Decision, ceil_seconds

Headers = List[Tuple[str, str]]


def _sf_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ratelimit_headers(decision: Decision, *, legacy: bool = False) -> Headers:
    """The response headers for `decision`; none when Redis could not decide."""
    if decision.error is not None:
        return []
    parts = decision.parts or (decision,)
    policy = ", ".join(
        f"{_sf_string(p.limit.name)};q={p.limit.limit};w={ceil_seconds(p.limit.window_ms)}"
        for p in parts
        if p.limit is not None
    )
    state = ", ".join(
        f"{_sf_string(p.limit.name)};r={p.remaining};t={ceil_seconds(p.reset_after_ms)}"
        for p in parts
        if p.limit is not None
    )
    headers: Headers = [("RateLimit-Policy", policy), ("RateLimit", state)]
    if decision.retry_after is not None and not decision.allowed:
        headers.append(("Retry-After", str(decision.retry_after)))
    if legacy:
        binding = _binding(decision)
        assert binding.limit is not None
        headers += [
            ("X-RateLimit-Limit", str(binding.limit.limit)),
            ("X-RateLimit-Remaining", str(binding.remaining)),
            ("X-RateLimit-Reset", str(ceil_seconds(binding.reset_after_ms))),
        ]
    return headers


def _binding(decision: Decision) -> Decision:
    """The one limit the single-valued legacy headers describe.

    Denied: the denying limit that keeps the client out longest. Allowed: the one
    with the least left. Ties go to the earlier limit.
    """
    parts = decision.parts or (decision,)
    if decision.allowed:
        return min(parts, key=lambda p: p.remaining)
    denying = [p for p in parts if not p.allowed]
    return max(denying, key=lambda p: float("inf") if p.never else p.retry_after_ms)
