"""The SQLite store: WAL mode, migrations, a group-commit writer and a pool of readers.

The embedded default. One writer commits batches (`writer`), in a process of its own
(`writer_process`, the default) or on a thread of the gateway's; reads run on a
small thread pool, each thread with its own read-only connection, so the admin API never waits
behind a commit. `synchronous=FULL` by default: an acknowledged request survives a power cut,
not only a process crash; the writer's commits are synced by a flusher beside it, so a commit
does not wait for the sync of the one before (`flusher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..base import (
    Accepted,
    AcceptOp,
    EventRecord,
    Limit,
    RequestLogEntry,
    RunRecord,
)
from ..bounded import WriterProbe
from ..lanes import event_paused
from ..records import DeliveryRecord, HeartbeatOutcome, Route, RunOutcome, Turn
from ..rows import EVENT_COLUMNS, delivery_record, event_record, run_record
from . import runtime as rt
from . import writes
from .accept import accept, accept_rows, log_rows
from .admin import SQLiteAdminReads
from .alerts import SQLiteAlerts
from .approvals import SQLiteApprovals
from .connect import BATCH, WriteLock, connect, connect_writer, wal_to_sync
from .lanes import SQLiteLanes
from .modelcalls import SQLiteModelCalls
from .retention import SQLiteRetention
from .stats import SQLiteStats
from .toolcalls import SQLiteToolCalls
from .writer import GroupCommitWriter, Late
from .writer_process import ProcessWriter

log = logging.getLogger("hookwise.store")

T = TypeVar("T")

SIGNAL_POLL = 0.1
CHECKPOINT_QUIET = 0.5
CHECKPOINT_EVERY = 0.25


class StoreInUse(Exception):
    """The SQLite file is used by another hookwise process that does not share it with us."""


class SQLiteStore(
    SQLiteApprovals,
    SQLiteAdminReads,
    SQLiteLanes,
    SQLiteStats,
    SQLiteRetention,
    SQLiteToolCalls,
    SQLiteModelCalls,
    SQLiteAlerts,
):
    """The `Store` on one SQLite file."""

    def __init__(
        self, path: Path, *, synchronous: str = "full", readers: int = 2, writer: str = "process"
    ) -> None:
        self.path = Path(path)
        self._synchronous = synchronous.upper()
        self._write_lock = WriteLock(self.path)
        self._writer: GroupCommitWriter | ProcessWriter
        if writer == "process":
            self._writer = ProcessWriter(
                self.path, synchronous=self._synchronous, shared=lambda: not self._alone
            )
        elif writer == "thread":
            self._writer = GroupCommitWriter(
                lambda: connect_writer(self.path, self._synchronous, self._write_lock),
                name="hookwise-sqlite-writer",
                exclusive=self._batch_lock,
                batch=BATCH,
                wal=wal_to_sync(self.path, self._synchronous),
            )
        else:
            raise ValueError(f"store.writer: {writer!r} is neither 'process' nor 'thread'")
        self._writer_probe = WriterProbe(lambda: self._writer.submit(writes.probe))
        self._readers = ThreadPoolExecutor(
            max_workers=readers, thread_name_prefix="hookwise-sqlite-read"
        )
        self._local = threading.local()
        #: the event loop's own read connection (see `_read_here`)
        self._here: sqlite3.Connection | None = None
        self._stopping = threading.Event()
        self._subscribers: dict[str, list[Callable[[], None]]] = {}
        self._signal_task: asyncio.Task[None] | None = None
        self._leases: dict[str, int] = {}
        self._use_fd: int | None = None
        #: the use lock is held exclusively: no other hookwise process writes to this file
        self._alone = False
        self._checkpointer = threading.Thread(
            target=self._checkpoint_forever, name="hookwise-sqlite-checkpoint", daemon=True
        )

    # connections ------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, self._synchronous)

    def _batch_lock(self) -> contextlib.AbstractContextManager[None]:
        """What the writer holds around a batch: the write lock when other processes write to
        the file too, nothing for a lone process (two system calls fewer per batch, each a wait
        for the GIL)."""
        return contextlib.nullcontext() if self._alone else self._write_lock()

    def _checkpoint_forever(self) -> None:
        """Truncate the WAL file to nothing when the writer is quiet (no commit for
        `CHECKPOINT_QUIET` seconds). Under load, copy what was committed into the database
        every `CHECKPOINT_EVERY` seconds (a PASSIVE checkpoint: it syncs the WAL, copies, syncs
        the database, beside the writer's commits), so that the checkpoint the writer makes by
        itself, between two commits, once the WAL passes `connect.WAL_CHECKPOINT_PAGES` (the
        one that lets the WAL start over, see `connect_writer`) finds almost everything copied
        already: without it, that checkpoint copied 16 MiB and synced the database while every
        request waited (batches of 20-150 ms about once a second under `/wake` load)."""
        conn = self._connect()
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            while not self._stopping.wait(CHECKPOINT_EVERY):
                try:
                    size = wal.stat().st_size if wal.exists() else 0
                    if size == 0:
                        continue
                    quiet = time.monotonic() - self._writer.last_batch_at >= CHECKPOINT_QUIET
                    mode = "TRUNCATE" if quiet else "PASSIVE"
                    conn.execute(f"PRAGMA wal_checkpoint({mode})")
                except sqlite3.Error:
                    pass  # busy: the next round will do it
        finally:
            conn.close()

    def _reader(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            self._local.conn = conn
        return conn

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, lambda: fn(self._reader()))

    async def _read_here(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A tiny read by key (one short row through an index: tens of microseconds), run on the
        event loop's own connection: a reader thread's hop costs more than the read (a wake-up,
        a wait for the GIL after each step, a call back into the loop). Only for reads whose
        size no payload decides (a session's turns may hold megabytes: those go to a reader
        thread). The connection never waits for a lock (WAL readers seldom need one): when
        SQLite answers busy, the read goes to a reader thread, which may wait."""
        conn = self._here
        if conn is None:
            conn = self._here = self._connect()
            conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("PRAGMA query_only = ON")
        try:
            return fn(conn)
        except sqlite3.OperationalError:
            return await self._read(fn)

    def write(self, fn: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        """Run `fn(cursor)` in the next group commit; the future resolves once committed.
        With the writer process (the default) `fn` is sent pickled: a module-level function
        or a `functools.partial` of one (see `writes`), never a closure."""
        return self._writer.submit(fn)

    # lifecycle --------------------------------------------------------------------------------

    def lock_use(self, *, shared: bool) -> None:
        """Claim the database for this process for as long as it lives.

        A lone process holds `<db>.use.lock` exclusively; the workers of one `--workers N` hold
        it shared (they divide the work through leases and signals). Any other combination is
        refused with `StoreInUse`: a second lone process would take the first one's running
        runs for its own and lead a second heartbeat.
        """
        path = self.path.with_name(self.path.name + ".use.lock")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreInUse(
                f"another hookwise process is using {self.path}: run several processes on one "
                "SQLite file with `hookwise serve --workers N`, or put them on PostgreSQL "
                "(--store postgresql://...)"
            ) from None
        self._use_fd = fd
        self._alone = not shared

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await self._writer.open()
        self._checkpointer.start()

    async def close(self) -> None:
        if self._signal_task is not None:
            self._signal_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._signal_task
        for name in list(self._leases):
            await self.resign(name)
        await self._writer.close()
        self._stopping.set()
        if self._checkpointer.is_alive():
            self._checkpointer.join()
        self._readers.shutdown(wait=True)
        if self._here is not None:
            self._here.close()
            self._here = None
        self._write_lock.close()
        if self._use_fd is not None:
            os.close(self._use_fd)
        self._use_fd = None

    # the request path -------------------------------------------------------------------------

    async def accept(self, op: AcceptOp) -> Accepted:
        if (
            op.idempotency_key is None and op.coalesce is None
        ):  # nothing to read first: rows the writer can merge
            return await self._writer.submit_rows(
                accept_rows(op), Accepted(status=op.status, body=op.body)
            )
        return await self._writer.submit(partial(accept, op))  # accept(op, cursor)

    def log_request(self, entry: RequestLogEntry) -> None:
        self._writer.submit_rows_nowait(log_rows(entry))

    async def prune(self, *, now: float, idempotency_window: float, log_retention: float) -> None:
        await self._writer.submit(
            partial(
                writes.prune_request_records,
                now=now,
                idempotency_window=idempotency_window,
                log_retention=log_retention,
            )
        )

    # the runtime ------------------------------------------------------------------------------

    async def recover_runs(
        self, *, max_attempts: int, now: float, expired_only: bool = False
    ) -> tuple[int, int]:
        """Re-queue runs a stopped process left `running` (or fail them past `max_attempts`)."""
        return await self._writer.submit(
            partial(rt.recover_runs, max_attempts=max_attempts, now=now, expired_only=expired_only)
        )

    async def requeue_runs(self, run_ids: list[str]) -> None:
        """Put runs interrupted by a clean stop back in the queue, without using an attempt."""
        await self._writer.submit(partial(writes.requeue_runs, run_ids=tuple(run_ids)))

    async def claim_runs(
        self,
        *,
        limit: Limit,
        now: float,
        lease: float = 60.0,
        default_timeout: float = 600.0,
        agent_id: str | None = None,
        full: tuple[str, ...] = (),
    ) -> list[RunRecord]:
        rows = await self._writer.submit(
            partial(
                rt.claim_runs,
                limit=Late(limit) if callable(limit) else limit,
                now=now,
                lease=lease,
                default_timeout=default_timeout,
                agent_id=agent_id,
                full=tuple(full),
            ),
            one_statement=True,
        )
        return sorted((run_record(r) for r in rows), key=lambda r: r.seq)

    async def finish_run(self, outcome: RunOutcome, *, again: bool = False) -> bool:
        if again:
            return await self._writer.submit(partial(rt.finish_run_again, o=outcome))
        await self._writer.submit_rows(rt.finish_rows(outcome), None)
        return True

    async def release_runs(self, *, agent_id: str | None, keep: list[str]) -> int:
        return await self._writer.submit(
            partial(rt.release_runs, agent_id=agent_id, keep=tuple(keep))
        )

    async def finish_heartbeat(self, outcome: HeartbeatOutcome) -> None:
        await self._writer.submit(partial(rt.finish_heartbeat, o=outcome))

    async def pending_events(
        self, session: str, *, limit: int, after: int = 0
    ) -> list[EventRecord]:
        def fn(conn: sqlite3.Connection) -> list[EventRecord]:
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session = ? AND consumed_at IS NULL"
                f" AND seq > ? AND NOT {event_paused('events')} ORDER BY seq LIMIT ?",
                (session, after, limit),
            ).fetchall()
            return [event_record(r) for r in rows]

        return await self._read(fn)

    async def has_queued_runs(self) -> bool:
        return await self._read(
            lambda conn: (
                conn.execute("SELECT 1 FROM runs WHERE state = 'queued' LIMIT 1").fetchone()
                is not None
            )
        )

    async def session_turns(self, session_key: str, *, limit: int) -> list[Turn]:
        return await self._read(lambda conn: rt.session_turns(conn, session_key, limit))

    async def last_route(self, session_key: str) -> Route | None:
        return await self._read_here(lambda conn: rt.last_route(conn, session_key))

    async def set_last_route(
        self, session_key: str, route: Route, *, now: float, only_if_unset: bool = False
    ) -> None:
        await self._writer.submit(
            partial(
                rt.set_last_route,
                session_key=session_key,
                route=route,
                now=now,
                only_if_unset=only_if_unset,
            ),
            one_statement=True,
        )

    async def claim_deliveries(
        self, *, limit: int, now: float, lease: float
    ) -> list[DeliveryRecord]:
        rows = await self._writer.submit(
            partial(rt.claim_deliveries, limit=limit, now=now, lease=lease), one_statement=True
        )
        return [delivery_record(r) for r in rows]

    async def recover_deliveries(self) -> int:
        return await self._writer.submit(rt.recover_deliveries)

    async def update_delivery(self, delivery_id: str, **fields: Any) -> None:
        await self._writer.submit(partial(rt.update_delivery, delivery_id=delivery_id, **fields))

    async def next_delivery_due(self) -> float | None:
        def fn(conn: sqlite3.Connection) -> float | None:
            row = conn.execute(
                "SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'"
            ).fetchone()
            return row[0] if row else None

        return await self._read(fn)

    # what several processes share ---------------------------------------------------------------

    async def notify(self, topic: str) -> None:
        """Tell every process (this one at once, others within `SIGNAL_POLL` seconds)."""
        for callback in self._subscribers.get(topic, ()):
            callback()
        self._writer.submit_nowait(partial(writes.bump_signal, topic=topic), one_statement=True)

    def subscribe(self, topic: str, callback: Callable[[], None]) -> None:
        """Call `callback` on the event loop whenever `topic` is notified by any process."""
        self._subscribers.setdefault(topic, []).append(callback)
        if self._signal_task is None:
            self._signal_task = asyncio.get_running_loop().create_task(
                self._poll_signals(), name="hookwise-sqlite-signals"
            )

    async def _poll_signals(self) -> None:
        """Watch the `signals` table for other processes' notifications. A read that fails is
        logged when the failures start and when they end (the notifications are late
        meanwhile: each process's own loops still run on their schedules), not every poll."""
        seen: dict[str, int] = {}
        first = True
        failing = 0
        while True:
            try:
                rows = await self._read(
                    lambda conn: conn.execute("SELECT topic, seq FROM signals").fetchall()
                )
            except Exception as e:
                rows = []
                failing += 1
                if failing == 1:
                    log.warning(
                        "reading other processes' signals failed (%s: %s); retrying every %.2f s",
                        type(e).__name__,
                        e,
                        SIGNAL_POLL,
                    )
            else:
                if failing:
                    log.warning("reading other processes' signals works again (%d failed)", failing)
                    failing = 0
            for topic, seq in rows:
                if not first and seen.get(topic) != seq:
                    for callback in self._subscribers.get(topic, ()):
                        callback()
                seen[topic] = seq
            first = False
            await asyncio.sleep(SIGNAL_POLL)

    async def try_lead(self, name: str) -> bool:
        """Hold the `name` leadership: an exclusive lock on a file beside the database, kept
        until `resign` or the process ends (the OS releases it when a process dies)."""
        if name in self._leases:
            return True
        path = self.path.with_name(f"{self.path.name}.{name}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._leases[name] = fd
        return True

    async def resign(self, name: str) -> None:
        fd = self._leases.pop(name, None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    async def auth_failure(
        self, client: str, *, now: float, window: float, max_failures: int, lockout: float
    ) -> float | None:
        """Count a failure; returns the end of the lock-out when this failure starts one."""
        return await self._writer.submit(
            partial(
                writes.auth_failure,
                client=client,
                now=now,
                window=window,
                max_failures=max_failures,
                lockout=lockout,
            )
        )

    async def auth_locked_until(self, client: str, *, now: float) -> float | None:
        row = await self._read(
            lambda conn: conn.execute(
                "SELECT locked_until FROM auth_failures WHERE client = ?", (client,)
            ).fetchone()
        )
        return row[0] if row and row[0] and row[0] > now else None

    async def auth_success(self, client: str) -> None:
        await self._writer.submit(partial(writes.auth_success, client=client), one_statement=True)
