"""The SQLite store's model-call records (`model_calls`) and breakers (`model_breakers`):
written through the writer (module-level functions: the writer process receives them by name),
read on a reader connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from functools import partial
from typing import Any

from ..modelcalls import (
    BREAKER_COLUMNS,
    BREAKER_WIDTH,
    COLUMNS,
    SPEND_COLUMNS,
    TOP_SENDERS,
    USAGE_ADD,
    WIDTH,
    BreakerPolicy,
    BreakerRecord,
    ModelCallRecord,
    after_failure,
    bucket_edge,
    spend_fast_sql,
    spend_sql,
    usage_of,
)
from ..senders import SENDER_KIND
from .parts import SQLiteParts

_INSERT = f"INSERT OR REPLACE INTO model_calls ({COLUMNS}) VALUES ({', '.join('?' * WIDTH)})"
_BREAKER_PUT = (
    f"INSERT OR REPLACE INTO model_breakers ({BREAKER_COLUMNS})"
    f" VALUES ({', '.join('?' * BREAKER_WIDTH)})"
)


_OLD = f"SELECT {COLUMNS} FROM model_calls WHERE owner_id = ? AND attempt = ? AND call_seq = ?"
_USAGE_ADD = USAGE_ADD.format(*"?????")


def write_model_calls(cur: sqlite3.Cursor, rows: Sequence[tuple[Any, ...]]) -> None:
    """Store records, and their spend in the running totals (`budget_usage`) in the same
    transaction; a record written again replaces the first (its spend is taken back)."""
    for row in rows:
        record = ModelCallRecord.from_row(row)
        old = cur.execute(_OLD, (record.owner_id, record.attempt, record.seq)).fetchone()
        usage = usage_of(record)
        if old is not None:
            usage = usage_of(ModelCallRecord.from_row(old), sign=-1) + usage
        cur.execute(_INSERT, row)
        if usage:
            cur.executemany(_USAGE_ADD, usage)


def breaker_failure(
    cur: sqlite3.Cursor, model: str, now: float, policy: BreakerPolicy, error_class: str
) -> BreakerRecord:
    row = cur.execute(
        f"SELECT {BREAKER_COLUMNS} FROM model_breakers WHERE model = ?", (model,)
    ).fetchone()
    after = after_failure(
        None if row is None else BreakerRecord.from_row(row),
        model=model,
        now=now,
        policy=policy,
        error_class=error_class,
    )
    cur.execute(_BREAKER_PUT, after.row())
    return after


def breaker_success(cur: sqlite3.Cursor, model: str) -> None:
    cur.execute("DELETE FROM model_breakers WHERE model = ?", (model,))


def breaker_probe(cur: sqlite3.Cursor, model: str, now: float, lease: float) -> bool:
    return (
        cur.execute(
            "UPDATE model_breakers SET probe_until = ?, updated_at = ?"
            " WHERE model = ? AND state = 'open' AND open_until <= ?"
            " AND (probe_until IS NULL OR probe_until <= ?)",
            (now + lease, now, model, now, now),
        ).rowcount
        == 1
    )


class SQLiteModelCalls(SQLiteParts):
    """Recording and reading model calls; the breakers' shared state."""

    async def record_model_calls(self, calls: Sequence[ModelCallRecord]) -> None:
        if calls:
            await self.write(partial(write_model_calls, rows=[c.row() for c in calls]))

    async def model_calls_of(self, owner_ids: Sequence[str]) -> list[ModelCallRecord]:
        if not owner_ids:
            return []
        ids = json.dumps(list(owner_ids))
        rows = await self._read(
            lambda conn: conn.execute(
                f"SELECT {COLUMNS} FROM model_calls"
                " WHERE owner_id IN (SELECT value FROM json_each(?)) ORDER BY owner_id, attempt, call_seq",
                (ids,),
            ).fetchall()
        )
        return [ModelCallRecord.from_row(r) for r in rows]

    async def spend(
        self, column: str, name: str, *, since: float, exclude: str = ""
    ) -> tuple[int, float]:
        if exclude:
            sql = spend_sql(column, "?", "?", "?")
            args: tuple[Any, ...] = (name, since, exclude)
        else:
            sql = spend_fast_sql(column, "?", "?", "?", "?")
            edge = bucket_edge(since)
            # placeholders in the query's order: kind, name, edge, name, since, edge
            args = (SPEND_COLUMNS[column], name, edge, name, since, edge)
        row = await self._read(lambda conn: conn.execute(sql, args).fetchone())
        return int(row[0]), float(row[1])

    async def top_senders(
        self, kind: str, name: str, *, since: float, limit: int
    ) -> list[tuple[str, int, float]]:
        prefix = name + "/"
        sql = TOP_SENDERS.format(*(f"?{n}" for n in range(1, 6)))
        args = (SENDER_KIND[kind], len(prefix), prefix, bucket_edge(since), limit)
        rows = await self._read(lambda conn: conn.execute(sql, args).fetchall())
        return [(r[0][len(prefix) :], int(r[1]), float(r[2])) for r in rows]

    async def breakers(self) -> list[BreakerRecord]:
        rows = await self._read(
            lambda conn: conn.execute(
                f"SELECT {BREAKER_COLUMNS} FROM model_breakers ORDER BY model"
            ).fetchall()
        )
        return [BreakerRecord.from_row(r) for r in rows]

    async def breaker_failure(
        self, model: str, *, now: float, policy: BreakerPolicy, error_class: str
    ) -> BreakerRecord:
        return await self.write(
            partial(breaker_failure, model=model, now=now, policy=policy, error_class=error_class)
        )

    async def breaker_success(self, model: str) -> None:
        await self.write(partial(breaker_success, model=model))

    async def breaker_probe(self, model: str, *, now: float, lease: float) -> bool:
        return await self.write(partial(breaker_probe, model=model, now=now, lease=lease))
