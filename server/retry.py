"""Backoff with jitter and `Retry-After`, for every retry loop in hookwise.

One policy, three users: the provider calls (retried in-process with tenacity, inside a
deadline), the delivery worker (which stores the next attempt's time in its row, so a restart
keeps it) and the mail watcher (reconnects and posts to the gateway). Each asks `Backoff.delay`
for the wait before the next try:

- exponential: `base * 2**n` for the n-th retry (0-based), capped at `cap`;
- "equal jitter": a uniform draw between half and all of that step, so clients that failed
  together do not come back together;
- never shorter than what the server asked for in `Retry-After` (which may exceed `cap`).

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

import attrs

MAX_RETRY_AFTER = 86400.0
"""The longest `Retry-After` honoured (a day): a server cannot park a retry for ever."""


@attrs.frozen
class Backoff:
    """Exponential backoff with equal jitter, capped; `Retry-After` is a floor."""

    base: float = 0.5
    cap: float = 20.0

    def step(self, retry: int) -> float:
        """The un-jittered wait before retry number `retry` (0-based), capped."""
        exponent = min(max(0, retry), 62)
        return min(self.cap, self.base * (2**exponent))

    def delay(self, retry: int, *, rand: float, retry_after: float | None = None) -> float:
        """The wait before retry `retry`; `rand` is a uniform draw in [0, 1)."""
        full = self.step(retry)
        wait = full / 2 + min(max(rand, 0.0), 1.0) * full / 2
        if retry_after is not None and math.isfinite(retry_after):
            wait = max(wait, min(retry_after, MAX_RETRY_AFTER))
        return wait


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


__all__ = ["Backoff", "retry_after_from_headers", "retry_after_seconds"]
