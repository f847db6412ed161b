"""A run lane's free slots, counted so that a claim takes every slot free when it executes.

A lane claims queued runs for its free slots. With fast runs (a quick model, a full queue) the
slots free one after another within a millisecond or two, and a claim sized when it was
*submitted* took one run at a time: one commit (and one disk sync) per run, where the store's
writer, which runs the claim a moment later on its own thread, could have taken every slot freed
meanwhile in the same commit. A claim's limit is therefore a `Grant`: the store calls it when the
claim executes, on whichever thread runs it, and it takes every slot free at that moment; the
lane gives back what the claim did not use.

A store may execute one claim more than once: PostgreSQL's writer runs a batch again, with a
savepoint per job, when another job of the batch failed, and retries a batch that hit a
deadlock or lost its connection before committing. A grant takes slots on its first call only
and answers the same number on every later one, so a claim run again neither takes more slots
nor loses the ones it holds.

Taking and giving back are guarded by a lock (the store's writer thread takes, the event loop
gives back); waiting for a free slot happens on the event loop.
"""

from __future__ import annotations

import asyncio
import threading


class Slots:
    """`size` slots; a `grant` takes all the free ones at once, `give` returns some."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._freed = asyncio.Event()

    @property
    def free(self) -> int:
        return self._free

    def grant(self) -> Grant:
        """The limit of one claim (see `Grant`)."""
        return Grant(self)

    def _take_all(self) -> int:
        with self._lock:
            taken, self._free = self._free, 0
        return taken

    def give(self, n: int = 1) -> None:
        """Return `n` slots (on the event loop)."""
        if n <= 0:
            return
        with self._lock:
            self._free += n
        self._freed.set()

    async def any_free(self) -> None:
        """Until at least one slot is free (on the event loop)."""
        while True:
            with self._lock:
                if self._free > 0:
                    return
                self._freed.clear()
            await self._freed.wait()


class Grant:
    """The slots one claim holds: every slot free at its first call, taken then; the same number
    at every later call (a claim the store runs again). `taken` is None until it is called."""

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self.taken: int | None = None

    def __call__(self) -> int:
        if self.taken is None:
            self.taken = self._slots._take_all()
        return self.taken
