"""Coalescing on SQLite (`hookwise.server.store.coalesce`): a request joins a waiting run of its
mapping and key, or writes the run that opens the window; inside the writer's transaction, so
two requests (of any process: SQLite has one writer) never both open a window for one key."""

from __future__ import annotations

import sqlite3

import attrs

from ..base import Accepted, AcceptOp, NewRun
from ..coalesce import CoalesceSpec, Joinable, first_parts, joined, joined_body

#: the waiting coalescing run of a mapping, key and sender whose window is open (a sender never
#: joins another's run: its spend is its own, `hookwise.server.store.senders`); the WHERE
#: repeats the partial index `runs_coalesce`'s term (migration 0019)
_JOINABLE = (
    "SELECT run_id, session_key, coalesce_parts, coalesce_until FROM runs"
    " WHERE rule_id = ? AND coalesce_key = ? AND coalesce_key IS NOT NULL AND sender IS ?"
    " AND state IN ('queued', 'held') AND not_before > ? ORDER BY seq DESC LIMIT 1"
)
_JOIN = (
    "UPDATE runs SET message = ?, coalesce_parts = ?, coalesced = coalesced + 1,"
    " not_before = MIN(?, coalesce_until) WHERE run_id = ?"
)
_OPEN = (
    "UPDATE runs SET not_before = ?, coalesce_key = ?, coalesce_until = ?, coalesced = 1,"
    " coalesce_parts = ? WHERE run_id = ?"
)


def joinable(
    cur: sqlite3.Cursor, rule_id: str | None, key: str, sender: str | None, now: float
) -> Joinable | None:
    row = cur.execute(_JOINABLE, (rule_id, key, sender, now)).fetchone()
    return Joinable(*row) if row is not None else None


def accept_coalescing(
    op: AcceptOp, spec: CoalesceSpec, run: NewRun, cur: sqlite3.Cursor
) -> Accepted | None:
    """Join `run`'s request to a waiting run (its answer), or None: `run` is to be written as
    usual, then opened with `open_window`."""
    into = joinable(cur, run.rule_id, spec.key, run.sender, op.now)
    if into is None:
        return None
    message, parts = joined(spec, into.parts, run.message)
    cur.execute(_JOIN, (message, parts, op.now + spec.window, into.run_id))
    return Accepted(
        status=op.status,
        body=joined_body(op.body, run.run_id, run.session_key, into),
        joined=into.run_id,
    )


def open_window(cur: sqlite3.Cursor, spec: CoalesceSpec, run: NewRun, now: float) -> None:
    """The run just written becomes the one its key's next requests join."""
    not_before = now + min(spec.window, spec.max_wait)
    until = now + spec.max_wait
    parts = first_parts(spec, run.message)
    cur.execute(_OPEN, (not_before, spec.key, until, parts, run.run_id))


def joined_log(op: AcceptOp, run_id: str) -> AcceptOp:
    """`op` with its log line naming the run it joined (and no run of its own)."""
    return attrs.evolve(op, runs=(), log=attrs.evolve(op.log, run_ids=(run_id,)))
