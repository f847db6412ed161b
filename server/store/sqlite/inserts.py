"""The writer's row writes: a table's rows to insert (`InsertInto`) or rows to update by key
(`UpdateWhere`), and one statement that writes a whole batch's rows into several tables at once
(`BatchWrite`).

Why one statement per batch: the sqlite3 module releases the GIL around every step of every
statement, and under load the event loop holds the GIL nearly all the time, so each statement
the writer thread runs ends with a wait for the GIL (measured at 0.3 to 1 ms each with the
default switch interval). A batch of accepted requests written as `BEGIN`, one `INSERT` per
table and `COMMIT` waited four or five times; `BatchWrite` makes it one statement in autocommit
mode: an `INSERT` into a TEMP view whose `INSTEAD OF` trigger inserts (or updates) each table's
rows from a JSON array with `json_each`. SQLite runs the trigger, and commits (with its sync),
inside that one step.

JSON carries the values exactly for what the request path and the runtime write (text,
integers, floats, booleans as 0/1, NULL), with one exception: SQLite's JSON functions cut a text
at an escaped NUL character. A batch whose JSON holds one is written the other way (`encode`
returns None).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

_encode = msgspec.json.Encoder().encode
_NUL = b"\\u0000"
#: rows per multi-row INSERT on the direct path: bounds the statement's parameters (SQLite
#: allows 32,766) and the number of distinct statements the connection caches
CHUNK_ROWS = 64


def _value(i: int) -> str:
    return f"json_extract(j.value, '$[{i}]')"


#: every sink by its key: the writer process receives a row's sink as its key
SINKS: dict[str, Sink] = {}


def _register(sink: Sink) -> None:
    # two sinks with one key write the same way (the key names the statement): either will do
    SINKS.setdefault(sink.key, sink)


class InsertInto:
    """An `INSERT INTO table (columns)` whose rows the writer may merge across jobs."""

    __slots__ = ("_sql", "columns", "key", "table", "width")

    def __init__(self, table: str, columns: str) -> None:
        self.table = table
        self.columns = columns
        self.width = columns.count(",") + 1
        self._sql: dict[int, str] = {}
        self.key = f"insert {table} ({columns})"
        _register(self)

    def sql(self, rows: int) -> str:
        """The statement inserting `rows` rows at once."""
        found = self._sql.get(rows)
        if found is None:
            one = "(" + ", ".join("?" * self.width) + ")"
            found = f"INSERT INTO {self.table} ({self.columns}) VALUES " + ", ".join([one] * rows)
            self._sql[rows] = found
        return found

    def statements(self, rows: list[tuple[Any, ...]]) -> Iterator[tuple[str, list[Any]]]:
        """The direct path: one multi-row INSERT per chunk."""
        for start in range(0, len(rows), CHUNK_ROWS):
            chunk = rows[start : start + CHUNK_ROWS]
            yield self.sql(len(chunk)), [value for row in chunk for value in row]

    def trigger_sql(self, slot: str) -> str:
        """The trigger's statement inserting the rows of JSON column `slot`."""
        values = ", ".join(_value(i) for i in range(self.width))
        return f"INSERT INTO {self.table} ({self.columns}) SELECT {values} FROM json_each(NEW.{slot}) AS j;"


class UpdateWhere:
    """An `UPDATE table SET columns WHERE key = ?` per row (a row is the new values, then the
    key), which the writer may merge across jobs."""

    __slots__ = ("by", "columns", "key", "sql", "table", "width")

    def __init__(self, table: str, columns: str, key: str) -> None:
        self.table = table
        self.columns = tuple(c.strip() for c in columns.split(","))
        self.by = key
        self.key = f"update {table} ({columns}) by {key}"
        self.width = len(self.columns) + 1
        sets = ", ".join(f"{c} = ?" for c in self.columns)
        self.sql = f"UPDATE {table} SET {sets} WHERE {key} = ?"
        _register(self)

    def statements(self, rows: list[tuple[Any, ...]]) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """The direct path: one UPDATE per row."""
        for row in rows:
            yield self.sql, row

    def trigger_sql(self, slot: str) -> str:
        """The trigger's statement updating the rows of JSON column `slot`."""
        sets = ", ".join(f"{c} = {_value(i)}" for i, c in enumerate(self.columns))
        key = _value(len(self.columns))
        return (
            f"UPDATE {self.table} SET {sets} FROM json_each(NEW.{slot}) AS j"
            f" WHERE {self.table}.{self.by} = {key};"
        )


Sink = InsertInto | UpdateWhere


class BatchWrite:
    """One statement writing rows into each of `sinks` (in their order: a row written by an
    earlier sink may be updated by a later one), through a TEMP view and trigger that `install`
    creates on the writer's connection (TEMP objects belong to that connection only: nothing in
    the database file changes)."""

    VIEW = "hookwise_batch"

    def __init__(self, *sinks: Sink) -> None:
        self.sinks = sinks
        self._slot = {sink: i for i, sink in enumerate(sinks)}
        holes = ", ".join("?" * len(sinks))
        self.sql = f"INSERT INTO temp.{self.VIEW} VALUES ({holes})"

    def install(self, conn: Any) -> None:
        """Create the TEMP view and its trigger on `conn` (the writer's connection)."""
        slots = [f"t{i}" for i in range(len(self.sinks))]
        body = " ".join(
            sink.trigger_sql(slot) for slot, sink in zip(slots, self.sinks, strict=True)
        )
        conn.execute(f"DROP VIEW IF EXISTS temp.{self.VIEW}")
        conn.execute(
            f"CREATE TEMP VIEW {self.VIEW} AS SELECT "
            + ", ".join(f"NULL AS {slot}" for slot in slots)
        )
        conn.execute(
            f"CREATE TEMP TRIGGER {self.VIEW}_write INSTEAD OF INSERT ON {self.VIEW}"
            f" BEGIN {body} END"
        )

    def encode(self, rows: dict[Sink, list[tuple[Any, ...]]]) -> list[str | None] | None:
        """The statement's parameters for `rows` (each sink's rows as one JSON array), or None
        if they cannot go this way (a sink this statement does not know, a NUL character)."""
        params: list[str | None] = [None] * len(self.sinks)
        for sink, sink_rows in rows.items():
            slot = self._slot.get(sink)
            if slot is None:
                return None
            data = _encode(sink_rows)
            if _NUL in data:
                return None
            params[slot] = data.decode()
        return params
