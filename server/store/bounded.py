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
import collections
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ...engine.errors import RequestError
from .base import StoreUnavailable

T = TypeVar("T")

#: seconds a request waits for a store write before it is answered 503 (see docs/faults.md)
STORE_WAIT = 10.0
#: the `Retry-After` (seconds) of that answer
RETRY_AFTER = 5


async def within_store_wait(write: Awaitable[T], seconds: float = STORE_WAIT) -> T:
    """`await write`, for at most `seconds`; `StoreUnavailable` after that.

    Every request takes this wait, so it is not an `asyncio.timeout` each (a timer armed and
    cancelled per request): the waits of a loop share one `_Deadlines` sweep, which cancels the
    task of a wait past its deadline as `asyncio.timeout` would (and only that cancellation is
    turned into `StoreUnavailable`; anyone else's passes through)."""
    task = asyncio.current_task()
    if task is None:  # not in a task (never on the hook path): the plain way
        return await _timed(write, seconds)
    wait = _deadlines(task.get_loop(), seconds).add(task, seconds)
    try:
        return await write
    except asyncio.CancelledError:
        if wait.fired and task.uncancel() <= wait.cancelling:
            raise StoreUnavailable(f"the store did not answer within {seconds:g} s") from None
        raise
    finally:
        wait.task = None  # done: the sweep drops it


async def _timed(write: Awaitable[T], seconds: float) -> T:
    try:
        async with asyncio.timeout(seconds):
            return await write
    except TimeoutError:
        raise StoreUnavailable(f"the store did not answer within {seconds:g} s") from None


class _Wait:
    """One bounded wait: its task (None once it is over), its deadline (loop time), the
    task's cancellation count when it began, and whether the sweep cancelled it."""

    __slots__ = ("cancelling", "deadline", "fired", "task")

    def __init__(self, task: asyncio.Task[Any], deadline: float) -> None:
        self.task: asyncio.Task[Any] | None = task
        self.deadline = deadline
        self.cancelling = task.cancelling()
        self.fired = False


class _Deadlines:
    """The bounded waits of one event loop, in the order they began; one timer, at the oldest
    wait's deadline. A wait of another length than the loop's first is kept apart (its own
    `_Deadlines`), so that each queue stays in deadline order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waits: collections.deque[_Wait] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, task: asyncio.Task[Any], seconds: float) -> _Wait:
        wait = _Wait(task, self._loop.time() + seconds)
        waits = self._waits
        while waits and waits[0].task is None:  # those over (waits end about in order)
            waits.popleft()
        waits.append(wait)
        if self._timer is None:
            self._timer = self._loop.call_at(wait.deadline, self._sweep)
        return wait

    def _sweep(self) -> None:
        self._timer = None
        now = self._loop.time()
        waits = self._waits
        while waits:
            oldest = waits[0]
            task = oldest.task
            if task is not None and oldest.deadline > now:
                self._timer = self._loop.call_at(oldest.deadline, self._sweep)
                return
            waits.popleft()
            if task is not None:  # still waiting at its deadline: end it as a timeout does
                oldest.fired = True
                task.cancel()


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[float, _Deadlines]] = (
    weakref.WeakKeyDictionary()
)


_last: tuple[asyncio.AbstractEventLoop | None, float, _Deadlines | None] = (None, 0.0, None)


def _deadlines(loop: asyncio.AbstractEventLoop, seconds: float) -> _Deadlines:
    global _last
    last_loop, last_seconds, last = _last
    if last_loop is loop and last_seconds == seconds and last is not None:
        return last
    by_length = _LOOPS.get(loop)
    if by_length is None:
        by_length = _LOOPS[loop] = {}
    found = by_length.get(seconds)
    if found is None:
        found = by_length[seconds] = _Deadlines(loop)
    _last = (loop, seconds, found)
    return found


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
