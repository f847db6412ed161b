"""Pauses and lane queues on PostgreSQL (see `hookwise.server.store.lanes`). A mixin of
`PostgresStore`: writes through its group-commit writer, reads on its pool."""

from __future__ import annotations

import asyncpg
import attrs

from ..lanes import PAUSED_COLUMN, BudgetRaise, LaneStat, Pause, run_paused
from .parts import PostgresParts

_PAUSE_COLUMNS = "kind, name, paused_by, paused_at, reason, session"


async def pause(conn: asyncpg.Connection, p: Pause) -> int:
    """Record the pause (replacing an earlier one) and hold its queued runs; how many."""
    await conn.execute(
        f"INSERT INTO pauses ({_PAUSE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
        " ON CONFLICT (kind, name) DO UPDATE SET paused_by = excluded.paused_by,"
        " paused_at = excluded.paused_at, reason = excluded.reason, session = excluded.session",
        p.kind,
        p.name,
        p.paused_by,
        p.paused_at,
        p.reason,
        p.session,
    )
    held = await conn.fetch(
        "UPDATE runs SET state = 'held' WHERE state = 'queued'"
        f" AND {PAUSED_COLUMN[p.kind]} = $1 RETURNING seq",
        p.name,
    )
    return len(held)


async def hold_queued(conn: asyncpg.Connection, kind: str, name: str) -> int:
    """Hold the queued runs of a lane while its pause is in force; how many. A run whose
    accept committed while the pause was being recorded was not seen by the pause's update,
    nor the pause by its insert's trigger: this holds it (a resume that committed first wins:
    the pause is looked up in the same statement)."""
    held = await conn.fetch(
        "UPDATE runs SET state = 'held' WHERE state = 'queued'"
        f" AND {PAUSED_COLUMN[kind]} = $1"
        " AND EXISTS (SELECT 1 FROM pauses WHERE kind = $2 AND name = $3) RETURNING seq",
        name,
        kind,
        name,
    )
    return len(held)


async def resume(conn: asyncpg.Connection, kind: str, name: str) -> int | None:
    """Lift the pause and send its held runs back to the queue (those another pause still holds
    stay held); how many went back, None when it was not paused."""
    gone = await conn.fetch(
        "DELETE FROM pauses WHERE kind = $1 AND name = $2 RETURNING 1", kind, name
    )
    if not gone:
        return None
    released = await conn.fetch(
        "UPDATE runs SET state = 'queued' WHERE state = 'held'"
        f" AND {PAUSED_COLUMN[kind]} = $1 AND NOT {run_paused('runs')} RETURNING seq",
        name,
    )
    return len(released)


class PostgresLanes(PostgresParts):
    """Pause, resume, the pauses and each lane's queue."""

    async def pause(self, p: Pause) -> int:
        return await self.write(lambda conn: pause(conn, p))

    async def resume(self, kind: str, name: str) -> int | None:
        return await self.write(lambda conn: resume(conn, kind, name))

    async def hold_queued(self, kind: str, name: str) -> int:
        return await self.write(lambda conn: hold_queued(conn, kind, name))

    async def pauses(self) -> list[Pause]:
        rows = await self._readers.fetch(f"SELECT {_PAUSE_COLUMNS} FROM pauses ORDER BY paused_at")
        return [Pause(*row) for row in rows]

    async def waive_budget(self, kind: str, name: str, *, until: float, by: str) -> None:
        await self.write(
            lambda conn: conn.execute(
                "INSERT INTO budget_waivers (kind, name, until, waived_by) VALUES ($1, $2, $3, $4)"
                " ON CONFLICT (kind, name) DO UPDATE SET until = excluded.until,"
                " waived_by = excluded.waived_by",
                kind,
                name,
                until,
                by,
            )
        )

    async def budget_waiver(self, kind: str, name: str) -> float | None:
        until = await self._readers.fetchval(
            "SELECT until FROM budget_waivers WHERE kind = $1 AND name = $2", kind, name
        )
        return None if until is None else float(until)

    async def raise_budget(self, raised: BudgetRaise) -> None:
        row = attrs.astuple(raised)
        await self.write(
            lambda conn: conn.execute(
                "INSERT INTO budget_raises (kind, name, tokens, cost, until, raised_by, raised_at) VALUES ($1, $2, $3, $4, $5, $6, $7)"
                " ON CONFLICT (kind, name) DO UPDATE SET tokens = excluded.tokens,"
                " cost = excluded.cost, until = excluded.until, raised_by = excluded.raised_by,"
                " raised_at = excluded.raised_at",
                *row,
            )
        )

    async def budget_raises(self) -> list[BudgetRaise]:
        rows = await self._readers.fetch(
            "SELECT kind, name, tokens, cost, until, raised_by, raised_at FROM budget_raises ORDER BY kind, name"
        )
        return [BudgetRaise(*r) for r in rows]

    async def lanes(self) -> list[LaneStat]:
        rows = await self._readers.fetch(
            "SELECT agent_id, rule_id, count(*) FILTER (WHERE state = 'queued'),"
            " count(*) FILTER (WHERE state = 'held'), min(created_at)"
            " FROM runs WHERE state IN ('queued', 'held')"
            " GROUP BY agent_id, rule_id ORDER BY agent_id, rule_id NULLS FIRST"
        )
        return [LaneStat(a, r, int(q), int(h), o) for a, r, q, h, o in rows]
