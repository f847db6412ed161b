"""Retrying provider calls: exponential backoff with jitter, `Retry-After`, inside a deadline.

Only errors marked `retryable` (429, 5xx, connection failures, a timed-out attempt) are tried
again, at most `max_retries` times. The wait is the provider's `Retry-After` when it sent one,
else `base_delay * 2**n` with "equal jitter" (between half and all of it), capped at `max_delay`.
A wait that would end past the deadline is not taken: the last error is raised at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from typing import TypeVar

import attrs

from hookwise.server.runtime.providers.base import ProviderError

T = TypeVar("T")


@attrs.frozen
class RetryPolicy:
    """How often and how patiently to retry. `sleep` and `random` are injectable for tests."""

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    sleep: Callable[[float], Awaitable[None]] = attrs.field(
        default=asyncio.sleep, eq=False, repr=False
    )
    random: Callable[[], float] = attrs.field(default=random.random, eq=False, repr=False)

    def backoff(self, retry_number: int) -> float:
        """The jittered wait before retry number `retry_number` (0-based)."""
        full = min(self.max_delay, self.base_delay * (2**retry_number))
        return full / 2 + self.random() * full / 2

    async def run(self, attempt: Callable[[], Awaitable[T]], *, deadline: float) -> T:
        """Call `attempt` until it succeeds, fails for good, or the budget is spent."""
        retries = 0
        while True:
            try:
                return await attempt()
            except ProviderError as e:
                if not e.retryable or retries >= self.max_retries:
                    raise
                delay = e.retry_after if e.retry_after is not None else self.backoff(retries)
                if time.monotonic() + delay >= deadline:
                    raise
                await self.sleep(delay)
                retries += 1


def parse_retry_after(headers: object, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
