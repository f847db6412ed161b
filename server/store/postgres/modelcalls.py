"""The PostgreSQL store's model-call records (`model_calls`) and breakers (`model_breakers`):
written through the writer, read from the pool. A breaker's row is locked (`FOR UPDATE`) while
a failure is counted, so processes that fail together count every failure once."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from ..modelcalls import (
    BREAKER_COLUMNS,
    BREAKER_WIDTH,
    COLUMNS,
    WIDTH,
    BreakerPolicy,
    BreakerRecord,
    SPEND_COLUMNS,
    USAGE_ADD,
    ModelCallRecord,
    after_failure,
    bucket_edge,
    spend_fast_sql,
    spend_sql,
    usage_of,
)
from .parts import PostgresParts

_INSERT = (
    f"INSERT INTO model_calls ({COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, WIDTH + 1))})"
    " ON CONFLICT (owner_id, attempt, call_seq) DO NOTHING RETURNING 1"
)
_USAGE_ADD = USAGE_ADD.format("$1", "$2", "$3", "$4", "$5")
_BREAKER_PUT = (
    f"INSERT INTO model_breakers ({BREAKER_COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, BREAKER_WIDTH + 1))})"
    " ON CONFLICT (model) DO UPDATE SET "
    + ", ".join(f"{c.strip()} = excluded.{c.strip()}" for c in BREAKER_COLUMNS.split(",")[1:])
)


class PostgresModelCalls(PostgresParts):
    """Recording and reading model calls; the breakers' shared state (a mixin)."""

    async def record_model_calls(self, calls: Sequence[ModelCallRecord]) -> None:
        if not calls:
            return

        async def fn(conn: asyncpg.Connection) -> None:
            # each record's spend goes to the running totals in the same transaction, once: a
            # record written again (a retried write that had committed) adds nothing
            for call in calls:
                if await conn.fetchval(_INSERT, *call.row()) is not None:
                    usage = usage_of(call)
                    if usage:
                        await conn.executemany(_USAGE_ADD, usage)

        await self.write(fn)

    async def model_calls_of(self, owner_ids: Sequence[str]) -> list[ModelCallRecord]:
        if not owner_ids:
            return []
        rows = await self._readers.fetch(
            f"SELECT {COLUMNS} FROM model_calls WHERE owner_id = ANY($1::text[])"
            " ORDER BY owner_id, attempt, call_seq",
            list(owner_ids),
        )
        return [ModelCallRecord.from_row(tuple(r)) for r in rows]

    async def spend(
        self, column: str, name: str, *, since: float, exclude: str = ""
    ) -> tuple[int, float]:
        if exclude:
            sql = spend_sql(column, "$1", "$2", "$3")
            row = await self._readers.fetchrow(sql, name, since, exclude)
        else:
            sql = spend_fast_sql(column, "$1::text", "$2", "$3", "$4")
            row = await self._readers.fetchrow(
                sql, SPEND_COLUMNS[column], name, since, bucket_edge(since)
            )
        return int(row[0]), float(row[1])

    async def breakers(self) -> list[BreakerRecord]:
        rows = await self._readers.fetch(
            f"SELECT {BREAKER_COLUMNS} FROM model_breakers ORDER BY model"
        )
        return [BreakerRecord.from_row(tuple(r)) for r in rows]

    async def breaker_failure(
        self, model: str, *, now: float, policy: BreakerPolicy, error_class: str
    ) -> BreakerRecord:
        async def fn(conn: asyncpg.Connection) -> BreakerRecord:
            # a row to lock first: two processes that both found none would both insert
            await conn.execute(
                "INSERT INTO model_breakers (model, state, failures, window_start, updated_at)"
                " VALUES ($1, 'closed', 0, $2, $2) ON CONFLICT (model) DO NOTHING",
                model,
                now,
            )
            row = await conn.fetchrow(
                f"SELECT {BREAKER_COLUMNS} FROM model_breakers WHERE model = $1 FOR UPDATE", model
            )
            after = after_failure(
                None if row is None else BreakerRecord.from_row(tuple(row)),
                model=model,
                now=now,
                policy=policy,
                error_class=error_class,
            )
            await conn.execute(_BREAKER_PUT, *after.row())
            return after

        return await self.write(fn)

    async def breaker_success(self, model: str) -> None:
        await self.write(
            lambda conn: conn.execute("DELETE FROM model_breakers WHERE model = $1", model)
        )

    async def breaker_probe(self, model: str, *, now: float, lease: float) -> bool:
        async def fn(conn: asyncpg.Connection) -> bool:
            status = await conn.execute(
                "UPDATE model_breakers SET probe_until = $1, updated_at = $2"
                " WHERE model = $3 AND state = 'open' AND open_until <= $2"
                " AND (probe_until IS NULL OR probe_until <= $2)",
                now + lease,
                now,
                model,
            )
            return bool(status.endswith(" 1"))

        return await self.write(fn)
