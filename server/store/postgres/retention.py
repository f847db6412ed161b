"""Retention on PostgreSQL: find the oldest rows of a table (on the read pool) and delete
finished ones in small batches (each through the group-commit writer). A mixin of
`PostgresStore`; what may be pruned is in `hookwise.server.store.retention`. After a round,
`reclaim` vacuums the tables it pruned."""

from __future__ import annotations

from typing import Any

import asyncpg

from ..retention import Target, boundary
from .parts import PostgresParts


class PostgresRetention(PostgresParts):
    """Finds the oldest rows and prunes finished ones."""

    async def retention_boundary(self, target: Target, cutoff: float) -> int:
        """The highest seq of `target`'s table older than `cutoff` (0: nothing is)."""
        first = f"SELECT seq, {target.at} FROM {target.table} WHERE seq >= $1 ORDER BY seq LIMIT 1"

        async def probe(seq: int) -> Any:
            row = await self._readers.fetchrow(first, seq)
            return (row[0], row[1]) if row is not None else None

        last = await self._readers.fetchval(f"SELECT coalesce(max(seq), 0) FROM {target.table}")
        return await boundary(probe, int(last), cutoff)

    async def prune_batch(self, target: Target, *, upto: int, cutoff: float, limit: int) -> int:
        """Delete up to `limit` finished rows of `target` with seq <= `upto` older than `cutoff`,
        oldest first; returns how many went."""
        sql = (
            f"DELETE FROM {target.table} WHERE seq IN (SELECT seq FROM {target.table}"
            f" WHERE seq <= $1 AND {target.at} < $2 AND {target.done} ORDER BY seq LIMIT $3)"
        )

        async def fn(conn: asyncpg.Connection) -> int:
            status = await conn.execute(sql, upto, cutoff, limit)
            return int(status.rsplit(" ", 1)[-1])

        return await self.write(fn)

    async def reclaim(self, targets: list[Target]) -> None:
        """VACUUM the tables a round pruned, so that their freed space is reused at once rather
        than after autovacuum's next visit (it does not block reads or writes)."""
        async with self._readers.acquire() as conn:
            for target in targets:
                await conn.execute(f"VACUUM {target.table}")
