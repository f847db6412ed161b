"""Group commit: one writer thread owns the write connection and commits work in batches.

Requests hand the writer a function of the connection and await a future. The writer takes
everything that is waiting, runs each function inside its own savepoint of one transaction,
commits once, and then resolves every future. Under load, requests that arrive while a commit is
being made to disk ride the next commit together, so durability costs one fsync per batch rather
than one per request. A function that fails rolls back only its own savepoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

_STOP = object()
MAX_BATCH = 1024


class _Job(Generic[T]):
    __slots__ = ("fn", "future")

    def __init__(self, fn: Callable[[Any], T], future: asyncio.Future[T] | None) -> None:
        self.fn = fn
        self.future = future


def _settle(results: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for fut, value, error in results:
        if fut.done():
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)


class GroupCommitWriter:
    """A thread that runs write jobs against one SQLite connection, committing per batch.

    `connect` is called in the writer thread. `exclusive`, when given, is entered around every
    batch: with several processes on one database it is a blocking inter-process lock, so that a
    writer waits its turn without SQLite's busy handler (which sleeps in growing steps and turns
    contention into long stalls).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        name: str = "hookwise-writer",
        exclusive: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
    ) -> None:
        self._connect = connect
        self._exclusive = exclusive or contextlib.nullcontext
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        #: time.monotonic() of the last batch; lets maintenance wait for a quiet moment
        self.last_batch_at = 0.0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise self._startup_error

    def stop(self) -> None:
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def submit(self, fn: Callable[[Any], T]) -> asyncio.Future[T]:
        """Run `fn(connection)` in the next batch; the future resolves after the commit."""
        assert self._loop is not None, "writer not started"
        fut: asyncio.Future[T] = self._loop.create_future()
        self._queue.put(_Job(fn, fut))
        return fut

    def submit_nowait(self, fn: Callable[[Any], Any]) -> None:
        """Run `fn(connection)` in the next batch; nobody waits for it."""
        self._queue.put(_Job(fn, None))

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as e:  # reported to start()
            self._startup_error = e
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                first = self._queue.get()
                if first is _STOP:
                    return
                batch = [first]
                stop = False
                while len(batch) < MAX_BATCH:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                with self._exclusive():
                    self._run_batch(conn, batch)
                self.last_batch_at = time.monotonic()
                if stop:
                    return
        finally:
            conn.close()

    def _run_batch(self, conn: Any, batch: list[_Job[Any]]) -> None:
        results: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        cur = conn.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            for job in batch:
                cur.execute("SAVEPOINT job")
                try:
                    value = job.fn(cur)
                except Exception as e:
                    cur.execute("ROLLBACK TO job")
                    cur.execute("RELEASE job")
                    if job.future is None:
                        log.error("background write failed: %s", type(e).__name__)
                    else:
                        results.append((job.future, None, e))
                    continue
                cur.execute("RELEASE job")
                if job.future is not None:
                    results.append((job.future, value, None))
            cur.execute("COMMIT")
        except Exception as e:
            log.exception("commit failed; %d writes refused", len(batch))
            with contextlib.suppress(Exception):
                cur.execute("ROLLBACK")
            results = [(j.future, None, e) for j in batch if j.future is not None]
        finally:
            cur.close()
        if results and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(_settle, results)
