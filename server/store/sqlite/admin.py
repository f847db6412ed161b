"""The admin API's reads and recoveries on SQLite: listings walking an index newest first
(`store.listing`), lookups, sessions, and failed work sent back to the queue.

A mixin of `SQLiteStore`: reads run on a reader thread's read-only connection (`_read`), never
behind a commit; retries run in the writer's group commit (`write`), which no other writer
interleaves with, so the rows a retry picks are the rows it changes.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..audit import AuditRecord, audit_row
from ..base import Page, RequestLogEntry, RunRecord
from ..listing import (
    LISTINGS,
    PAYLOAD_COLUMNS,
    ListingShortcuts,
    activity_query,
    attempts_query,
    listing_query,
    payload_record,
    payload_row,
    retry_log,
    retry_pick_query,
    retry_update,
    sessions_query,
    sqlite_placeholder,
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
from . import writes
from .parts import SQLiteParts

P = sqlite_placeholder


class SQLiteAdminReads(SQLiteParts, ListingShortcuts):
    """What the admin API reads and recovers."""

    async def _fetch(self, sql: str, args: list[Any] | tuple[Any, ...]) -> list[Any]:
        return await self._read(lambda conn: conn.execute(sql, args).fetchall())

    async def admin_list(
        self, name: str, filters: Filters, *, limit: int, cursor: str | None
    ) -> Page:
        """One page of a listing (`store.listing.LISTINGS`), newest first."""
        listing, convert = LISTINGS[name]
        sql, args = listing_query(listing, filters, cursor=cursor, limit=limit, placeholder=P)
        return page_of(await self._fetch(sql, args), limit, convert)

    async def delivery_attempts(self, delivery_ids: list[str]) -> list[AttemptRecord]:
        """Every attempt of these deliveries, oldest first."""
        ids = list(delivery_ids)[:500]
        if not ids:
            return []
        sql = attempts_query(len(ids), P)
        return [AttemptRecord(*r) for r in await self._fetch(sql, ids)]

    async def activity(
        self, name: str, *, since: float, width: float, failed: bool = False
    ) -> dict[int, int]:
        """Rows of listing `name` created per `width`-second bucket since `since` (bucket -> n)."""
        sql, args = activity_query(name, since=since, width=width, failed=failed, placeholder=P)
        return {int(b): int(n) for b, n in await self._fetch(sql, args)}

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._fetch(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,))
        return run_record(rows[0]) if rows else None

    async def get_request(self, request_id: str) -> RequestLogEntry | None:
        rows = await self._fetch(
            f"SELECT {LOG_COLUMNS} FROM request_log WHERE request_id = ?", (request_id,)
        )
        return request_record(rows[0]) if rows else None

    async def delivery_state(self, delivery_id: str) -> str | None:
        rows = await self._fetch(
            "SELECT state FROM deliveries WHERE delivery_id = ?", (delivery_id,)
        )
        return rows[0][0] if rows else None

    async def list_retries(self, target_id: str) -> list[RetryRecord]:
        rows = await self._fetch(
            f"SELECT {RETRY_COLUMNS} FROM retries WHERE target_id = ? ORDER BY seq", (target_id,)
        )
        return [retry_record(r) for r in rows]

    async def list_sessions(self, *, limit: int, cursor: str | None) -> Page:
        sql, args = sessions_query(cursor=cursor, limit=limit, placeholder=P)
        rows = await self._fetch(sql, args)
        items = sorted((SessionRecord(*r) for r in rows[:limit]), key=lambda s: s.session_key)
        return Page(items, items[-1].session_key if len(rows) > limit else None)

    async def retry(self, kind: str, req: RetryRequest) -> int:
        """Send the failed rows `req` picks back to the queue (attempts kept, each retry
        recorded); the number sent (or, with `dry_run`, that would be)."""
        pick, args = retry_pick_query(kind, req, P)
        if req.dry_run:
            rows = await self._fetch(f"SELECT count(*) FROM ({pick})", args)
            return int(rows[0][0])
        update, uses_now = retry_update(kind, P)
        log = retry_log(P)
        return await self.write(
            partial(
                writes.retry,
                kind=kind,
                req=req,
                pick=pick,
                args=args,
                update=update,
                uses_now=uses_now,
                log=log,
            )
        )

    # kept payloads (hooks.retainPayloads)

    def keep_payload(self, payload: StoredPayload) -> None:
        """Keep a request for replay; written with the next group, never awaited."""
        self._writer.submit_nowait(partial(writes.keep_payload, row=payload_row(payload)))

    async def get_payload(self, request_id: str) -> StoredPayload | None:
        rows = await self._fetch(
            f"SELECT {PAYLOAD_COLUMNS} FROM payloads WHERE request_id = ?", (request_id,)
        )
        return payload_record(rows[0]) if rows else None

    async def end_console_session(self, session_id: str, *, now: float) -> None:
        await self.write(partial(writes.end_console_session, session_id=session_id, now=now))

    async def record_audit(self, entry: AuditRecord) -> None:
        await self.write(partial(writes.record_audit, row=audit_row(entry)))

    async def console_session_ended(self, session_id: str) -> bool:
        rows = await self._fetch(
            "SELECT 1 FROM console_logouts WHERE session_id = ?", (session_id,)
        )
        return bool(rows)

    async def delete_payload(self, request_id: str) -> bool:
        return await self.write(partial(writes.delete_payload, request_id=request_id))

    async def prune_payloads(self, *, before: float, batch: int = 1000) -> int:
        """Forget payloads kept since before `before`, in small batches; how many."""
        total = 0
        while True:
            n = await self.write(partial(writes.prune_payloads, before=before, batch=batch))
            total += n
            if n < batch:
                return total
