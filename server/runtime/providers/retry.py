"""Retrying provider calls: tenacity, with hookwise's one backoff policy, inside a deadline.

Only errors marked `retryable` (429, 5xx, connection failures, a timed-out attempt) are tried
again, at most `max_retries` times. The wait is `hookwise.server.retry.Backoff`: exponential
from `base_delay`, equal jitter, capped at `max_delay`, and never shorter than the provider's
`Retry-After`. A wait that would end past the deadline is not taken: the last error is raised
at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import tenacity

from ...retry import Backoff, retry_after_from_headers
from .base import ProviderError

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

    def backoff(self, retry_number: int, retry_after: float | None = None) -> float:
        """The jittered wait before retry number `retry_number` (0-based)."""
        policy = Backoff(base=self.base_delay, cap=self.max_delay)
        return policy.delay(retry_number, rand=self.random(), retry_after=retry_after)

    async def run(self, attempt: Callable[[], Awaitable[T]], *, deadline: float) -> T:
        """Call `attempt` until it succeeds, fails for good, or the budget is spent."""

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            retry_after = error.retry_after if isinstance(error, ProviderError) else None
            return self.backoff(state.attempt_number - 1, retry_after)

        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(
                lambda e: isinstance(e, ProviderError) and e.retryable
            ),
            stop=tenacity.stop_after_attempt(self.max_retries + 1) | _PastDeadline(deadline),
            wait=wait,
            sleep=self.sleep,
            reraise=True,
        )
        return await retrying(attempt)


def parse_retry_after(headers: object, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    return retry_after_from_headers(headers, now=now)


class _PastDeadline(tenacity.stop.stop_base):
    """Stop when the next wait would end past the deadline (a `time.monotonic()` instant)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return time.monotonic() + (retry_state.upcoming_sleep or 0.0) >= self.deadline
