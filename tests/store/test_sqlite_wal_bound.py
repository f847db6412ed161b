"""SQLite's WAL stays bounded under sustained writes (issue 26): the writer checkpoints between
its commits, so the WAL file never grows past `WAL_SIZE_LIMIT` however much passes through it,
with readers reading all along, and the store truncates it to nothing once the writes stop."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from hookwise.server.store.sqlite import SQLiteStore
from hookwise.server.store.sqlite import store as sqlite_store
from hookwise.server.store.sqlite.connect import WAL_CHECKPOINT_PAGES, WAL_SIZE_LIMIT
from tests.store.support import accept_op, new_event

#: what passes through the WAL in the test: several times its bound (8 KiB a row)
TRAFFIC = 5 * WAL_SIZE_LIMIT
TEXT = "x" * 8192
#: the test stops writing after this long whatever it wrote (it writes about 1 MB per 0.1 s)
MAX_SECONDS = 60.0


def _wal_size(db: Path) -> int:
    wal = db.with_name(db.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def test_the_wal_stays_under_its_bound_under_sustained_writes_and_empties_when_quiet(
    tmp_path: Path,
) -> None:
    db = tmp_path / "h.db"

    async def main() -> tuple[int, int, int, int]:
        store = SQLiteStore(db, synchronous="normal")
        store.lock_use(shared=False)
        await store.open()
        written = 0
        largest = 0
        stop = asyncio.Event()

        async def read_all_along() -> None:
            while not stop.is_set():
                await store.pending_events("main", limit=50)

        async def write_one() -> None:
            await store.accept(accept_op(events=(new_event(text=TEXT),)))

        readers = [asyncio.create_task(read_all_along()) for _ in range(2)]
        try:
            deadline = time.monotonic() + MAX_SECONDS
            while written < TRAFFIC and time.monotonic() < deadline:
                await asyncio.gather(*(write_one() for _ in range(32)))
                written += 32 * len(TEXT)
                largest = max(largest, _wal_size(db))
            stop.set()
            await asyncio.gather(*readers)
            quiet_deadline = time.monotonic() + 15
            while _wal_size(db) > 0 and time.monotonic() < quiet_deadline:
                await asyncio.sleep(0.1)
            rows = len(await store.pending_events("main", limit=1_000_000))
            return written, largest, _wal_size(db), rows
        finally:
            stop.set()
            await store.close()

    written, largest, after, rows = asyncio.run(main())
    assert written >= TRAFFIC, f"only {written} bytes written in {MAX_SECONDS} s"
    assert rows == written // len(TEXT)  # every write committed
    assert 0 < largest <= WAL_SIZE_LIMIT, largest
    assert after == 0


def test_under_constant_writes_the_wal_is_copied_into_the_database_beside_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's own checkpoint (once the WAL passes `WAL_CHECKPOINT_PAGES`) is made between
    two of its commits, while every request waits: the store copies the WAL into the database
    beside it, every `CHECKPOINT_EVERY` seconds, so that the writer's finds little left to copy.
    Seen from the database file alone (without its WAL): rows arrive in it while writes go on
    and long before the WAL reaches the writer's mark."""
    # the store's other checkpoint, when the writer is quiet, never runs in this test
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_QUIET", 3600.0)
    db = tmp_path / "h.db"

    async def main() -> tuple[int, int]:
        store = SQLiteStore(db, synchronous="normal")
        store.lock_use(shared=False)
        await store.open()
        try:
            written = 0
            deadline = time.monotonic() + MAX_SECONDS
            while time.monotonic() < deadline:
                await asyncio.gather(
                    *(
                        store.accept(accept_op(events=(new_event(text="y" * 512),)))
                        for _ in range(8)
                    )
                )
                written += 8
                if _rows_in_the_database_file(db, tmp_path / "copy.db") > 0:
                    break
                # constant, not frantic: a loaded machine's scheduler still gives the copying
                # thread its turns (what is measured is the store's design, not the CPU share)
                await asyncio.sleep(0.002)
            return written, _wal_size(db)
        finally:
            await store.close()

    written, wal = asyncio.run(main())
    assert _rows_in_the_database_file(db, tmp_path / "copy.db") > 0, "nothing was copied"
    # the writer's own checkpoint did not do it: the WAL never reached its mark
    assert wal < WAL_CHECKPOINT_PAGES * 4096, (written, wal)


def _rows_in_the_database_file(db: Path, copy: Path) -> int:
    """Events in the database file itself: what checkpoints have copied out of the WAL."""
    shutil.copyfile(db, copy)
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone():
            return 0  # not even the schema has been copied yet
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
