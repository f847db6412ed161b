"""Connections to the SQLite file: the pragmas every connection takes, the write lock several
processes share, and the writer's connection (WAL, migrations, the batch statement).

Both the gateway (its readers, and the writer thread when `store.writer` is `thread`) and the
writer process open their connections here, so that they agree on every setting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from . import runtime as rt
from .accept import EVENTS, REQUEST_LOG, RUNS
from .inserts import BatchWrite
from .migrate import migrate

#: the writer checkpoints the WAL itself once it holds this many pages (16 MiB of 4 KiB pages),
#: right after the commit that crossed the mark (see `connect_writer`)
WAL_CHECKPOINT_PAGES = 4096
#: the WAL file's bound: when the writer starts the WAL over, it cuts a longer file to this size
WAL_SIZE_LIMIT = 32 * 1024 * 1024

#: the hot writes of a whole batch in one statement (see `inserts`): accepted requests, log
#: lines and finished runs; updates after the inserts
BATCH = BatchWrite(EVENTS, RUNS, REQUEST_LOG, rt.TURNS, rt.DELIVERIES, rt.RUN_FINISHED)


def connect(path: Path, synchronous: str) -> sqlite3.Connection:
    """A connection in autocommit mode with the store's pragmas."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


class WriteLock:
    """An exclusive lock across processes (`<db>.write.lock`), held for one write transaction
    when several processes write to the file (see the writer's `exclusive`)."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".write.lock")
        self._fd: int | None = None

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def wal_to_sync(path: Path, synchronous: str) -> Path | None:
    """The WAL file the writer's flusher syncs after its commits (`store.synchronous: full`:
    the write connection commits without syncing, see `flusher`), or None (`normal`: SQLite
    syncs only around checkpoints, and nothing waits for a sync)."""
    return path.with_name(path.name + "-wal") if synchronous.upper() == "FULL" else None


def connect_writer(path: Path, synchronous: str, lock: WriteLock) -> sqlite3.Connection:
    """The write connection: WAL mode and the schema's migrations, made under the write lock.

    With `synchronous` FULL it commits with NORMAL: its writer syncs the WAL beside it
    (`wal_to_sync`, `flusher.WalFlusher`) and acknowledges nothing before that sync."""
    conn = connect(path, "NORMAL" if synchronous.upper() == "FULL" else synchronous)
    # Several processes may open the store at once: the one holding the write lock switches
    # it to WAL and migrates; the others wait (SQLite may refuse a journal-mode change with
    # "database is locked" at once, without waiting, while another connection writes).
    with lock():
        conn.execute("PRAGMA journal_mode = WAL")
        migrate(conn)
    # The writer checkpoints (PASSIVE) after the commit that takes the WAL past
    # WAL_CHECKPOINT_PAGES. Being the only writer, its checkpoint copies every frame (a reader
    # holds back only the frames newer than its snapshot, for as long as its read lasts), so
    # the next commit starts the WAL over from its beginning, and the file stays at about
    # WAL_CHECKPOINT_PAGES pages plus a batch whatever the load. A checkpoint run from another
    # connection while commits go on never catches up: the WAL grew to 2 GB under sustained
    # load that way (issue 26). `journal_size_limit` cuts a file that grew longer anyway (a
    # long read held the checkpoint back) to WAL_SIZE_LIMIT when the WAL starts over; when
    # the writer goes quiet, the store truncates it to nothing (`_checkpoint_forever`).
    conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
    return conn
