"""The admin API's reads on SQLite: listings with keyset pagination (newest first) and lookups.

A mixin of `SQLiteStore`: each query runs on a reader thread's read-only connection (`_read`),
never behind a commit.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from hookwise.server.store.base import (
    HeartbeatRecord,
    Page,
    RequestLogEntry,
    RunRecord,
    cursor_value,
    page_of,
)
from hookwise.server.store.rows import (
    DELIVERY_COLUMNS,
    EVENT_COLUMNS,
    HEARTBEAT_COLUMNS,
    RUN_COLUMNS,
    delivery_record,
    event_record,
    heartbeat_record,
    run_record,
)

T = TypeVar("T")


class SQLiteAdminReads:
    """What the admin API reads; needs the store's `_read`."""

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    async def list_events(self, session: str, *, limit: int, cursor: str | None) -> Page:
        def fn(conn: sqlite3.Connection) -> Page:
            rows = conn.execute(
                f"SELECT {EVENT_COLUMNS} FROM events WHERE session = ? AND seq < ?"
                " ORDER BY seq DESC LIMIT ?",
                (session, cursor_value(cursor), limit + 1),
            ).fetchall()
            return page_of(rows, limit, event_record)

        return await self._read(fn)

    async def list_runs(
        self, *, limit: int, cursor: str | None, state: str | None, agent: str | None = None
    ) -> Page:
        def fn(conn: sqlite3.Connection) -> Page:
            sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE seq < ?"
            args: list[Any] = [cursor_value(cursor)]
            if state is not None:
                sql += " AND state = ?"
                args.append(state)
            if agent is not None:
                sql += " AND agent_id = ?"
                args.append(agent)
            rows = conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit + 1)).fetchall()
            return page_of(rows, limit, run_record)

        return await self._read(fn)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def fn(conn: sqlite3.Connection) -> RunRecord | None:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            return run_record(row) if row else None

        return await self._read(fn)

    async def request_log(self, *, limit: int, cursor: str | None) -> Page:
        def fn(conn: sqlite3.Connection) -> Page:
            rows = conn.execute(
                "SELECT seq, at, path, status, client, size, action, rule_id, code FROM request_log"
                " WHERE seq < ? ORDER BY seq DESC LIMIT ?",
                (cursor_value(cursor), limit + 1),
            ).fetchall()
            return page_of(rows, limit, lambda r: RequestLogEntry(*r[1:]))

        return await self._read(fn)

    async def list_heartbeats(self, *, limit: int) -> list[HeartbeatRecord]:
        def fn(conn: sqlite3.Connection) -> list[HeartbeatRecord]:
            rows = conn.execute(
                f"SELECT {HEARTBEAT_COLUMNS} FROM heartbeats ORDER BY seq DESC LIMIT ?", (limit,)
            ).fetchall()
            return [heartbeat_record(r) for r in rows]

        return await self._read(fn)

    async def list_deliveries(
        self, *, limit: int, cursor: str | None, run_id: str | None = None, state: str | None = None
    ) -> Page:
        def fn(conn: sqlite3.Connection) -> Page:
            sql = f"SELECT seq, {DELIVERY_COLUMNS} FROM deliveries WHERE seq < ?"
            args: list[Any] = [cursor_value(cursor)]
            if run_id is not None:
                sql += " AND run_id = ?"
                args.append(run_id)
            if state is not None:
                sql += " AND state = ?"
                args.append(state)
            rows = conn.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, limit + 1)).fetchall()
            return page_of(rows, limit, lambda r: delivery_record(r[1:]))

        return await self._read(fn)
