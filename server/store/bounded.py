"""How long a request waits for the store: `STORE_WAIT` seconds at most.

A write that the store has not answered by then (its writer is paused, stuck or being replaced,
the database is unreachable) is given up by the request: `StoreUnavailable`, answered `503
store_unavailable` with `Retry-After: RETRY_AFTER`. The write itself may still be committed
later (it was handed over): a sender that retries with an `Idempotency-Key` gets it once. A 503
is never an acknowledgment, so nothing is acknowledged unwritten. The runtime's own writes (a
run's ending) are not bounded this way: they wait, and are retried (see `runtime.runs`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ...engine.errors import RequestError
from .base import StoreUnavailable

T = TypeVar("T")

#: seconds a request waits for a store write before it is answered 503 (see docs/faults.md)
STORE_WAIT = 10.0
#: the `Retry-After` (seconds) of that answer
RETRY_AFTER = 5


async def within_store_wait(write: Awaitable[T], seconds: float = STORE_WAIT) -> T:
    """`await write`, for at most `seconds`; `StoreUnavailable` after that."""
    try:
        async with asyncio.timeout(seconds):
            return await write
    except TimeoutError:
        raise StoreUnavailable(f"the store did not answer within {seconds:g} s") from None


def store_unavailable(error: StoreUnavailable) -> RequestError:
    """The answer to a request that `error` kept from being written."""
    return RequestError(503, "store_unavailable", f"the request was not stored: {error}; try again")


def retry_after_store() -> list[tuple[bytes, bytes]]:
    """The `Retry-After` header of that answer."""
    return [(b"retry-after", str(RETRY_AFTER).encode())]


class WriterProbe:
    """Readiness's probe of a store's writer: a write of nothing, answered within a deadline.
    One probe at a time: while a probe waits at a stuck writer, later checks wait for the same
    one instead of piling up more writes behind it."""

    def __init__(self, submit: Callable[[], Awaitable[object]]) -> None:
        self._submit = submit
        self._pending: asyncio.Future[object] | None = None

    async def problem(self, deadline: float) -> str | None:
        """Why the writer is not ready (it does not answer within `deadline` s), or None."""
        if self._pending is None or self._pending.done():
            self._pending = asyncio.ensure_future(self._submit())
        try:
            async with asyncio.timeout(deadline):
                await asyncio.shield(self._pending)
        except TimeoutError:
            return f"the store's writer did not answer a probe within {deadline:g} s"
        except Exception as e:
            return f"the store's writer failed a probe ({type(e).__name__}: {e})"
        return None
