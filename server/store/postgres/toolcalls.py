"""The PostgreSQL store's tool-call records (`run_tool_calls`): written through the writer (a row
is replaced when the call's outcome arrives), read from the pool."""

from __future__ import annotations

from collections.abc import Sequence

from ..toolcalls import COLUMNS, WIDTH, ToolCallRecord
from .parts import PostgresParts

_UPSERT = (
    f"INSERT INTO run_tool_calls ({COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, WIDTH + 1))})"
    " ON CONFLICT (run_id, seq) DO UPDATE SET "
    + ", ".join(f"{c.strip()} = excluded.{c.strip()}" for c in COLUMNS.split(",")[2:])
)


class PostgresToolCalls(PostgresParts):
    """Recording and reading a run's tool calls (a mixin of `PostgresStore`)."""

    async def record_tool_calls(self, calls: Sequence[ToolCallRecord]) -> None:
        if not calls:
            return
        rows = [c.row() for c in calls]
        await self.write(lambda conn: conn.executemany(_UPSERT, rows))

    async def tool_calls(self, run_id: str) -> list[ToolCallRecord]:
        rows = await self._readers.fetch(
            f"SELECT {COLUMNS} FROM run_tool_calls WHERE run_id = $1 ORDER BY seq", run_id
        )
        return [ToolCallRecord.from_row(tuple(r)) for r in rows]

    async def tool_calls_of(self, owner_ids: Sequence[str]) -> list[ToolCallRecord]:
        if not owner_ids:
            return []
        rows = await self._readers.fetch(
            f"SELECT {COLUMNS} FROM run_tool_calls WHERE run_id = ANY($1::text[])"
            " ORDER BY run_id, seq",
            list(owner_ids),
        )
        return [ToolCallRecord.from_row(tuple(r)) for r in rows]
