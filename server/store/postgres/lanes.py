"""Pauses and lane queues on PostgreSQL (see `hookwise.server.store.lanes`). A mixin of
`PostgresStore`: writes through its group-commit writer, reads on its pool."""

from __future__ import annotations

import asyncpg
import attrs

from ..lanes import PAUSED_COLUMN, BudgetRaise, LaneStat, Pause, run_paused
from .parts import PostgresParts

_PAUSE_COLUMNS = "kind, name, paused_by, paused_at, reason, session"


#: taken by `pause` and `resume` as the first statement of a transaction of their own
LOCK_RUNS = "LOCK TABLE runs IN EXCLUSIVE MODE"


async def pause(conn: asyncpg.Connection, p: Pause) -> int:
    """Record the pause (replacing an earlier one) and hold its queued runs; how many. Run as
    the first job of a transaction of its own (`PostgresLanes.pause`: the writer's `alone`).

    Every run that becomes `queued` while the pause is being committed is held too, whichever
    process writes it. Without a lock, under READ COMMITTED, neither would see the other: an
    accept's insert (its trigger `hookwise_hold_paused_run`, migrations 0012 and 0026) does not
    see the uncommitted pause, and this update does not see the uncommitted run, left `queued`
    behind the pause (no claim takes it) until the resume. So the transaction first takes
    `LOCK_RUNS`. EXCLUSIVE conflicts with the ROW EXCLUSIVE of every INSERT, UPDATE or DELETE
    of `runs` (and with the ROW SHARE of `SELECT ... FOR UPDATE`), and with itself; plain
    reads (ACCESS SHARE) go on. Table locks are held until the transaction ends, so the
    pause's [lock, commit] and any writer's [first write of `runs`, commit] do not overlap:

    - a writer of `runs` that went first has committed when the lock is granted; the update
      below is a later statement, and under READ COMMITTED each statement takes a new snapshot
      when it starts, so it sees that writer's `queued` runs and holds them;
    - a writer that comes second waits for the lock before its statement runs: a statement's
      table locks are taken while it is parsed or its cached plan is checked, before its
      executor's snapshot; the trigger's query, in a VOLATILE plpgsql function, even takes a
      snapshot of its own when it runs. Both come after this commit and see the pause, so the
      run is written `held`. Likewise the other ways into `queued` (a requeue, a release, a
      retry, a decided approval: each writes `requeued_state`, which checks `run_paused` in
      its own statement; see `hookwise.server.store.postgres.runtime`).

    EXCLUSIVE rather than SHARE ROW EXCLUSIVE: once granted, no other transaction holds a row
    lock on `runs` (a coalescing accept locks its run `FOR UPDATE`, then inserts: with SHARE
    ROW EXCLUSIVE the update below would wait for that row while the accept waits for the
    table, a deadlock). The lock is the first statement of a transaction of its own so that it
    waits holding nothing (no lock upgrade, no row lock of an earlier job that the writer it
    waits for may want); the `pauses` row upserted next is locked by no writer of `runs`
    (the trigger's FOR KEY SHARE does not conflict with this update of non-key columns; a
    resume takes the same lock first). The wait: the writers of `runs` in flight, a few ms;
    meanwhile new ones queue behind it. Nothing on the accept path pays for it."""
    await conn.execute(LOCK_RUNS)
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


async def resume(conn: asyncpg.Connection, kind: str, name: str) -> int | None:
    """Lift the pause and send its held runs back to the queue (those another pause still holds
    stay held); how many went back, None when it was not paused. Run alone, like `pause`.

    Against an accept the row lock suffices (migration 0026: its trigger locks the pause it
    finds FOR KEY SHARE, so this delete waits for that accept and the update below, a later
    statement, sees its `held` run; an accept after this delete waits for it and finds no
    pause). `LOCK_RUNS` first anyway: a pause and a resume of one lane serialise, where a
    resume that deleted the `pauses` row and then waited for the table would deadlock with a
    pause holding the table and waiting for that row."""
    await conn.execute(LOCK_RUNS)
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
        return await self.write(lambda conn: pause(conn, p), alone=True)

    async def resume(self, kind: str, name: str) -> int | None:
        return await self.write(lambda conn: resume(conn, kind, name), alone=True)

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
