"""Shadow mode, shared by the middlewares and every adapter: a request the limiter
would refuse goes through, and the would-be denial is reported and counted, so a
new limit can be rolled out and watched before it is enforced."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from typing import Callable, ContextManager, Optional

from .limits import Decision
from .metrics import shadowing

logger = logging.getLogger("redis_rl")

ShadowHandler = Callable[[Decision, str], None]
"""Called with the real (denying) decision and what was limited (a key or a name)."""


def _log_denial(decision: Decision, what: str) -> None:
    logger.warning(
        "redis-rl: shadow mode: would have denied %s (remaining=%s, retry_after_ms=%s)",
        what,
        decision.remaining,
        decision.retry_after_ms,
    )


class Shadow:
    """`passes(decision, what, label)` says whether a request goes through: allowed,
    or denied by a limit while shadow mode is on. Then it is reported to
    `on_denial(decision, what)` (default: a warning on the `redis_rl` logger) and
    counted in `denials` and in `by_label`, by a label of bounded cardinality (the
    limit, never the client). A failure-policy decision is not a limit's: it is
    left as it is."""

    def __init__(self, enabled: bool = False, on_denial: Optional[ShadowHandler] = None) -> None:
        self.enabled = bool(enabled)
        self.on_denial = on_denial or _log_denial
        self.denials = 0
        self.by_label: Counter[str] = Counter()

    def watching(self) -> ContextManager[None]:
        """Wraps the limiter calls whose denials `passes` will let through, so the
        limiter's metrics count them as shadow_denied, not denied."""
        return shadowing() if self.enabled else contextlib.nullcontext()

    def passes(self, decision: Decision, what: str, label: str) -> bool:
        if decision.allowed:
            return True
        if not self.enabled or decision.error is not None:
            return False
        self.denials += 1
        self.by_label[label] += 1
        try:
            self.on_denial(decision, what)
        except Exception:  # a broken reporter must not take the request down with it
            logger.exception("redis-rl: the shadow on_denial handler raised")
        return True
