"""`Retry-After`, and the one back-off policy as the server's retry loops use it.

The policy itself is `hookwise.plumbing.backoff.Backoff` (exponential, capped, with a jitter
share, `Retry-After` as a floor), re-exported here; every retry loop asks it for its wait: the
provider calls (retried in-process with tenacity, inside a deadline), the delivery worker (which
stores the next attempt's time in its row, so a restart keeps it), the mail watcher and poster,
the pull sources, the MCP reconnects, the approval requests sent to chat services, PostgreSQL's
reconnects (LISTEN, the accept lane, the group-commit writer), the run recorder and a run's final
commit, the SQLite writer's restarts, the sandbox workers' restarts and the gateway workers'
restarts.

`retry_after_seconds` reads a `Retry-After` value: delta-seconds, or an HTTP date. A date with
the zone `-0000` (RFC 5322's "UTC, origin unknown") or none is UTC, not the machine's local time.
`retry_after_from_headers` also reads `retry-after-ms` (OpenAI-compatible servers send it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from ..plumbing.backoff import MAX_RETRY_AFTER, Backoff, Retries


def retry_after_seconds(value: str | None, *, now: float) -> float | None:
    """Seconds to wait from a `Retry-After` value (delta-seconds or HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000" and zone-less dates are UTC
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def retry_after_from_headers(
    headers: Any, *, now: float | None = None, clock: Callable[[], float] = time.time
) -> float | None:
    """The wait a response asks for: `retry-after-ms` (milliseconds) first, then `Retry-After`."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            value = float(ms) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return max(0.0, value)
    return retry_after_seconds(get("retry-after"), now=clock() if now is None else now)


__all__ = [
    "MAX_RETRY_AFTER",
    "Backoff",
    "Retries",
    "retry_after_from_headers",
    "retry_after_seconds",
]
