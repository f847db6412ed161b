"""The SQLite group-commit writer: rows of insert-only jobs are merged into multi-row INSERTs,
and a merged insert that fails falls back to one savepoint per job (tested on a real file)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hookwise.server.store.sqlite.writer import GroupCommitWriter, InsertInto

ITEMS = InsertInto("items", "id, label")


def _writer(path: Path, statements: list[str]) -> GroupCommitWriter:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
        conn.set_trace_callback(statements.append)
        return conn

    return GroupCommitWriter(connect)


def _rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, label FROM items ORDER BY id").fetchall()


def test_insert_into_makes_one_statement_per_row_count() -> None:
    assert ITEMS.sql(1) == "INSERT INTO items (id, label) VALUES (?, ?)"
    assert ITEMS.sql(3) == "INSERT INTO items (id, label) VALUES (?, ?), (?, ?), (?, ?)"
    assert ITEMS.sql(3) is ITEMS.sql(3)


def test_waiting_jobs_are_inserted_with_few_statements(tmp_path: Path) -> None:
    statements: list[str] = []
    writer = _writer(tmp_path / "w.db", statements)

    async def main() -> list[str]:
        writer.start(asyncio.get_running_loop())
        try:
            # submitted before the loop yields: the writer finds most of them waiting at once
            futures = [writer.submit_rows(((ITEMS, (i, f"n{i}")),), i) for i in range(200)]
            return await asyncio.gather(*futures)
        finally:
            writer.stop()

    assert asyncio.run(main()) == list(range(200))
    assert _rows(tmp_path / "w.db") == [(i, f"n{i}") for i in range(200)]
    inserts = [s for s in statements if s.startswith("INSERT")]
    assert len(inserts) < 50, f"{len(inserts)} INSERT statements for 200 rows"


def test_a_failing_row_fails_its_own_job_only(tmp_path: Path) -> None:
    statements: list[str] = []
    writer = _writer(tmp_path / "w.db", statements)

    async def main() -> list[object]:
        writer.start(asyncio.get_running_loop())
        try:
            futures = [writer.submit_rows(((ITEMS, (i, f"n{i}")),), i) for i in range(20)]
            # the same primary key as job 3: the merged insert fails, then this job alone
            futures.insert(10, writer.submit_rows(((ITEMS, (3, "dup")),), "dup"))
            writer.submit_rows_nowait(((ITEMS, (4, "dup too")),))
            futures.append(writer.submit_rows(((ITEMS, (100, "last")),), 100))
            return await asyncio.gather(*futures, return_exceptions=True)
        finally:
            writer.stop()

    answers = asyncio.run(main())
    assert isinstance(answers[10], sqlite3.IntegrityError)
    assert [a for i, a in enumerate(answers) if i != 10] == [*range(20), 100]
    assert _rows(tmp_path / "w.db") == [*((i, f"n{i}") for i in range(20)), (100, "last")]


@pytest.mark.parametrize("rows", [1, 63, 64, 65, 130])
def test_merged_inserts_are_cut_in_chunks(tmp_path: Path, rows: int) -> None:
    statements: list[str] = []
    writer = _writer(tmp_path / "w.db", statements)

    async def main() -> None:
        writer.start(asyncio.get_running_loop())
        try:
            job = tuple((ITEMS, (i, "x")) for i in range(rows))
            await asyncio.gather(writer.submit_rows(job, None), writer.submit_rows((), None))
        finally:
            writer.stop()

    asyncio.run(main())
    assert len(_rows(tmp_path / "w.db")) == rows
    # the trace shows each statement with its values bound: "... VALUES (0, 'x'), (1, 'x')"
    per_statement = [s.count("), (") + 1 for s in statements if s.startswith("INSERT")]
    assert sum(per_statement) == rows
    assert max(per_statement) == min(rows, 64)
