"""Pauses and lane queues on SQLite (see `hookwise.server.store.lanes`). The writes are
module-level functions of the cursor, sent to the writer (process) as they are; the reads run on
a reader thread. A mixin of `SQLiteStore`."""

from __future__ import annotations

import sqlite3
from functools import partial

import attrs

from ..lanes import PAUSED_COLUMN, BudgetRaise, LaneStat, Pause, run_paused
from .parts import SQLiteParts

_PAUSE_COLUMNS = "kind, name, paused_by, paused_at, reason, session"


def pause(cur: sqlite3.Cursor, p: Pause) -> int:
    """Record the pause (replacing an earlier one of the same mapping or agent) and hold its
    queued runs; how many were held."""
    cur.execute(
        f"INSERT INTO pauses ({_PAUSE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (kind, name) DO UPDATE SET paused_by = excluded.paused_by,"
        " paused_at = excluded.paused_at, reason = excluded.reason, session = excluded.session",
        (p.kind, p.name, p.paused_by, p.paused_at, p.reason, p.session),
    )
    return cur.execute(
        f"UPDATE runs SET state = 'held' WHERE state = 'queued' AND {PAUSED_COLUMN[p.kind]} = ?",
        (p.name,),
    ).rowcount


def resume(cur: sqlite3.Cursor, kind: str, name: str) -> int | None:
    """Lift the pause and send its held runs back to the queue, in their order (those another
    pause still holds stay held); how many went back, None when it was not paused."""
    if not cur.execute("DELETE FROM pauses WHERE kind = ? AND name = ?", (kind, name)).rowcount:
        return None
    return cur.execute(
        "UPDATE runs SET state = 'queued' WHERE state = 'held'"
        f" AND {PAUSED_COLUMN[kind]} = ? AND NOT {run_paused('runs')}",
        (name,),
    ).rowcount


def waive_budget(cur: sqlite3.Cursor, kind: str, name: str, until: float, by: str) -> None:
    cur.execute(
        "INSERT INTO budget_waivers (kind, name, until, waived_by) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (kind, name) DO UPDATE SET until = excluded.until,"
        " waived_by = excluded.waived_by",
        (kind, name, until, by),
    )


def raise_budget(cur: sqlite3.Cursor, row: tuple[object, ...]) -> None:
    cur.execute(
        "INSERT OR REPLACE INTO budget_raises (kind, name, tokens, cost, until, raised_by, raised_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        row,
    )


class SQLiteLanes(SQLiteParts):
    """Pause, resume, the pauses and each lane's queue."""

    async def pause(self, p: Pause) -> int:
        return await self.write(partial(pause, p=p))

    async def resume(self, kind: str, name: str) -> int | None:
        return await self.write(partial(resume, kind=kind, name=name))

    async def pauses(self) -> list[Pause]:
        def fn(conn: sqlite3.Connection) -> list[Pause]:
            rows = conn.execute(f"SELECT {_PAUSE_COLUMNS} FROM pauses ORDER BY paused_at")
            return [Pause(*row) for row in rows]

        return await self._read(fn)

    async def waive_budget(self, kind: str, name: str, *, until: float, by: str) -> None:
        await self.write(partial(waive_budget, kind=kind, name=name, until=until, by=by))

    async def budget_waiver(self, kind: str, name: str) -> float | None:
        row = await self._read(
            lambda conn: conn.execute(
                "SELECT until FROM budget_waivers WHERE kind = ? AND name = ?", (kind, name)
            ).fetchone()
        )
        return None if row is None else float(row[0])

    async def raise_budget(self, raised: BudgetRaise) -> None:
        await self.write(partial(raise_budget, row=attrs.astuple(raised)))

    async def budget_raises(self) -> list[BudgetRaise]:
        rows = await self._read(
            lambda conn: conn.execute(
                "SELECT kind, name, tokens, cost, until, raised_by, raised_at FROM budget_raises ORDER BY kind, name"
            ).fetchall()
        )
        return [BudgetRaise(*r) for r in rows]

    async def lanes(self) -> list[LaneStat]:
        def fn(conn: sqlite3.Connection) -> list[LaneStat]:
            rows = conn.execute(
                "SELECT agent_id, rule_id, sum(state = 'queued'), sum(state = 'held'),"
                " min(created_at) FROM runs WHERE state IN ('queued', 'held')"
                " GROUP BY agent_id, rule_id ORDER BY agent_id, rule_id"
            )
            return [LaneStat(a, r, int(q), int(h), o) for a, r, q, h, o in rows]

        return await self._read(fn)
