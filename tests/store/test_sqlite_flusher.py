"""Durability that does not wait on itself (`store.synchronous: full`, `flusher`), on a real
SQLite file: a write is acknowledged only once an fsync of the WAL begun after its commit has
returned, while the writer commits the next batch without waiting for that fsync; a failed fsync
fails the writes it was to cover (never acknowledged) and says so; with `synchronous: normal`
nothing waits for an fsync.

The disk is the one part replaced: `flusher._sync` (the `fdatasync` call) is held or made to
fail, as a stalled or broken disk would, around the real writer, flusher and store.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hookwise.server.store.sqlite import SQLiteStore, flusher
from hookwise.server.store.sqlite.flusher import SyncFailed
from tests.store.support import accept_op, new_event
from tests.support.wait import eventually


class Disk:
    """`fdatasync` with a hand on it: `hold()` makes the next syncs wait until `release()`."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self._real = real
        self._open = threading.Event()
        self._open.set()
        self.waiting = threading.Event()
        self.synced: list[int] = []
        self.fail_next = 0

    def hold(self) -> None:
        self.waiting.clear()
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, fd: int) -> None:
        if not self._open.is_set():
            self.waiting.set()
            assert self._open.wait(30), "the test never released the disk"
        if self.fail_next:
            self.fail_next -= 1
            raise OSError(5, "Input/output error")
        self._real(fd)
        self.synced.append(fd)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Disk]:
    d = Disk(flusher._sync)
    monkeypatch.setattr(flusher, "_sync", d)
    yield d
    d.release()


def _event_ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT event_id FROM events")}


async def _opened(path: Path, synchronous: str) -> SQLiteStore:
    store = SQLiteStore(path, synchronous=synchronous, writer="thread")
    store.lock_use(shared=False)
    await store.open()
    return store


def test_a_write_waits_for_the_sync_of_its_commit_and_the_next_commit_does_not(
    tmp_path: Path, disk: Disk
) -> None:
    path = tmp_path / "h.db"

    async def main() -> None:
        store = await _opened(path, "full")
        try:
            disk.hold()
            first, second = new_event(), new_event()
            acked_first = asyncio.ensure_future(store.accept(accept_op(events=(first,))))
            await asyncio.to_thread(disk.waiting.wait, 10)
            assert disk.waiting.is_set(), "the flusher never synced the first commit"
            # committed (another connection reads it), not acknowledged: its sync is stalled
            assert first.event_id in _event_ids(path)
            assert not acked_first.done()
            # the writer goes on: the next batch is committed while the first sync is stalled
            acked_second = asyncio.ensure_future(store.accept(accept_op(events=(second,))))
            await asyncio.to_thread(
                eventually,
                lambda: second.event_id in _event_ids(path),
                timeout=10,
                what="the second commit, while the first sync is held",
            )
            await asyncio.sleep(0.2)
            assert not acked_first.done() and not acked_second.done()
            syncs = len(disk.synced)
            disk.release()
            await asyncio.wait_for(asyncio.gather(acked_first, acked_second), 10)
            # the first sync covered the first batch only: the second needed one of its own
            assert len(disk.synced) >= syncs + 2
        finally:
            disk.release()
            await store.close()

    asyncio.run(main())


def test_a_failed_sync_fails_the_writes_it_was_to_cover_and_says_so(
    tmp_path: Path, disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hookwise.store")
    path = tmp_path / "h.db"

    async def main() -> None:
        store = await _opened(path, "full")
        try:
            disk.fail_next = 1
            with pytest.raises(SyncFailed, match="could not sync its log to disk"):
                await asyncio.wait_for(store.accept(accept_op(events=(new_event(),))), 10)
            # the disk answers again: so does the store
            later = new_event()
            await asyncio.wait_for(store.accept(accept_op(events=(later,))), 10)
            assert later.event_id in _event_ids(path)
        finally:
            await store.close()

    asyncio.run(main())
    assert "fsync of the WAL" in caplog.text and "1 writes refused" in caplog.text


def test_with_synchronous_normal_no_write_waits_for_a_sync(tmp_path: Path, disk: Disk) -> None:
    async def main() -> None:
        store = await _opened(tmp_path / "h.db", "normal")
        try:
            disk.hold()
            await asyncio.wait_for(store.accept(accept_op(events=(new_event(),))), 10)
            assert not disk.waiting.is_set()
        finally:
            await store.close()

    asyncio.run(main())


def test_the_write_connection_commits_without_syncing_when_the_flusher_syncs(
    tmp_path: Path,
) -> None:
    async def main() -> list[int]:
        found = []
        for synchronous in ("full", "normal"):
            store = await _opened(tmp_path / f"{synchronous}.db", synchronous)
            try:
                found.append(await store.write(_synchronous))
            finally:
                await store.close()
        return found

    # 1 is NORMAL: for `full`, SQLite's own sync inside the commit would make the next commit
    # wait for it (the flusher syncs instead; the tests above show it)
    assert asyncio.run(main()) == [1, 1]


def _synchronous(cur: sqlite3.Cursor) -> int:
    return int(cur.execute("PRAGMA synchronous").fetchone()[0])
