"""The SQLite store's approvals (see `hookwise.server.store.approvals`): parking a run, deciding
and timing out its approvals, each a module-level write handed to the writer; reads on a reader."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..approvals import (
    COLUMNS,
    REFUSAL_COLUMNS,
    WIDTH,
    ApprovalRecord,
    Decided,
    PendingStats,
    Refusal,
)
from ..lanes import requeued_state
from .parts import SQLiteParts

_INSERT = f"INSERT INTO approvals ({COLUMNS}) VALUES ({', '.join('?' * WIDTH)})"
_SELECT = f"SELECT {COLUMNS} FROM approvals"


def park_run(
    cur: sqlite3.Cursor, run_id: str, parked: str, rows: Sequence[tuple[Any, ...]]
) -> bool:
    """`running` -> `awaiting_approval` with its conversation and its approvals; False (nothing
    written) when the run is not running here any more."""
    changed = cur.execute(
        "UPDATE runs SET state = 'awaiting_approval', parked = ?, lease_until = NULL"
        " WHERE run_id = ? AND state = 'running'",
        (parked, run_id),
    ).rowcount
    if changed:
        cur.executemany(_INSERT, rows)
    return bool(changed)


def _release(cur: sqlite3.Cursor, run_id: str) -> bool:
    """The run back to the queue (held if paused) once none of its approvals is pending; its
    claim then does not count as one more attempt."""
    return bool(
        cur.execute(
            f"UPDATE runs SET state = {requeued_state('runs')}, attempts = MAX(attempts - 1, 0)"
            " WHERE run_id = ? AND state = 'awaiting_approval' AND NOT EXISTS"
            " (SELECT 1 FROM approvals a WHERE a.run_id = ? AND a.state = 'pending')",
            (run_id, run_id),
        ).rowcount
    )


def _refuse(
    cur: sqlite3.Cursor, approval_id: str | None, now: float, by: str, via: str, why: str
) -> None:
    cur.execute(
        f"INSERT INTO approval_refusals ({REFUSAL_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
        (approval_id, now, by, via, why),
    )


def decide(
    cur: sqlite3.Cursor,
    approval_id: str | None,
    token_hash: str | None,
    state: str,
    by: str,
    via: str,
    now: float,
    refuse: str | None = None,
) -> tuple[bool, bool, tuple[Any, ...] | None]:
    """Decide one pending approval (by id, or by its token's hash): (counted, run resumed, its
    row now). A decision that changes nothing is written to `approval_refusals` with its reason;
    `refuse` refuses it outright (an approver check that failed)."""
    if approval_id is None:
        found = cur.execute(
            "SELECT approval_id FROM approvals WHERE token_hash = ?", (token_hash,)
        ).fetchone()
        approval_id = found[0] if found else None
    row = (
        cur.execute(_SELECT + " WHERE approval_id = ?", (approval_id,)).fetchone()
        if approval_id is not None
        else None
    )
    if row is None:
        _refuse(cur, None, now, by, via, refuse or "no such approval (forged or unknown token)")
        return False, False, None
    if refuse is not None:
        _refuse(cur, approval_id, now, by, via, refuse)
        return False, False, tuple(row)
    changed = cur.execute(
        "UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, via = ?"
        " WHERE approval_id = ? AND state = 'pending' AND expires_at > ?",
        (state, now, by, via, approval_id, now),
    ).rowcount
    if not changed:
        current = ApprovalRecord.from_row(row)
        why = (
            f"already {current.state}"
            if current.state != "pending"
            else "too late: the approval had expired"
        )
        _refuse(cur, approval_id, now, by, via, why)
        return False, False, tuple(row)
    resumed = _release(cur, row[1])
    after = cur.execute(_SELECT + " WHERE approval_id = ?", (approval_id,)).fetchone()
    return True, resumed, tuple(after)


def expire(cur: sqlite3.Cursor, now: float, state: str) -> list[str]:
    """Pending approvals past their time -> `state` (decided by `timeout`, via `sweep`); the
    runs this released."""
    due = cur.execute(
        "SELECT approval_id, run_id FROM approvals WHERE state = 'pending' AND expires_at <= ?",
        (now,),
    ).fetchall()
    released: list[str] = []
    for approval_id, run_id in due:
        changed = cur.execute(
            "UPDATE approvals SET state = ?, decided_at = ?, decided_by = 'timeout', via = 'sweep'"
            " WHERE approval_id = ? AND state = 'pending'",
            (state, now, approval_id),
        ).rowcount
        if changed and _release(cur, run_id):
            released.append(run_id)
    return released


class SQLiteApprovals(SQLiteParts):
    """Parking runs and deciding their approvals (a mixin of `SQLiteStore`)."""

    async def park_run(self, run_id: str, parked: str, approvals: Sequence[ApprovalRecord]) -> bool:
        rows = [a.row() for a in approvals]
        return await self.write(partial(park_run, run_id=run_id, parked=parked, rows=rows))

    async def decide_approval(
        self,
        *,
        approval_id: str | None = None,
        token_hash: str | None = None,
        state: str,
        by: str,
        via: str,
        now: float,
        refuse: str | None = None,
    ) -> Decided:
        counted, resumed, row = await self.write(
            partial(
                decide,
                approval_id=approval_id,
                token_hash=token_hash,
                state=state,
                by=by,
                via=via,
                now=now,
                refuse=refuse,
            )
        )
        return Decided(counted, resumed, ApprovalRecord.from_row(row) if row else None)

    async def expire_approvals(self, *, now: float, state: str) -> list[str]:
        return await self.write(partial(expire, now=now, state=state))

    async def approvals(
        self, *, state: str | None = None, run_id: str | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        rows = await self._read(
            lambda conn: conn.execute(
                _SELECT + " WHERE (? IS NULL OR state = ?) AND (? IS NULL OR run_id = ?)"
                " ORDER BY created_at, seq LIMIT ?",
                (state, state, run_id, run_id, limit),
            ).fetchall()
        )
        return [ApprovalRecord.from_row(r) for r in rows]

    async def approval(
        self, approval_id: str | None = None, *, token_hash: str | None = None
    ) -> ApprovalRecord | None:
        rows = await self._read(
            lambda conn: conn.execute(
                _SELECT + " WHERE approval_id = ? OR token_hash = ?", (approval_id, token_hash)
            ).fetchall()
        )
        return ApprovalRecord.from_row(rows[0]) if rows else None

    async def approval_refusals(self, run_id: str) -> list[Refusal]:
        rows = await self._read(
            lambda conn: conn.execute(
                f"SELECT {REFUSAL_COLUMNS} FROM approval_refusals WHERE approval_id IN"
                " (SELECT approval_id FROM approvals WHERE run_id = ?) ORDER BY seq",
                (run_id,),
            ).fetchall()
        )
        return [Refusal(*r) for r in rows]

    async def pending_approvals(self) -> PendingStats:
        row = await self._read(
            lambda conn: conn.execute(
                "SELECT count(*), min(created_at) FROM approvals WHERE state = 'pending'"
            ).fetchone()
        )
        return PendingStats(int(row[0]), row[1])
