"""Group commit: one writer thread owns the write connection and commits work in batches.

Requests hand the writer a function of the connection and await a future. The writer takes
everything that is waiting, runs each function inside its own savepoint of one transaction,
commits once, and then resolves every future. Under load, requests that arrive while a commit is
being made to disk ride the next commit together, so durability costs one fsync per batch rather
than one per request. A function that fails rolls back only its own savepoint.

Most of the hot writes need no read first (an accepted request without an idempotency key, a
refused request's log line, a finished run): they are handed over as rows (`submit_rows`), and
the writer writes the rows of consecutive such jobs together: a batch of nothing else as one
statement in autocommit mode (`inserts.BatchWrite`), a run of them inside a mixed batch as one
statement under one savepoint. Each statement is a round trip through the GIL (the sqlite3
module releases it around every step), and the event loop holds the GIL most of the time, so
statements per batch, not rows, are what a batch costs under load. If a merged write fails, it
is rolled back and its jobs run one by one, each in its own savepoint, so a failing job still
fails alone.

With `store.synchronous: full` the commit itself does not sync: a `WalFlusher` (`flusher`) fsyncs
the WAL beside the writer and releases each batch's results once a sync begun after its commit
has returned, while the writer goes on with the next batch (see `flusher` for why that keeps
SQLite's guarantees).

A savepoint is two statements more; a job that is itself a single statement (the run lane's
claims, `submit(..., one_statement=True)`) and the batch statement need none: SQLite undoes a
failed statement's own changes and keeps the transaction open. When an error ends the whole
transaction instead (disk full, I/O), the batch fails as a whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from .flusher import Result, WalFlusher
from .inserts import BatchWrite, Sink, UpdateWhere

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

_STOP = object()
MAX_BATCH = 1024
#: a batch that takes longer to commit than this (seconds) is logged: it holds every write
SLOW_BATCH = 0.1

Rows = tuple[tuple[Sink, tuple[Any, ...]], ...]
__all__ = ["MAX_BATCH", "GroupCommitWriter", "Job", "Late", "Result", "Rows"]


class Late:
    """A job's argument worked out when the job runs, not when it is submitted (the run lane's
    claim: every slot free at that moment). The writer thread calls it as the job runs; the
    writer process cannot call back into the gateway, so a job bound for it takes the value as
    it leaves (see `writer_process`), the last moment the gateway sees."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()


class Job(Generic[T]):
    __slots__ = ("fn", "future", "one_statement", "rows", "value")

    def __init__(
        self,
        fn: Callable[[Any], T] | None,
        future: asyncio.Future[T] | None,
        rows: Rows | None = None,
        value: Any = None,
        *,
        one_statement: bool = False,
    ) -> None:
        self.fn = fn
        self.future = future
        #: a row job: its rows (`fn` is None), and what its future resolves to
        self.rows = rows
        self.value = value
        #: `fn` runs a single statement: SQLite undoes a failed statement's changes by itself
        #: (the transaction stays open), so the job needs no savepoint of its own
        self.one_statement = one_statement

    def run(self, cur: Any) -> Any:
        if self.rows is None:
            assert self.fn is not None
            return self.fn(cur)
        for sink, row in self.rows:
            for sql, params in sink.statements([row]):
                cur.execute(sql, params)
        return self.value


def settle(results: list[Result]) -> None:
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

    `wal`, when given, is the WAL file a `WalFlusher` syncs before a batch's results are
    delivered: `connect` must then open a connection that commits without syncing
    (`synchronous=NORMAL`; see `connect.connect_writer`).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        name: str = "hookwise-writer",
        exclusive: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        batch: BatchWrite | None = None,
        deliver: Callable[[list[Result]], None] | None = None,
        wal: Path | None = None,
        marks: bool = False,
    ) -> None:
        self._connect = connect
        #: each batch's results are led by its mark (see `run_batch`): the writer process's
        self._marks = marks
        self._batch = batch
        #: where a batch's results go (from the writer thread, or the flusher's); by default,
        #: to the futures on the event loop. The writer process sends them to the gateway.
        self._deliver = deliver or self._settle_on_loop
        self._wal = wal
        self._flusher: WalFlusher | None = None
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

    async def open(self) -> None:
        """Start the writer thread (see `start`) on the running loop."""
        self.start(asyncio.get_running_loop())

    async def close(self) -> None:
        """Commit what was submitted, then stop (without blocking the event loop)."""
        await asyncio.get_running_loop().run_in_executor(None, self.stop)

    @property
    def alive(self) -> bool:
        """The writer thread is running."""
        return self._thread.is_alive()

    def submit(self, fn: Callable[[Any], T], *, one_statement: bool = False) -> asyncio.Future[T]:
        """Run `fn(connection)` in the next batch; the future resolves after the commit.

        `one_statement`: `fn` runs exactly one SQL statement (and reads nothing it wrote
        before), so SQLite's statement atomicity isolates its failure without a savepoint: two
        statements, each a wait for the GIL, fewer per job (the run lane's claims)."""
        assert self._loop is not None, "writer not started"
        fut: asyncio.Future[T] = self._loop.create_future()
        self._queue.put(Job(fn, fut, one_statement=one_statement))
        return fut

    def submit_nowait(self, fn: Callable[[Any], Any], *, one_statement: bool = False) -> None:
        """Run `fn(connection)` in the next batch; nobody waits for it."""
        self._queue.put(Job(fn, None, one_statement=one_statement))

    def submit_rows(self, rows: Rows, value: T) -> asyncio.Future[T]:
        """Insert `rows` in the next batch (merged with other jobs' rows); the future resolves to
        `value` after the commit, or to the error if the rows could not be inserted."""
        assert self._loop is not None, "writer not started"
        fut: asyncio.Future[T] = self._loop.create_future()
        self._queue.put(Job(None, fut, rows, value))
        return fut

    def submit_rows_nowait(self, rows: Rows) -> None:
        """Insert `rows` in the next batch; nobody waits for it."""
        self._queue.put(Job(None, None, rows))

    def _run(self) -> None:
        try:
            conn = self.connect()
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
                self.run_batch(conn, batch)
                if stop:
                    return
        finally:
            self.disconnect(conn)

    def connect(self) -> Any:
        """Open the write connection (with the batch statement installed), and start the
        flusher if commits are synced by it."""
        conn = self._connect()
        if self._batch is not None:
            self._batch.install(conn)
        if self._wal is not None and self._flusher is None:
            self._flusher = WalFlusher(self._wal, self._deliver)
            self._flusher.start()
        return conn

    def disconnect(self, conn: Any) -> None:
        """Sync and release what was committed, then close the write connection."""
        if self._flusher is not None:
            self._flusher.stop()
            self._flusher = None
        conn.close()

    def run_batch(self, conn: Any, batch: list[Job[Any]]) -> None:
        """Write `batch` and deliver its results (the writer thread's loop, or the writer
        process's, which has no thread of its own). With `marks`, a batch's results (when it
        has any) are led by its mark, `(0, (start_ns, end_ns, size), None)`: when it started
        and was committed (`time.time_ns()`) and how many jobs it held, for the gateway to
        tell a traced request (`store.commits`)."""
        start = time.monotonic()
        started = time.time_ns() if self._marks else 0
        with self._exclusive():
            self._run_batch(conn, batch, started)
        self.last_batch_at = end = time.monotonic()
        if end - start >= SLOW_BATCH:
            log.warning(
                "a batch of %d writes took %.0f ms to commit (a checkpoint, a wait for the"
                " write lock or the disk): the writes behind it waited as long",
                len(batch),
                (end - start) * 1000,
            )

    def _run_batch(self, conn: Any, batch: list[Job[Any]], started: int) -> None:
        results: list[Result] = []
        committed = False
        cur = conn.cursor()
        try:
            rows_only = _rows_only(batch)
            if not rows_only or not _write_rows(cur, batch, results, self._batch, _ALONE):
                results = []
                cur.execute("BEGIN IMMEDIATE")
                # all rows and their merged write failed: each job alone, not the same merge again
                _run_jobs(cur, batch, results, self._batch, merge=not rows_only)
                cur.execute("COMMIT")
            committed = True
        except Exception as e:
            log.exception("commit failed; %d writes refused", len(batch))
            with contextlib.suppress(Exception):
                cur.execute("ROLLBACK")
            results = [(j.future, None, e) for j in batch if j.future is not None]
        finally:
            cur.close()
        if not results:
            return
        if self._marks and committed:
            results.insert(0, (0, (started, time.time_ns(), len(batch)), None))
        if self._flusher is not None:
            self._flusher.add(results)
        else:
            self._deliver(results)

    def _settle_on_loop(self, results: list[Result]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(settle, results)


def _rows_only(batch: list[Job[Any]]) -> bool:
    return all(job.rows is not None for job in batch)


class _Around(NamedTuple):
    """What isolates a write of merged rows made the direct way (several statements)."""

    begin: str
    undo: tuple[str, ...]
    end: str
    #: inside the batch's transaction (a savepoint), not a transaction of its own
    nested: bool


#: a batch of row jobs only: its own transaction
_ALONE = _Around("BEGIN IMMEDIATE", ("ROLLBACK",), "COMMIT", nested=False)
#: a run of row jobs inside a mixed batch's transaction
_NESTED = _Around(
    "SAVEPOINT merged", ("ROLLBACK TO merged", "RELEASE merged"), "RELEASE merged", nested=True
)


def _write_rows(
    cur: Any,
    jobs: list[Job[Any]],
    results: list[Result],
    one: BatchWrite | None,
    around: _Around,
) -> bool:
    """Write the row jobs `jobs` together: with `one` statement when it can take the rows (see
    `inserts`; in autocommit mode for a batch of rows only), isolated by its own atomicity,
    else with one merged statement per table and chunk inside `around`. False (and nothing
    written) if a write failed, for the caller to run the jobs one by one.

    Every statement is a wait for the GIL (see the module's docstring), so statements per batch
    are what keeps a batch short."""
    tables = _by_table(jobs)
    params = one.encode(tables) if one is not None else None
    if params is not None:
        try:
            cur.execute(one.sql, params)  # type: ignore[union-attr]
        except Exception:
            if around.nested:
                _still_open(cur)
            return False  # alone: the statement's own transaction is rolled back
    else:
        cur.execute(around.begin)
        try:
            _write(cur, tables)
        except Exception:
            for sql in around.undo:
                cur.execute(sql)
            return False
        cur.execute(around.end)
    results.extend((job.future, job.value, None) for job in jobs if job.future is not None)
    return True


def _run_jobs(
    cur: Any,
    batch: list[Job[Any]],
    results: list[Result],
    one: BatchWrite | None,
    *,
    merge: bool = True,
) -> None:
    """Run `batch` inside the open transaction, in order: consecutive row jobs written together
    (when `merge`), every other job (and every job of a failed merge) alone."""
    i = 0
    while i < len(batch):
        end = i
        while end < len(batch) and batch[end].rows is not None:
            end += 1
        together = merge and (end - i > 1 or (end > i and one is not None))
        if together and _write_rows(cur, batch[i:end], results, one, _NESTED):
            i = end
            continue
        for job in batch[i : max(end, i + 1)]:
            _run_one(cur, job, results)
        i = max(end, i + 1)


def _run_one(cur: Any, job: Job[Any], results: list[Result]) -> None:
    """Run one job in its own savepoint (or, for a single statement, in that statement's own
    atomicity): a failure rolls back only what it wrote."""
    savepoint = not job.one_statement
    if savepoint:
        cur.execute("SAVEPOINT job")
    try:
        value = job.run(cur)
    except Exception as e:
        if savepoint:
            cur.execute("ROLLBACK TO job")
            cur.execute("RELEASE job")
        else:
            _still_open(cur)
        if job.future is None:
            log.error("background write failed: %s", type(e).__name__)
        else:
            results.append((job.future, None, e))
        return
    if savepoint:
        cur.execute("RELEASE job")
    if job.future is not None:
        results.append((job.future, value, None))


def _still_open(cur: Any) -> None:
    """After a statement failed without a savepoint: SQLite undid that statement alone unless
    the error ended the whole transaction (I/O error, disk full, out of memory), which fails
    the batch."""
    if not cur.connection.in_transaction:
        raise RuntimeError("the transaction was rolled back by a failed statement")


def _by_table(jobs: list[Job[Any]]) -> dict[Sink, list[tuple[Any, ...]]]:
    """The rows of row jobs, sink by sink, in order."""
    by_table: dict[Sink, list[tuple[Any, ...]]] = {}
    for job in jobs:
        assert job.rows is not None
        for sink, row in job.rows:
            found = by_table.get(sink)
            if found is None:
                by_table[sink] = [row]
            else:
                found.append(row)
    return by_table


def _write(cur: Any, by_table: dict[Sink, list[tuple[Any, ...]]]) -> None:
    """Write `by_table`'s rows the direct way, without the batch statement: one statement per
    table and chunk (one per row for updates)."""
    # inserts first, as the batch statement does: a row inserted may be updated in this batch
    for sink, rows in sorted(by_table.items(), key=lambda item: isinstance(item[0], UpdateWhere)):
        for sql, values in sink.statements(rows):
            cur.execute(sql, values)
