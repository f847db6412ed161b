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


def connect_writer(path: Path, synchronous: str, lock: WriteLock) -> sqlite3.Connection:
    """The write connection: WAL mode and the schema's migrations, made under the write lock."""
    conn = connect(path, synchronous)
    # Several processes may open the store at once: the one holding the write lock switches
    # it to WAL and migrates; the others wait (SQLite may refuse a journal-mode change with
    # "database is locked" at once, without waiting, while another connection writes).
    with lock():
        conn.execute("PRAGMA journal_mode = WAL")
        migrate(conn)
    # Checkpoints run on their own thread (see the store's _checkpoint_forever), never inside
    # a commit.
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    return conn
