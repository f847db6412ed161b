"""The writer's inserts: a multi-row `INSERT` for one table (`InsertInto`), and one statement
that inserts a whole batch's rows into several tables at once (`BatchInsert`).

Why one statement per batch: the sqlite3 module releases the GIL around every step of every
statement, and under load the event loop holds the GIL nearly all the time, so each statement
the writer thread runs ends with a wait for the GIL (measured at 0.3 to 1 ms each with the
default switch interval). A batch of accepted requests written as `BEGIN`, one `INSERT` per
table and `COMMIT` waited four or five times; `BatchInsert` makes it one statement in autocommit
mode: an `INSERT` into a TEMP view whose `INSTEAD OF` trigger inserts each table's rows from a
JSON array with `json_each`. SQLite runs the trigger, and commits (with its sync), inside that
one step.

JSON carries the values exactly for what the request path writes (text, integers, floats,
booleans as 0/1, NULL), with one exception: SQLite's JSON functions cut a text at an escaped NUL
character. A batch whose JSON holds one is written the other way (`encode` returns None).
"""

from __future__ import annotations

from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode
_NUL = b"\\u0000"


class InsertInto:
    """An `INSERT INTO table (columns)` whose rows the writer may merge across jobs."""

    __slots__ = ("_sql", "columns", "names", "table", "width")

    def __init__(self, table: str, columns: str) -> None:
        self.table = table
        self.columns = columns
        self.names = tuple(c.strip() for c in columns.split(","))
        self.width = len(self.names)
        self._sql: dict[int, str] = {}

    def sql(self, rows: int) -> str:
        """The statement inserting `rows` rows at once."""
        found = self._sql.get(rows)
        if found is None:
            one = "(" + ", ".join("?" * self.width) + ")"
            found = f"INSERT INTO {self.table} ({self.columns}) VALUES " + ", ".join([one] * rows)
            self._sql[rows] = found
        return found


class BatchInsert:
    """One statement inserting rows into each of `tables`, through a TEMP view and trigger that
    `install` creates on the writer's connection (TEMP objects belong to that connection only:
    nothing in the database file changes)."""

    VIEW = "hookwise_batch"

    def __init__(self, *tables: InsertInto) -> None:
        self.tables = tables
        self._slot = {into: i for i, into in enumerate(tables)}
        holes = ", ".join("?" * len(tables))
        self.sql = f"INSERT INTO temp.{self.VIEW} VALUES ({holes})"

    def install(self, conn: Any) -> None:
        """Create the TEMP view and its trigger on `conn` (the writer's connection)."""
        slots = [f"t{i}" for i in range(len(self.tables))]
        inserts = []
        for slot, into in zip(slots, self.tables, strict=True):
            values = ", ".join(f"json_extract(value, '$[{i}]')" for i in range(into.width))
            inserts.append(
                f"INSERT INTO {into.table} ({into.columns})"
                f" SELECT {values} FROM json_each(NEW.{slot});"
            )
        conn.execute(f"DROP VIEW IF EXISTS temp.{self.VIEW}")
        conn.execute(
            f"CREATE TEMP VIEW {self.VIEW} AS SELECT "
            + ", ".join(f"NULL AS {slot}" for slot in slots)
        )
        conn.execute(
            f"CREATE TEMP TRIGGER {self.VIEW}_insert INSTEAD OF INSERT ON {self.VIEW} BEGIN "
            + " ".join(inserts)
            + " END"
        )

    def encode(self, rows: dict[InsertInto, list[tuple[Any, ...]]]) -> list[str | None] | None:
        """The statement's parameters for `rows` (each table's rows as one JSON array), or None
        if they cannot go this way (a table this statement does not know, a NUL character)."""
        params: list[str | None] = [None] * len(self.tables)
        for into, table_rows in rows.items():
            slot = self._slot.get(into)
            if slot is None:
                return None
            data = _encode(table_rows)
            if _NUL in data:
                return None
            params[slot] = data.decode()
        return params
