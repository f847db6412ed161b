"""The PostgreSQL store's group-commit writer: one asyncio task and one connection per process
that runs the runtime's waiting writes in one transaction and commits once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import asyncpg

from ...retry import Retries
from .accept import CONNECTION_LOST, MAX_RETRIES, RECONNECT, RETRYABLE

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

Job = Callable[[asyncpg.Connection], Awaitable[T]]

MAX_BATCH = 1024


class _Job(Generic[T]):
    __slots__ = ("alone", "fn", "future", "retries")

    def __init__(
        self, fn: Job[T], future: asyncio.Future[T] | None, *, alone: bool = False
    ) -> None:
        self.fn = fn
        self.future = future
        self.retries = 0
        #: runs in a transaction of its own, as its first statement (see `submit`)
        self.alone = alone


_STOP = object()


class GroupCommitWriter:
    """An asyncio task that owns one connection and commits the waiting write jobs together.

    It takes every job in the queue, runs them in one transaction, commits once and then resolves
    the futures, so an awaited write returns only after its commit. A job that fails rolls back
    alone (see `_commit`: the batch then runs again with a savepoint per job). A deadlock or a
    serialization failure (possible when two processes lock the same rows in different orders)
    is retried in the next batch, after this transaction's locks are gone; so is a batch whose
    connection was lost before its COMMIT was sent. A job submitted `alone` (one that takes a
    table lock, `lanes.pause`) runs in a transaction of its own: the jobs before it are
    committed first, those after it wait for its commit.
    """

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._carry: list[_Job[Any]] = []
        self._task: asyncio.Task[None] | None = None
        #: batches lost with their connection in a row, and the wait before the next
        #: (`RECONNECT`: 0.1 s, doubling, at most 5 s; a commit starts it again)
        self._reconnects = Retries(RECONNECT)

    async def start(self) -> None:
        self._conn = await self._connect()
        self._task = asyncio.create_task(self._run(), name="hookwise-postgres-writer")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._queue.put_nowait(_STOP)
            await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    def submit(self, fn: Job[T], *, alone: bool = False) -> asyncio.Future[T]:
        """Run `fn(connection)` in the next batch; the future resolves after the commit.

        `alone`: in a transaction of its own, holding no lock of another job when it starts
        (a job that takes a table lock would otherwise upgrade the batch's locks, and wait for
        other transactions while holding the row locks of the jobs before it: a deadlock); its
        locks are released at its own commit, not held through a batch of later jobs."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Job(fn, fut, alone=alone))
        return fut

    def submit_nowait(self, fn: Job[Any]) -> None:
        """Run `fn(connection)` in the next batch; nobody waits for it."""
        self._queue.put_nowait(_Job(fn, None))

    async def _run(self) -> None:
        while True:
            batch, self._carry = self._carry, []
            if not batch:
                first = await self._queue.get()
                if first is _STOP:
                    return
                batch.append(first)
            stop = False
            while len(batch) < MAX_BATCH and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            batch, later = _split(batch)
            await self._run_batch(batch)
            # the jobs after an `alone` one, then those of this batch to be tried again
            self._carry[:0] = later
            if stop and not self._carry:
                return
            if stop:
                self._queue.put_nowait(_STOP)

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await self._connect()
        return self._conn

    async def _run_batch(self, batch: list[_Job[Any]]) -> None:
        try:
            results = await self._commit(batch)
        except _Uncommitted as e:
            wait = self._reconnects.next()
            log.warning(
                "the write connection was lost before the commit (%d time(s) in a row): %r;"
                " reconnecting in %g s",
                self._reconnects.count,
                e.__cause__,
                wait,
            )
            results = [(job, None, e) for job in batch]
            await asyncio.sleep(wait)
        except Exception as e:
            log.exception("commit failed; %d writes refused", len(batch))
            results = [(job, None, e) for job in batch]
        else:
            self._reconnects.reset()
        for job, value, error in results:
            if isinstance(error, (*RETRYABLE, _Uncommitted)) and job.retries < MAX_RETRIES:
                job.retries += 1
                self._carry.append(job)
            elif isinstance(error, _Uncommitted):
                _settle(job, None, error.__cause__)
            else:
                _settle(job, value, error)

    async def _commit(self, batch: list[_Job[Any]]) -> list[_Outcome]:
        """Run the batch in one transaction and commit it.

        The jobs first run without savepoints (two round trips fewer per job). When one fails,
        that transaction is rolled back and the batch runs again with a savepoint per job, so
        the failing job rolls back alone. A batch of one needs no savepoint: its transaction is.
        """
        results = await self._transaction(batch, savepoints=False)
        if results is None:
            results = await self._transaction(batch, savepoints=True)
        assert results is not None
        return results

    async def _transaction(
        self, batch: list[_Job[Any]], *, savepoints: bool
    ) -> list[_Outcome] | None:
        """One try at the batch: its outcomes once committed, or None when a job failed and
        the transaction (without savepoints) was rolled back.

        A connection lost before the COMMIT was sent wrote nothing: `_Uncommitted` says that the
        whole batch may run again on a new connection.
        """
        committing = False
        conn: asyncpg.Connection | None = None
        tx: Any = None
        run = self._run_in_savepoint if savepoints else self._run_alone
        try:
            conn = await self._connection()
            tx = conn.transaction()
            await tx.start()
            results = []
            for job in batch:
                results.append(await run(conn, job))
                if results[-1][2] is not None and not savepoints:
                    await tx.rollback()
                    return results if len(batch) == 1 else None
            committing = True
            await tx.commit()
            return results
        except CONNECTION_LOST as e:
            if committing:
                raise
            raise _Uncommitted() from e
        except BaseException:
            if not committing and tx is not None and conn is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await tx.rollback()
            raise

    async def _run_alone(self, conn: asyncpg.Connection, job: _Job[Any]) -> _Outcome:
        try:
            return job, await job.fn(conn), None
        except CONNECTION_LOST:
            raise
        except Exception as e:
            return job, None, e

    async def _run_in_savepoint(self, conn: asyncpg.Connection, job: _Job[Any]) -> _Outcome:
        try:
            async with conn.transaction():
                value = await job.fn(conn)
        except CONNECTION_LOST:
            raise
        except Exception as e:
            return job, None, e
        return job, value, None


_Outcome = tuple[_Job[Any], Any, BaseException | None]


def _split(jobs: list[_Job[Any]]) -> tuple[list[_Job[Any]], list[_Job[Any]]]:
    """The batch to run now and the jobs left for the next: an `alone` job runs by itself,
    after the jobs before it."""
    for i, job in enumerate(jobs):
        if job.alone:
            cut = i or 1
            return jobs[:cut], jobs[cut:]
    return jobs, []


class _Uncommitted(Exception):
    """The connection was lost before the COMMIT was sent: nothing of the batch was written."""


def _settle(job: _Job[Any], value: Any, error: BaseException | None) -> None:
    if job.future is None:
        if error is not None:
            log.error("background write failed: %s", type(error).__name__)
        return
    if job.future.done():
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(value)
