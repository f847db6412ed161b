"""An agent's lane claims its runs through the `runs_agent` index (agent_id, state, seq), on both
stores: a claim that also allowed "any agent" in the same statement (`? IS NULL OR agent_id = ?`)
could not use it, and walked every other agent's queued runs, oldest first, until it met its own.
The plans are read from each database's own EXPLAIN."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import asyncpg

from hookwise.server.store.postgres import runtime as pg_runtime
from hookwise.server.store.sqlite import runtime as sqlite_runtime
from tests.store.conftest import POSTGRES_URL, Backend
from tests.store.support import NOW, accept_op, new_run


async def _queue_runs(store: Any) -> list[Any]:
    """Many queued runs of one agent, then one of another: the claim of the second must find
    its run without going through the first one's."""
    runs = [new_run(agent_id="busy") for _ in range(50)] + [new_run(agent_id="quiet")]
    await store.accept(accept_op(runs=tuple(runs)))
    return runs


def test_an_agents_claim_uses_its_index_on_sqlite(tmp_path: Path) -> None:
    backend = Backend("sqlite", tmp_path)

    async def body(store: Any) -> None:
        runs = await _queue_runs(store)
        with sqlite3.connect(backend.path) as conn:
            args = (NOW, NOW, 600.0, 60.0, "quiet", "[]", NOW, 4)
            plan = " / ".join(
                row[3]
                for row in conn.execute(f"EXPLAIN QUERY PLAN {sqlite_runtime.CLAIM_AGENT}", args)
            )
        assert "INDEX runs_agent (agent_id=? AND state=?)" in plan, plan
        claimed = await store.claim_runs(limit=4, now=NOW + 1, agent_id="quiet")
        assert [r.run_id for r in claimed] == [runs[-1].run_id]

    backend.run(body)


def test_an_agents_claim_uses_its_index_on_postgres(postgres: Backend) -> None:
    backend = postgres

    async def body(store: Any) -> None:
        runs = await _queue_runs(store)
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'SET search_path TO "{backend.schema}"')
            # the plan a prepared statement settles on after its first executions; with
            # sequential scans off, a usable index is chosen however small the table
            await conn.execute("SET plan_cache_mode = force_generic_plan")
            await conn.execute("SET enable_seqscan = off")
            async with conn.transaction():
                await conn.execute(f"PREPARE claim AS {pg_runtime.CLAIM_AGENT}")
                rows = await conn.fetch(
                    "EXPLAIN EXECUTE claim(1.0::float8, 600.0::float8, 60.0::float8, 4, '{}', 'quiet')"
                )
                await conn.execute("DEALLOCATE claim")
        finally:
            await conn.close()
        plan = "\n".join(r[0] for r in rows)
        assert "runs_agent" in plan, plan
        claimed = await store.claim_runs(limit=4, now=NOW + 1, agent_id="quiet")
        assert [r.run_id for r in claimed] == [runs[-1].run_id]

    backend.run(body)
