"""Retention on SQLite: find the oldest rows of a table (on a reader) and delete finished ones
in small batches (each through the group-commit writer). A mixin of `SQLiteStore`; what may be
pruned is in `hookwise.server.store.retention`."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from typing import Any

from ..retention import Target, boundary
from . import writes
from .parts import SQLiteParts


class SQLiteRetention(SQLiteParts):
    """Finds the oldest rows and prunes finished ones."""

    async def retention_boundary(self, target: Target, cutoff: float) -> int:
        """The highest seq of `target`'s table older than `cutoff` (0: nothing is)."""
        first = f"SELECT seq, {target.at} FROM {target.table} WHERE seq >= ? ORDER BY seq LIMIT 1"

        def fn(conn: sqlite3.Connection) -> int:
            def probe(seq: int) -> Any:
                return conn.execute(first, (seq,)).fetchone()

            (last,) = conn.execute(f"SELECT coalesce(max(seq), 0) FROM {target.table}").fetchone()
            return _run(boundary(_sync(probe), last, cutoff))

        return await self._read(fn)

    async def prune_batch(self, target: Target, *, upto: int, cutoff: float, limit: int) -> int:
        """Delete up to `limit` finished rows of `target` with seq <= `upto` older than `cutoff`,
        oldest first; returns how many went."""
        sql = (
            f"DELETE FROM {target.table} WHERE seq IN (SELECT seq FROM {target.table}"
            f" WHERE seq <= ? AND {target.at} < ? AND {target.done} ORDER BY seq LIMIT ?)"
        )
        return await self.write(partial(writes.count, sql=sql, args=(upto, cutoff, limit)))

    async def reclaim(self, targets: list[Target]) -> None:
        """Nothing to do: SQLite reuses the pages of deleted rows (its free list) by itself."""


def _sync(probe: Callable[[int], Any]) -> Callable[[int], Any]:
    async def call(seq: int) -> Any:
        row = probe(seq)
        return (row[0], row[1]) if row is not None else None

    return call


def _run(coro: Any) -> int:
    """Drive a coroutine that never suspends (its probes are synchronous) to its result."""
    try:
        coro.send(None)
    except StopIteration as done:
        return int(done.value)
    raise RuntimeError("the boundary search suspended")  # pragma: no cover
