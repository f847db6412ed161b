"""The SQLite store's small reads by key on the event loop's own connection (`_read_here`): they
see what the writer has just committed, never wait on the loop, and go to a reader thread when
SQLite answers busy (tested on a real file)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from hookwise.server.store.records import Route
from hookwise.server.store.sqlite import SQLiteStore


def test_a_small_read_runs_on_the_loop_and_sees_the_last_commit(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "h.db")
        await store.open()
        try:
            await store.set_last_route("main", Route("slack", "C1"), now=1.0)
            threads: list[threading.Thread] = []

            def fn(conn: sqlite3.Connection) -> object:
                threads.append(threading.current_thread())
                return conn.execute("SELECT last_to FROM sessions").fetchall()

            assert await store._read_here(fn) == [("C1",)]
            assert threads == [threading.current_thread()]
            await store.set_last_route("main", Route("slack", "C2"), now=2.0)
            assert await store.last_route("main") == Route("slack", "C2")
            # the loop's connection writes nothing
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                await store._read_here(lambda conn: conn.execute("DELETE FROM sessions"))
            assert await store.last_route("main") == Route("slack", "C2")
        finally:
            await store.close()

    asyncio.run(main())


def test_when_sqlite_answers_busy_the_read_goes_to_a_reader_thread(tmp_path: Path) -> None:
    async def main() -> None:
        store = SQLiteStore(tmp_path / "h.db")
        await store.open()
        loop_thread = threading.current_thread()
        try:
            threads: list[str] = []

            def fn(conn: sqlite3.Connection) -> int:
                here = threading.current_thread()
                threads.append(here.name)
                if here is loop_thread:  # what SQLite answers while a lock is held
                    raise sqlite3.OperationalError("database is locked")
                return conn.execute("SELECT count(*) FROM runs").fetchone()[0]

            assert await store._read_here(fn) == 0
            assert threads[0] == loop_thread.name
            assert threads[1].startswith("hookwise-sqlite-read")
        finally:
            await store.close()

    asyncio.run(main())
