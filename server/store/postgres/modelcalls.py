"""The PostgreSQL store's model-call records (`model_calls`) and breakers (`model_breakers`):
written through the writer, read from the pool. A breaker's row is locked (`FOR UPDATE`) while
a failure is counted, so processes that fail together count every failure once."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from ..modelcalls import (
    BREAKER_COLUMNS,
    BREAKER_WIDTH,
    BUCKET,
    COLUMNS,
    SPEND_COLUMNS,
    TOP_SENDERS,
    WIDTH,
    BreakerPolicy,
    BreakerRecord,
    ModelCallRecord,
    after_failure,
    bucket_edge,
    spend_fast_sql,
    spend_sql,
)
from ..senders import SENDER_KIND
from .parts import PostgresParts

_INSERT = (
    f"INSERT INTO model_calls ({COLUMNS}) VALUES"
    f" ({', '.join(f'${i}' for i in range(1, WIDTH + 1))})"
    " ON CONFLICT (owner_id, attempt, call_seq) DO NOTHING"
)
#: a record and its spend in the running totals, in one statement (so that `executemany`
#: pipelines them): a record already stored (a retried write that had committed) adds nothing;
#: the bucket is `modelcalls.usage_of`'s (in the order of the kinds; by sender when it has one)
_RECORD = (
    f"WITH ins AS ({_INSERT} RETURNING agent_id, rule_id, sender, started_at,"
    " COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0) AS tokens, COALESCE(cost, 0) AS cost)"
    f" INSERT INTO budget_usage (kind, name, bucket, tokens, cost)"
    f" SELECT s.kind, s.name, floor(ins.started_at / {BUCKET}) * {BUCKET}, ins.tokens, ins.cost"
    " FROM ins CROSS JOIN LATERAL (VALUES ('agent', ins.agent_id), ('mapping', ins.rule_id),"
    " ('agent-sender', ins.agent_id || '/' || ins.sender),"
    " ('mapping-sender', ins.rule_id || '/' || ins.sender))"
    " AS s(kind, name)"
    " WHERE s.name IS NOT NULL AND (ins.tokens <> 0 OR ins.cost <> 0) ORDER BY s.kind"
    " ON CONFLICT (kind, name, bucket) DO UPDATE SET"
    " tokens = budget_usage.tokens + excluded.tokens, cost = budget_usage.cost + excluded.cost"
)
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

        rows = [c.row() for c in calls]
        await self.write(lambda conn: conn.executemany(_RECORD, rows))

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

    async def top_senders(
        self, kind: str, name: str, *, since: float, limit: int
    ) -> list[tuple[str, int, float]]:
        prefix = name + "/"
        sql = TOP_SENDERS.format(*(f"${n}" for n in range(1, 6)))
        rows = await self._readers.fetch(
            sql, SENDER_KIND[kind], len(prefix), prefix, bucket_edge(since), limit
        )
        return [(r[0][len(prefix) :], int(r[1]), float(r[2])) for r in rows]

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
