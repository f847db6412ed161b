"""The SQLite group-commit writer: rows of insert-only jobs are merged into multi-row INSERTs, or
into one statement for the whole batch (`BatchWrite`), and a merged insert that fails falls back
to one savepoint per job (tested on a real file)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from hookwise.server.store.sqlite.inserts import BatchWrite, InsertInto, UpdateWhere
from hookwise.server.store.sqlite.writer import GroupCommitWriter

ITEMS = InsertInto("items", "id, label")
RELABEL = UpdateWhere("items", "label", "id")
#: every kind of value the request path writes
VALUES = InsertInto("vals", "id, t, i, f, b, n")


def _writer(
    path: Path, statements: list[str], batch: BatchWrite | None = None
) -> GroupCommitWriter:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
        conn.execute("CREATE TABLE IF NOT EXISTS vals (id TEXT PRIMARY KEY, t, i, f, b, n)")
        conn.set_trace_callback(statements.append)
        return conn

    return GroupCommitWriter(connect, batch=batch)


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


def _submit_all(writer: GroupCommitWriter, jobs: list[tuple[object, ...]]) -> list[object]:
    """Submit `jobs` (rows) before the loop yields, so that the writer takes them as one batch."""

    async def main() -> list[object]:
        writer.start(asyncio.get_running_loop())
        try:
            futures = [writer.submit_rows(rows, i) for i, rows in enumerate(jobs)]  # type: ignore[arg-type]
            return await asyncio.gather(*futures, return_exceptions=True)
        finally:
            writer.stop()

    return asyncio.run(main())


def _vals(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT id, t, typeof(t), i, typeof(i), f, typeof(f), b, typeof(b), n, typeof(n)"
            " FROM vals ORDER BY id"
        ).fetchall()


#: texts, integers (large ones too), floats at full precision, booleans and NULL
ODD_ROWS = [
    ("a", "plain", 0, 0.0, False, None),
    ("b", 'é \u2028 " \\ \x7f 🙂 <&>', -(2**63), 1732500000.123456, True, None),
    ("c", "", 2**63 - 1, -1e-300, True, "x"),
]


def test_one_statement_writes_a_whole_batch_with_the_values_direct_inserts_write(
    tmp_path: Path,
) -> None:
    direct: list[str] = []
    assert _submit_all(
        _writer(tmp_path / "direct.db", direct), [((VALUES, r),) for r in ODD_ROWS]
    ) == list(range(len(ODD_ROWS)))
    statements: list[str] = []
    batch = BatchWrite(ITEMS, VALUES)
    jobs = [((VALUES, r), (ITEMS, (i, f"n{i}"))) for i, r in enumerate(ODD_ROWS)]
    assert _submit_all(_writer(tmp_path / "one.db", statements, batch), jobs) == [0, 1, 2]
    assert _vals(tmp_path / "one.db") == _vals(tmp_path / "direct.db")
    assert _rows(tmp_path / "one.db") == [(i, f"n{i}") for i in range(len(ODD_ROWS))]
    # one INSERT into the TEMP view, no BEGIN, COMMIT or savepoint around it (the trace repeats
    # a statement once for each statement of its trigger)
    writes = {s for s in statements if not s.startswith(("CREATE", "DROP"))}
    assert len(writes) == 1 and writes.pop().startswith("INSERT INTO temp.hookwise_batch")


def test_a_nul_character_goes_the_other_way(tmp_path: Path) -> None:
    """SQLite's JSON functions would cut the text at the NUL: those rows are bound directly."""
    statements: list[str] = []
    rows = [("nul", "before\x00after", 1, 1.5, True, None), ("ok", "fine", 2, 2.5, False, None)]
    answers = _submit_all(
        _writer(tmp_path / "w.db", statements, BatchWrite(VALUES)), [((VALUES, r),) for r in rows]
    )
    assert answers == [0, 1]
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("SELECT t FROM vals WHERE id = 'nul'").fetchone() == (
            "before\x00after",
        )
    assert not any(s.startswith("INSERT INTO temp.hookwise_batch") for s in statements)


def test_a_table_the_batch_statement_does_not_know_goes_the_other_way(tmp_path: Path) -> None:
    statements: list[str] = []
    answers = _submit_all(
        _writer(tmp_path / "w.db", statements, BatchWrite(VALUES)),
        [((ITEMS, (1, "one")),), ((VALUES, ODD_ROWS[0]),)],
    )
    assert answers == [0, 1]
    assert _rows(tmp_path / "w.db") == [(1, "one")]
    assert not any(s.startswith("INSERT INTO temp.hookwise_batch") for s in statements)


def test_a_failing_row_in_the_batch_statement_fails_its_own_job_only(tmp_path: Path) -> None:
    statements: list[str] = []
    jobs = [((ITEMS, (i, f"n{i}")),) for i in range(10)]
    jobs.insert(5, ((ITEMS, (3, "dup")),))
    answers = _submit_all(_writer(tmp_path / "w.db", statements, BatchWrite(ITEMS)), jobs)
    assert isinstance(answers[5], sqlite3.IntegrityError)
    assert [a for i, a in enumerate(answers) if i != 5] == [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert _rows(tmp_path / "w.db") == [(i, f"n{i}") for i in range(10)]
    # the batch statement was tried first, then each job in its own savepoint, without trying
    # the same merged write again inside that transaction
    assert any(s.startswith("INSERT INTO temp.hookwise_batch") for s in statements)
    assert sum(s == "SAVEPOINT job" for s in statements) == len(jobs)
    begin = statements.index("BEGIN IMMEDIATE")
    inside = statements[begin : statements.index("COMMIT", begin)]
    assert not any(s.startswith("INSERT INTO temp.hookwise_batch") for s in inside), inside


@pytest.mark.parametrize("one_statement", [True, False])
def test_updates_by_key_ride_the_batch_after_its_inserts(
    tmp_path: Path, one_statement: bool
) -> None:
    """A finished run is an update by key: merged with the batch's inserts, written after them."""
    statements: list[str] = []
    batch = BatchWrite(ITEMS, RELABEL) if one_statement else None
    writer = _writer(tmp_path / "w.db", statements, batch)
    first = _submit_all(writer, [((ITEMS, (i, f"n{i}")),) for i in range(4)])
    assert first == [0, 1, 2, 3]
    writer = _writer(tmp_path / "w.db", statements, batch)
    jobs = [
        ((RELABEL, ("relabelled", 1)),),
        ((ITEMS, (9, "new")), (RELABEL, ("new, then relabelled", 9))),
        ((RELABEL, ("no such row: nothing happens", 77)),),
    ]
    assert _submit_all(writer, jobs) == [0, 1, 2]
    assert _rows(tmp_path / "w.db") == [
        (0, "n0"),
        (1, "relabelled"),
        (2, "n2"),
        (3, "n3"),
        (9, "new, then relabelled"),
    ]
    batched = any(s.startswith("INSERT INTO temp.hookwise_batch") for s in statements)
    assert batched is one_statement


def _insert(label: str, key: int) -> object:
    def fn(cur: sqlite3.Cursor) -> int:
        cur.execute("INSERT INTO items (id, label) VALUES (?, ?)", (key, label))
        return key

    return fn


def _submit_mixed(writer: GroupCommitWriter, jobs: list[object]) -> list[object]:
    """Submit `jobs` as one batch: a tuple is a row job, a function a single-statement job."""

    async def main() -> list[object]:
        writer.start(asyncio.get_running_loop())
        try:
            futures = [
                writer.submit_rows(job, i)  # type: ignore[arg-type]
                if isinstance(job, tuple)
                else writer.submit(job, one_statement=True)  # type: ignore[arg-type]
                for i, job in enumerate(jobs)
            ]
            return await asyncio.gather(*futures, return_exceptions=True)
        finally:
            writer.stop()

    return asyncio.run(main())


@pytest.mark.parametrize("one_statement", [True, False])
def test_a_mixed_batch_writes_its_rows_and_single_statements_without_savepoints(
    tmp_path: Path, one_statement: bool
) -> None:
    """The run lane's claim is one statement between accepted requests' rows: a batch of them is
    BEGIN, the rows' statement, the claim, the rows' statement, COMMIT."""
    statements: list[str] = []
    batch = BatchWrite(ITEMS) if one_statement else None
    writer = _writer(tmp_path / "w.db", statements, batch)
    jobs = [((ITEMS, (1, "a")),), ((ITEMS, (2, "b")),), _insert("c", 3), ((ITEMS, (4, "d")),)]
    assert _submit_mixed(writer, jobs) == [0, 1, 3, 3]
    assert _rows(tmp_path / "w.db") == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    # without the batch statement, rows are written in a savepoint (several statements)
    assert statements.count("SAVEPOINT job") == (0 if one_statement else 1)
    assert statements.count("SAVEPOINT merged") == (0 if one_statement else 1)
    assert statements.count("BEGIN IMMEDIATE") == 1


@pytest.mark.parametrize("one_statement", [True, False])
def test_a_failing_single_statement_fails_alone_in_a_mixed_batch(
    tmp_path: Path, one_statement: bool
) -> None:
    statements: list[str] = []
    batch = BatchWrite(ITEMS) if one_statement else None
    writer = _writer(tmp_path / "w.db", statements, batch)
    jobs = [
        ((ITEMS, (1, "a")),),
        _insert("dup of 1", 1),  # fails: SQLite undoes this statement only
        ((ITEMS, (2, "b")),),
        ((ITEMS, (1, "dup of 1 again")),),  # fails: the merged rows fall back to one job each
        _insert("c", 3),
    ]
    answers = _submit_mixed(writer, jobs)
    assert answers[0] == 0 and answers[2] == 2 and answers[4] == 3
    assert isinstance(answers[1], sqlite3.IntegrityError)
    assert isinstance(answers[3], sqlite3.IntegrityError)
    assert _rows(tmp_path / "w.db") == [(1, "a"), (2, "b"), (3, "c")]
    # the rows after the failed statement were tried merged, then each in its savepoint
    assert statements.count("SAVEPOINT job") == (2 if one_statement else 3)


def test_a_single_statement_that_ends_the_transaction_fails_the_whole_batch(
    tmp_path: Path,
) -> None:
    """Some errors make SQLite roll back the whole transaction, not only the statement (disk
    full, I/O errors; here a trigger's RAISE(ROLLBACK)): the rows before it are gone too, so
    every job of the batch is told, none is answered as written."""
    path = tmp_path / "w.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, label TEXT)")
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON items WHEN NEW.label = 'boom'"
            " BEGIN SELECT RAISE(ROLLBACK, 'boom'); END"
        )
    statements: list[str] = []
    writer = _writer(path, statements, BatchWrite(ITEMS))
    jobs = [((ITEMS, (1, "a")),), _insert("boom", 2), ((ITEMS, (3, "c")),)]
    answers = _submit_mixed(writer, jobs)
    assert all(isinstance(a, Exception) for a in answers), answers
    assert _rows(path) == []
    # and the writer goes on with the next batch
    writer = _writer(path, statements, BatchWrite(ITEMS))
    assert _submit_mixed(writer, [((ITEMS, (4, "d")),), _insert("e", 5)]) == [0, 5]
