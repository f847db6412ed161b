"""Waiting for runs to finish: what a hook's answer stage watches when its caller asked to `wait`.

`RunWaiters` keeps, for this process, the runs that requests are waiting on and how many
requests wait (at most `max_waiting`: a waiting request holds a connection, never a lane slot).
A wait reads the run from the store, and reads it again each time it is woken, until the run is
in a final state or the wait is over. It is woken:

- by this process's run lanes, the moment they commit a run's ending (`finished`);
- with several processes (`shared`), by the store's signal `runs_done`, which every process
  sends after committing an ending (the run may have been claimed by another process);
- by a slow poll (`POLL_SECONDS`), which covers a signal lost while the store's listening
  connection was being re-established.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from .. import metrics
from ..store.base import RunRecord, Store

log = logging.getLogger("hookwise.waiting")

#: the states a run ends in
FINAL_STATES = frozenset({"succeeded", "failed", "timed_out"})
#: the store topic of "a run ended" (sent by every process when `shared`)
TOPIC = "runs_done"
POLL_SECONDS = 2.0


class WaitingFull(Exception):
    """`max_waiting` requests are already waiting in this process."""


class RunWaiters:
    """The runs this process's requests wait for, and the wake-ups of those waits."""

    def __init__(self, store: Store, *, max_waiting: int, shared: bool = False) -> None:
        self._store = store
        self.max_waiting = max_waiting
        self._shared = shared
        #: one event per run waited for, and how many requests wait on it
        self._events: dict[str, asyncio.Event] = {}
        self._holders: dict[str, int] = {}
        #: requests waiting now
        self.waiting = 0

    def start(self) -> None:
        """Listen for runs ending in other processes (when several share the store)."""
        if self._shared:
            self._store.subscribe(TOPIC, self._wake_all)

    def finished(self, run_id: str) -> None:
        """A run of this process committed its ending: wake whoever waits for it."""
        event = self._events.get(run_id)
        if event is not None:
            event.set()

    async def read(self, run_id: str) -> RunRecord | None:
        """The run as the store has it now."""
        return await self._store.get_run(run_id)

    def _wake_all(self) -> None:
        for event in self._events.values():
            event.set()

    async def wait(self, run_id: str, seconds: float) -> RunRecord | None:
        """The run once it has ended, or None when `seconds` passed first (or it is gone).

        Raises `WaitingFull` at once when `max_waiting` requests already wait.
        """
        if self.waiting >= self.max_waiting:
            metrics.waited("full")
            raise WaitingFull(run_id)
        self.waiting += 1
        metrics.waiting(1)
        event = self._events.setdefault(run_id, asyncio.Event())
        self._holders[run_id] = self._holders.get(run_id, 0) + 1
        outcome = "timeout"
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            while True:
                event.clear()  # cleared before reading: an ending committed after is not missed
                run = await self._store.get_run(run_id)
                if run is None:
                    outcome = "gone"
                    return None
                if run.state in FINAL_STATES:
                    outcome = "finished"
                    return run
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(remaining, POLL_SECONDS)):
                        await event.wait()
        except asyncio.CancelledError:
            outcome = "cancelled"  # the caller went away
            raise
        finally:
            self.waiting -= 1
            metrics.waiting(-1)
            metrics.waited(outcome)
            left = self._holders[run_id] - 1
            if left:
                self._holders[run_id] = left
            else:
                del self._holders[run_id]
                self._events.pop(run_id, None)
