"""What operating the SQLite store needs to read: the queue gauges a metrics scrape shows and
the readiness probe (a read answered, the writer alive and answering a probe write). A mixin of `SQLiteStore`."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence

from ..bounded import WriterProbe
from ..records import InFlight
from .parts import SQLiteParts

PROBE_TIMEOUT = 2.0


class SQLiteStats(SQLiteParts):
    """Queue depth and readiness."""

    _writer_probe: WriterProbe

    async def queue_stats(self, *, now: float) -> dict[str, tuple[int, float | None]]:
        """`runs` (queued) and `deliveries` (pending): (how many, age of the oldest in s)."""

        def fn(conn: sqlite3.Connection) -> dict[str, tuple[int, float | None]]:
            (runs,) = conn.execute("SELECT count(*) FROM runs WHERE state = 'queued'").fetchone()
            first = conn.execute(
                "SELECT created_at FROM runs WHERE state = 'queued' ORDER BY seq LIMIT 1"
            ).fetchone()
            deliveries, oldest = conn.execute(
                "SELECT count(*), min(created_at) FROM deliveries WHERE state = 'pending'"
            ).fetchone()
            return {
                "runs": (runs, now - first[0] if first else None),
                "deliveries": (deliveries, now - oldest if oldest is not None else None),
            }

        return await self._read(fn)

    async def in_flight(self, *, now: float, sessions: Sequence[str]) -> InFlight:
        """Running runs per agent and pending events of each of `sessions` (see `InFlight`)."""

        def fn(conn: sqlite3.Connection) -> InFlight:
            running = {
                agent: (n, now - first)
                for agent, n, first in conn.execute(
                    "SELECT agent_id, count(*), min(started_at) FROM runs WHERE state = 'running'"
                    " GROUP BY agent_id"
                )
            }
            pending = {
                session: conn.execute(
                    "SELECT count(*) FROM events WHERE session = ? AND consumed_at IS NULL",
                    (session,),
                ).fetchone()[0]
                for session in sessions
            }
            return InFlight(running, pending)

        return await self._read(fn)

    async def readiness(self) -> list[str]:
        """What keeps the store from serving (empty when it is ready)."""
        problems = []
        if not self._writer.alive:
            problems.append("the store's writer is not running")
        elif (stuck := await self._writer_probe.problem(PROBE_TIMEOUT)) is not None:
            problems.append(stuck)
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self._read(lambda conn: conn.execute("SELECT 1 FROM runs LIMIT 1").fetchall())
        except Exception as e:
            problems.append(f"the store does not answer a read ({type(e).__name__}: {e})")
        return problems
