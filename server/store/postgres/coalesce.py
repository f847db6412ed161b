"""Coalescing on PostgreSQL (`hookwise.server.store.coalesce`): a request joins a waiting run of
its mapping and key, or writes the run that opens the window, in one transaction of its own.

Two processes given the same key at once: a transaction-scoped advisory lock on (mapping, key,
sender) makes the second wait for the first's commit, so it sees (and joins) the run the first
wrote instead of opening a second window. The run itself is locked (`FOR UPDATE`) while it is joined:
a claim skips a locked run (`SKIP LOCKED`), and a run claimed meanwhile fails the join's re-check
of `state`, so the request opens a new window rather than joining a run already under way.
"""

from __future__ import annotations

import json

import asyncpg
import attrs

from ..base import Accepted, AcceptOp, NewRun
from ..coalesce import CoalesceSpec, Joinable, first_parts, joined, joined_body
from .accept import accept_group, stored_answer

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
_JOINABLE = (
    "SELECT run_id, session_key, coalesce_parts, coalesce_until FROM runs"
    " WHERE rule_id = $1 AND coalesce_key = $2 AND coalesce_key IS NOT NULL"
    " AND sender IS NOT DISTINCT FROM $4"
    " AND state IN ('queued', 'held') AND not_before > $3 ORDER BY seq DESC LIMIT 1 FOR UPDATE"
)
_JOIN = (
    "UPDATE runs SET message = $1, coalesce_parts = $2, coalesced = coalesced + 1,"
    " not_before = LEAST($3::float8, coalesce_until) WHERE run_id = $4"
)
_OPEN = (
    "UPDATE runs SET not_before = $1, coalesce_key = $2, coalesce_until = $3, coalesced = 1,"
    " coalesce_parts = $4 WHERE run_id = $5"
)


async def accept_coalescing(
    conn: asyncpg.Connection, op: AcceptOp, spec: CoalesceSpec, run: NewRun
) -> Accepted:
    """Write `op` (one run, of a coalescing mapping): joined to its key's waiting run, or as the
    run that opens the key's window. Its idempotency key is honoured as on the accept lane."""
    async with conn.transaction():
        await conn.execute(_LOCK, json.dumps(["coalesce", run.rule_id, spec.key, run.sender]))
        row = await conn.fetchrow(_JOINABLE, run.rule_id, spec.key, op.now, run.sender)
        if row is None:
            if 0 not in await accept_group(conn, [op]):
                return await _taken(conn, op)
            not_before = op.now + min(spec.window, spec.max_wait)
            parts = first_parts(spec, run.message)
            await conn.execute(
                _OPEN, not_before, spec.key, op.now + spec.max_wait, parts, run.run_id
            )
            return Accepted(status=op.status, body=op.body)
        into = Joinable(*row)
        body = joined_body(op.body, run.run_id, run.session_key, into)
        joining = attrs.evolve(
            op, body=body, runs=(), log=attrs.evolve(op.log, run_ids=(into.run_id,))
        )
        if 0 not in await accept_group(conn, [joining]):
            return await _taken(conn, op)
        message, parts = joined(spec, into.parts, run.message)
        await conn.execute(_JOIN, message, parts, op.now + spec.window, into.run_id)
        return Accepted(status=op.status, body=body, joined=into.run_id)


async def _taken(conn: asyncpg.Connection, op: AcceptOp) -> Accepted:
    answer = await stored_answer(conn, op)
    if answer is None:
        raise RuntimeError(f"idempotency key {op.idempotency_key!r} vanished")
    return answer
