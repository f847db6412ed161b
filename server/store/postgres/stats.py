"""What operating the PostgreSQL store needs to read: the queue gauges a metrics scrape shows
and the readiness probe (a read answered on the pool, the writer and accept tasks alive). A
mixin of `PostgresStore`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..bounded import WriterProbe
from ..records import InFlight
from .parts import PostgresParts

PROBE_TIMEOUT = 2.0


def _running(task: asyncio.Task[None] | None) -> bool:
    return task is not None and not task.done()


class PostgresStats(PostgresParts):
    """Queue depth and readiness; needs the store's `_accepts` too."""

    _accepts: Any
    _writer_probe: WriterProbe

    async def queue_stats(self, *, now: float) -> dict[str, tuple[int, float | None]]:
        """`runs` (queued) and `deliveries` (pending): (how many, age of the oldest in s)."""
        row = await self._readers.fetchrow(
            "SELECT (SELECT count(*) FROM runs WHERE state = 'queued'),"
            " (SELECT created_at FROM runs WHERE state = 'queued' ORDER BY seq LIMIT 1),"
            " (SELECT count(*) FROM deliveries WHERE state = 'pending'),"
            " (SELECT min(created_at) FROM deliveries WHERE state = 'pending')"
        )
        assert row is not None
        runs, first, deliveries, oldest = row
        return {
            "runs": (runs, now - first if first is not None else None),
            "deliveries": (deliveries, now - oldest if oldest is not None else None),
        }

    async def in_flight(self, *, now: float, sessions: Sequence[str]) -> InFlight:
        """Running runs per agent and pending events of each of `sessions` (see `InFlight`)."""
        rows = await self._readers.fetch(
            "SELECT agent_id, count(*), min(started_at) FROM runs WHERE state = 'running'"
            " GROUP BY agent_id"
        )
        pending = await self._readers.fetch(
            "SELECT s.session, (SELECT count(*) FROM events e WHERE e.session = s.session"
            " AND e.consumed_at IS NULL) FROM unnest($1::text[]) AS s(session)",
            list(sessions),
        )
        return InFlight(
            {agent: (n, now - first) for agent, n, first in rows},
            {session: n for session, n in pending},
        )

    async def readiness(self) -> list[str]:
        """What keeps the store from serving (empty when it is ready)."""
        problems = []
        if not _running(self._writer._task):
            problems.append("the store's writer task is not running")
        elif (stuck := await self._writer_probe.problem(PROBE_TIMEOUT)) is not None:
            problems.append(stuck)
        if not _running(self._accepts._task):
            problems.append("the store's accept lane is not running")
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                await self._readers.fetchval("SELECT 1 FROM runs LIMIT 1")
        except Exception as e:
            problems.append(f"the store does not answer a read ({type(e).__name__}: {e})")
        return problems
