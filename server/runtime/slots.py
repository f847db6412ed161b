"""A run lane's free slots, counted so that a claim takes every slot free when it executes.

A lane claims queued runs for its free slots. With fast runs (a quick model, a full queue) the
slots free one after another within a millisecond or two, and a claim sized when it was
*submitted* took one run at a time: one commit (and one disk sync) per run, where the store's
writer, which runs the claim a moment later on its own thread, could have taken every slot freed
meanwhile in the same commit. `Slots.take` is called by the claim when it executes, on whichever
thread runs it, and hands it every free slot at that moment; the lane gives back what the claim
did not use.

Taking and giving back are guarded by a lock (the store's writer thread takes, the event loop
gives back); waiting for a free slot happens on the event loop.
"""

from __future__ import annotations

import asyncio
import threading


class Slots:
    """`size` slots; `take` takes all the free ones at once, `give` returns some."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._freed = asyncio.Event()
        #: what the last `take` took (read on the loop once the claim has returned)
        self.taken = 0

    @property
    def free(self) -> int:
        return self._free

    def take(self) -> int:
        """Every free slot, now (any thread): their number, also kept in `taken`."""
        with self._lock:
            taken, self._free = self._free, 0
        self.taken = taken
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
