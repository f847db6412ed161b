"""SQLite's WAL stays bounded under sustained writes (issue 26): the writer checkpoints between
its commits, so the WAL file never grows past `WAL_SIZE_LIMIT` however much passes through it,
with readers reading all along, and the store truncates it to nothing once the writes stop."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from hookwise.server.store.sqlite import SQLiteStore
from hookwise.server.store.sqlite.connect import WAL_SIZE_LIMIT
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
