"""The admin API's reads and recoveries on PostgreSQL: listings walking an index newest first
(`store.listing`), lookups, sessions, and failed work sent back to the queue. A mixin of
`PostgresStore`: reads on the read pool (never behind a commit); retries in the writer's
transaction, the picked rows locked (`FOR UPDATE`: a row another process changed meanwhile is
checked again and left out if no longer failed)."""

from __future__ import annotations

from typing import Any

import asyncpg

from ..audit import AUDIT_INSERT, AuditRecord, audit_row
from ..base import Page, RequestLogEntry, RunRecord
from ..listing import (
    LISTINGS,
    PAYLOAD_COLUMNS,
    POSTGRES_WALK,
    ListingShortcuts,
    activity_query,
    attempts_query,
    listing_query,
    payload_record,
    payload_row,
    postgres_placeholder,
    retry_log,
    retry_pick_query,
    retry_update,
    sessions_query,
)
from ..records import (
    AttemptRecord,
    Filters,
    RetryRecord,
    RetryRequest,
    SessionRecord,
    StoredPayload,
)
from ..rows import (
    LOG_COLUMNS,
    RETRY_COLUMNS,
    RUN_COLUMNS,
    page_of,
    request_record,
    retry_record,
    run_record,
)
from .parts import PostgresParts

P = postgres_placeholder


class PostgresAdminReads(PostgresParts, ListingShortcuts):
    """What the admin API reads and recovers."""

    async def admin_list(
        self, name: str, filters: Filters, *, limit: int, cursor: str | None
    ) -> Page:
        """One page of a listing (`store.listing.LISTINGS`), newest first."""
        listing, convert = LISTINGS[name]
        sql, args = listing_query(listing, filters, cursor=cursor, limit=limit, placeholder=P)
        return page_of(await self._walk(sql, args), limit, convert)

    async def _walk(self, sql: str, args: list[Any]) -> list[Any]:
        """Rows of a listing, its plan held to an index walk (`POSTGRES_WALK`)."""
        async with self._readers.acquire() as conn, conn.transaction(readonly=True):
            await conn.execute(POSTGRES_WALK)
            return await conn.fetch(sql, *args)

    async def delivery_attempts(self, delivery_ids: list[str]) -> list[AttemptRecord]:
        """Every attempt of these deliveries, oldest first."""
        ids = list(delivery_ids)[:500]
        if not ids:
            return []
        sql = attempts_query(len(ids), P)
        return [AttemptRecord(*r) for r in await self._readers.fetch(sql, *ids)]

    async def activity(
        self, name: str, *, since: float, width: float, failed: bool = False
    ) -> dict[int, int]:
        """Rows of listing `name` created per `width`-second bucket since `since` (bucket -> n)."""
        sql, args = activity_query(name, since=since, width=width, failed=failed, placeholder=P)
        return {int(b): int(n) for b, n in await self._readers.fetch(sql, *args)}

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._readers.fetchrow(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1", run_id
        )
        return run_record(row) if row else None

    async def get_request(self, request_id: str) -> RequestLogEntry | None:
        row = await self._readers.fetchrow(
            f"SELECT {LOG_COLUMNS} FROM request_log WHERE request_id = $1", request_id
        )
        return request_record(row) if row else None

    async def delivery_state(self, delivery_id: str) -> str | None:
        return await self._readers.fetchval(
            "SELECT state FROM deliveries WHERE delivery_id = $1", delivery_id
        )

    async def list_retries(self, target_id: str) -> list[RetryRecord]:
        rows = await self._readers.fetch(
            f"SELECT {RETRY_COLUMNS} FROM retries WHERE target_id = $1 ORDER BY seq", target_id
        )
        return [retry_record(tuple(r)) for r in rows]

    async def list_sessions(self, *, limit: int, cursor: str | None) -> Page:
        sql, args = sessions_query(cursor=cursor, limit=limit, placeholder=P)
        rows = await self._walk(sql, args)
        items = sorted((SessionRecord(*r) for r in rows[:limit]), key=lambda s: s.session_key)
        return Page(items, items[-1].session_key if len(rows) > limit else None)

    async def retry(self, kind: str, req: RetryRequest) -> int:
        """Send the failed rows `req` picks back to the queue (attempts kept, each retry
        recorded); the number sent (or, with `dry_run`, that would be)."""
        pick, args = retry_pick_query(kind, req, P)
        if req.dry_run:
            return int(await self._readers.fetchval(f"SELECT count(*) FROM ({pick}) p", *args))
        update, uses_now = retry_update(kind, P)
        log = retry_log(P)

        async def fn(conn: asyncpg.Connection) -> int:
            rows = await conn.fetch(pick + " FOR UPDATE", *args)
            if rows:
                await conn.executemany(
                    update, [(req.now, r[0]) if uses_now else (r[0],) for r in rows]
                )
                await conn.executemany(
                    log, [(kind, r[1], r[2], r[3], r[4], req.actor, req.now) for r in rows]
                )
            return len(rows)

        return await self.write(fn)

    # kept payloads (hooks.retainPayloads)

    def keep_payload(self, payload: StoredPayload) -> None:
        """Keep a request for replay; written with the next group, never awaited."""
        row = payload_row(payload)

        async def fn(conn: asyncpg.Connection) -> None:
            await conn.execute(
                f"INSERT INTO payloads ({PAYLOAD_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
                " ON CONFLICT (request_id) DO NOTHING",
                *row,
            )

        self._writer.submit_nowait(fn)

    async def get_payload(self, request_id: str) -> StoredPayload | None:
        row = await self._readers.fetchrow(
            f"SELECT {PAYLOAD_COLUMNS} FROM payloads WHERE request_id = $1", request_id
        )
        return payload_record(row) if row else None

    async def end_console_session(self, session_id: str, *, now: float) -> None:
        async def fn(conn: asyncpg.Connection) -> None:
            await conn.execute(
                "INSERT INTO console_logouts (session_id, ended_at) VALUES ($1, $2)"
                " ON CONFLICT (session_id) DO NOTHING",
                session_id,
                now,
            )

        await self.write(fn)

    async def record_audit(self, entry: AuditRecord) -> None:
        row = audit_row(entry)

        async def fn(conn: asyncpg.Connection) -> None:
            await conn.execute(
                f"INSERT INTO audit ({AUDIT_INSERT}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                *row,
            )

        await self.write(fn)

    async def console_session_ended(self, session_id: str) -> bool:
        found = await self._readers.fetchval(
            "SELECT 1 FROM console_logouts WHERE session_id = $1", session_id
        )
        return found is not None

    async def delete_payload(self, request_id: str) -> bool:
        async def fn(conn: asyncpg.Connection) -> bool:
            done = await conn.execute("DELETE FROM payloads WHERE request_id = $1", request_id)
            return done != "DELETE 0"

        return await self.write(fn)

    async def prune_payloads(self, *, before: float, batch: int = 1000) -> int:
        """Forget payloads kept since before `before`, in small batches; how many."""
        total = 0
        while True:

            async def fn(conn: asyncpg.Connection) -> int:
                done = await conn.execute(
                    "DELETE FROM payloads WHERE request_id IN (SELECT request_id FROM payloads"
                    " WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
                    before,
                    batch,
                )
                return int(done.split()[-1])

            n = await self.write(fn)
            total += n
            if n < batch:
                return total
