"""The admin API's reads on PostgreSQL: listings with keyset pagination (newest first) and
lookups, on the read pool (never behind a commit). A mixin of `PostgresStore`."""

from __future__ import annotations

import asyncpg

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


class PostgresAdminReads:
    """What the admin API reads; needs the store's read pool `_readers`."""

    @property
    def _readers(self) -> asyncpg.Pool:
        raise NotImplementedError

    async def list_events(self, session: str, *, limit: int, cursor: str | None) -> Page:
        rows = await self._readers.fetch(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session = $1 AND seq < $2"
            " ORDER BY seq DESC LIMIT $3",
            session,
            cursor_value(cursor),
            limit + 1,
        )
        return page_of(rows, limit, event_record)

    async def list_runs(
        self, *, limit: int, cursor: str | None, state: str | None, agent: str | None = None
    ) -> Page:
        rows = await self._readers.fetch(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE seq < $1"
            " AND ($2::text IS NULL OR state = $2) AND ($4::text IS NULL OR agent_id = $4)"
            " ORDER BY seq DESC LIMIT $3",
            cursor_value(cursor),
            state,
            limit + 1,
            agent,
        )
        return page_of(rows, limit, run_record)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._readers.fetchrow(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1", run_id
        )
        return run_record(row) if row else None

    async def request_log(self, *, limit: int, cursor: str | None) -> Page:
        rows = await self._readers.fetch(
            "SELECT seq, at, path, status, client, size, action, rule_id, code FROM request_log"
            " WHERE seq < $1 ORDER BY seq DESC LIMIT $2",
            cursor_value(cursor),
            limit + 1,
        )
        return page_of(rows, limit, lambda r: RequestLogEntry(*list(r)[1:]))

    async def list_heartbeats(self, *, limit: int) -> list[HeartbeatRecord]:
        rows = await self._readers.fetch(
            f"SELECT {HEARTBEAT_COLUMNS} FROM heartbeats ORDER BY seq DESC LIMIT $1", limit
        )
        return [heartbeat_record(tuple(r)) for r in rows]

    async def list_deliveries(
        self, *, limit: int, cursor: str | None, run_id: str | None = None, state: str | None = None
    ) -> Page:
        rows = await self._readers.fetch(
            f"SELECT seq, {DELIVERY_COLUMNS} FROM deliveries WHERE seq < $1"
            " AND ($2::text IS NULL OR run_id = $2) AND ($3::text IS NULL OR state = $3)"
            " ORDER BY seq DESC LIMIT $4",
            cursor_value(cursor),
            run_id,
            state,
            limit + 1,
        )
        return page_of(rows, limit, lambda r: delivery_record(tuple(r)[1:]))
