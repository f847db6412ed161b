"""Durability that does not wait on itself: the WAL's fsync on a thread of its own, beside the
group-commit writer (`store.synchronous: full`).

SQLite's `synchronous=FULL` syncs the WAL inside every commit, so the writer's next batch waits
for the sync of the last one, and the request rate is capped at about connections / (commit +
fsync) whatever the CPU. Instead the writer commits with `synchronous=NORMAL` (a commit is a
`write()` into the WAL, in the page cache: it survives the death of any process, `kill -9`
included, not a power cut or a kernel crash) and hands each batch's results to a `WalFlusher`.
The flusher takes every result waiting, fsyncs the WAL file, and only then releases them: every
batch it releases was committed before its fsync began, so the fsync covers it (the WAL is
written in order, and a sync of a file covers everything written to it before). Meanwhile the
writer goes on with the next batch, whose results the next fsync releases.

Why the rest of SQLite's guarantees hold: with `NORMAL`, SQLite still syncs the WAL before each
checkpoint copies it into the database, syncs the database after, and syncs the WAL's header
when it starts the file over; a WAL frame that was written and not synced when the power went is
dropped at recovery by its checksum, with every frame after it (the database stays consistent,
only the unsynced tail of commits is gone, and no request of that tail was acknowledged).

What changes: another connection (a reader: the admin API, a heartbeat's read of pending events)
may see a commit up to one fsync before it is acknowledged. After a power cut such a write may be
gone although it was seen; its request was never acknowledged, so its sender sends it again (at
least once).

An fsync that fails fails every write it was to cover (the requests are answered with an error,
never acknowledged), and says so in the log.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..base import StoreUnavailable

log = logging.getLogger("hookwise.store")

#: a job's outcome: its future (in the writer process, its id), its value, or its error
Result = tuple[Any, Any, BaseException | None]

#: an fsync slower than this is logged (a stalled disk holds every request waiting on it)
SLOW_SYNC = 1.0

_sync = getattr(os, "fdatasync", os.fsync)


class SyncFailed(StoreUnavailable):
    """The WAL's fsync failed: the writes it was to cover are committed but may not be on disk
    (they are answered as the store being unavailable; sent again, an idempotent write finds
    itself already there)."""


class WalFlusher:
    """A thread that fsyncs the WAL file `wal` and then `deliver`s the results of every batch
    committed before that fsync began (see the module's docstring)."""

    def __init__(
        self,
        wal: Path,
        deliver: Callable[[list[Result]], None],
        *,
        name: str = "hookwise-sqlite-flusher",
    ) -> None:
        self._wal = wal
        self._deliver = deliver
        self._waiting: list[Result] = []
        self._cond = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, results: list[Result]) -> None:
        """Release `results` (of a batch just committed) after the next fsync that begins."""
        with self._cond:
            self._waiting += results
            self._cond.notify()

    def stop(self) -> None:
        """Sync and release what is waiting, then end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stopping:
                    self._cond.wait()
                results, self._waiting = self._waiting, []
                stopping = self._stopping
            if results:
                self._deliver(self._synced(results))
            if stopping:
                with self._cond:
                    results, self._waiting = self._waiting, []
                if results:
                    self._deliver(self._synced(results))
                return

    def _synced(self, results: list[Result]) -> list[Result]:
        """`results` once the WAL is synced; each write an error if the sync failed."""
        start = time.monotonic()
        try:
            self.sync()
        except OSError as e:
            log.error(
                "fsync of the WAL %s failed (%s): %d writes refused", self._wal, e, len(results)
            )
            error = SyncFailed(f"the store could not sync its log to disk: {e}")
            return [(fut, None, error) for fut, _, _ in results]
        took = time.monotonic() - start
        if took >= SLOW_SYNC:
            log.warning("fsync of the WAL took %.1f s: %d writes waited for it", took, len(results))
        return results

    def sync(self) -> None:
        """fsync the WAL file as it is now. It is opened for each sync: SQLite may truncate it
        (or, once every connection is closed, delete and make it again), and a file descriptor
        kept open could name a file SQLite no longer writes."""
        try:
            fd = os.open(self._wal, os.O_RDONLY)
        except FileNotFoundError:
            return  # no WAL: every commit was checkpointed into the database, which SQLite synced
        try:
            _sync(fd)
        finally:
            os.close(fd)
