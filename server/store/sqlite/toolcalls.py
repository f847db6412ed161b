"""The SQLite store's tool-call records (`run_tool_calls`): written through the writer (a row is
replaced when the call's outcome arrives), read on a reader connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..toolcalls import COLUMNS, WIDTH, ToolCallRecord
from .parts import SQLiteParts

_UPSERT = f"INSERT OR REPLACE INTO run_tool_calls ({COLUMNS}) VALUES ({', '.join('?' * WIDTH)})"


def write_tool_calls(cur: sqlite3.Cursor, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert or replace these rows (module level: the writer process receives it by name)."""
    cur.executemany(_UPSERT, rows)


class SQLiteToolCalls(SQLiteParts):
    """Recording and reading a run's tool calls."""

    async def record_tool_calls(self, calls: Sequence[ToolCallRecord]) -> None:
        if calls:
            await self.write(partial(write_tool_calls, rows=[c.row() for c in calls]))

    async def tool_calls(self, run_id: str) -> list[ToolCallRecord]:
        rows = await self._read(
            lambda conn: conn.execute(
                f"SELECT {COLUMNS} FROM run_tool_calls WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        )
        return [ToolCallRecord.from_row(r) for r in rows]

    async def tool_calls_of(self, owner_ids: Sequence[str]) -> list[ToolCallRecord]:
        if not owner_ids:
            return []
        ids = json.dumps(list(owner_ids))
        rows = await self._read(
            lambda conn: conn.execute(
                f"SELECT {COLUMNS} FROM run_tool_calls"
                " WHERE run_id IN (SELECT value FROM json_each(?)) ORDER BY run_id, seq",
                (ids,),
            ).fetchall()
        )
        return [ToolCallRecord.from_row(r) for r in rows]
