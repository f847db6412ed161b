"""The PostgreSQL store's approvals (see `hookwise.server.store.approvals`): parking a run,
deciding and timing out its approvals through the writer; reads from the pool.

Between processes: a decision first locks its run's row, so two decisions of one run's
approvals (in two processes) are serial and the second sees the first when it checks whether
any is still pending; each approval's update is conditional (`state = 'pending'`), so a second
decision of one approval, or a sweep racing a person, changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

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
from .parts import PostgresParts

_INSERT = (
    f"INSERT INTO approvals ({COLUMNS}) VALUES ({', '.join(f'${i}' for i in range(1, WIDTH + 1))})"
)
_SELECT = f"SELECT {COLUMNS} FROM approvals"
_RELEASE = (
    f"UPDATE runs SET state = {requeued_state('runs')}, attempts = GREATEST(attempts - 1, 0)"
    " WHERE run_id = $1 AND state = 'awaiting_approval' AND NOT EXISTS"
    " (SELECT 1 FROM approvals a WHERE a.run_id = $1 AND a.state = 'pending') RETURNING 1"
)


async def _refuse(
    conn: asyncpg.Connection, approval_id: str | None, now: float, by: str, via: str, why: str
) -> None:
    await conn.execute(
        f"INSERT INTO approval_refusals ({REFUSAL_COLUMNS}) VALUES ($1, $2, $3, $4, $5)",
        approval_id,
        now,
        by,
        via,
        why,
    )


class PostgresApprovals(PostgresParts):
    """Parking runs and deciding their approvals (a mixin of `PostgresStore`)."""

    async def park_run(self, run_id: str, parked: str, approvals: Sequence[ApprovalRecord]) -> bool:
        rows = [a.row() for a in approvals]

        async def job(conn: asyncpg.Connection) -> bool:
            done = await conn.fetchval(
                "UPDATE runs SET state = 'awaiting_approval', parked = $1, lease_until = NULL"
                " WHERE run_id = $2 AND state = 'running' RETURNING 1",
                parked,
                run_id,
            )
            if done is None:
                return False
            await conn.executemany(_INSERT, rows)
            return True

        return await self.write(job)

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
        async def job(conn: asyncpg.Connection) -> Decided:
            row = await conn.fetchrow(
                _SELECT + " WHERE approval_id = $1 OR token_hash = $2", approval_id, token_hash
            )
            if row is None:
                await _refuse(
                    conn, None, now, by, via, refuse or "no such approval (forged or unknown token)"
                )
                return Decided(False, False, None)
            found = ApprovalRecord.from_row(tuple(row))
            if refuse is not None:
                await _refuse(conn, found.approval_id, now, by, via, refuse)
                return Decided(False, False, found)
            # serial per run across processes (see the module)
            await conn.execute("SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE", found.run_id)
            after = await conn.fetchrow(
                "UPDATE approvals SET state = $1, decided_at = $2, decided_by = $3, via = $4"
                " WHERE approval_id = $5 AND state = 'pending' AND expires_at > $2"
                f" RETURNING {COLUMNS}",
                state,
                now,
                by,
                via,
                found.approval_id,
            )
            if after is None:
                current = await conn.fetchrow(
                    _SELECT + " WHERE approval_id = $1", found.approval_id
                )
                record = ApprovalRecord.from_row(tuple(current))
                why = (
                    f"already {record.state}"
                    if record.state != "pending"
                    else "too late: the approval had expired"
                )
                await _refuse(conn, found.approval_id, now, by, via, why)
                return Decided(False, False, record)
            resumed = await conn.fetchval(_RELEASE, found.run_id) is not None
            return Decided(True, resumed, ApprovalRecord.from_row(tuple(after)))

        return await self.write(job)

    async def expire_approvals(self, *, now: float, state: str) -> list[str]:
        async def job(conn: asyncpg.Connection) -> list[str]:
            due = await conn.fetch(
                "SELECT approval_id, run_id FROM approvals"
                " WHERE state = 'pending' AND expires_at <= $1 ORDER BY run_id",
                now,
            )
            released: list[str] = []
            for approval_id, run_id in due:
                await conn.execute("SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
                changed = await conn.fetchval(
                    "UPDATE approvals SET state = $1, decided_at = $2, decided_by = 'timeout',"
                    " via = 'sweep' WHERE approval_id = $3 AND state = 'pending' RETURNING 1",
                    state,
                    now,
                    approval_id,
                )
                if changed is not None and await conn.fetchval(_RELEASE, run_id) is not None:
                    released.append(run_id)
            return released

        return await self.write(job)

    async def approvals(
        self, *, state: str | None = None, run_id: str | None = None, limit: int = 100
    ) -> list[ApprovalRecord]:
        rows = await self._readers.fetch(
            _SELECT
            + " WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR run_id = $2)"
            " ORDER BY created_at, seq LIMIT $3",
            state,
            run_id,
            limit,
        )
        return [ApprovalRecord.from_row(tuple(r)) for r in rows]

    async def approval(
        self, approval_id: str | None = None, *, token_hash: str | None = None
    ) -> ApprovalRecord | None:
        row = await self._readers.fetchrow(
            _SELECT + " WHERE approval_id = $1 OR token_hash = $2", approval_id, token_hash
        )
        return ApprovalRecord.from_row(tuple(row)) if row is not None else None

    async def approval_refusals(self, run_id: str) -> list[Refusal]:
        rows = await self._readers.fetch(
            f"SELECT {REFUSAL_COLUMNS} FROM approval_refusals WHERE approval_id IN"
            " (SELECT approval_id FROM approvals WHERE run_id = $1) ORDER BY seq",
            run_id,
        )
        return [Refusal(*r) for r in rows]

    async def pending_approvals(self) -> PendingStats:
        row: Any = await self._readers.fetchrow(
            "SELECT count(*), min(created_at) FROM approvals WHERE state = 'pending'"
        )
        return PendingStats(int(row[0]), row[1])
