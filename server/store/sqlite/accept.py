"""The request path's writes on SQLite: an accepted request's idempotency key, events, runs and
log line, in the writer's transaction (one savepoint per request, one commit per group)."""

from __future__ import annotations

import sqlite3

from ..base import Accepted, AcceptOp, RequestLogEntry
from ..rows import LOG_COLUMNS, delivery_row, event_row, log_row, run_row
from .coalesce import accept_coalescing, joined_log, open_window
from .inserts import InsertInto
from .writer import Rows

EVENTS = InsertInto("events", "event_id, session, text, source, mode, trusted, created_at")
RUNS = InsertInto(
    "runs",
    "run_id, session_key, name, message, rule_id, wake_mode, deliver, channel, recipient, model,"
    " thinking, timeout_seconds, fallback_channel, allow_unsafe, agent_id, created_at, request_id,"
    " callback_url, trace, sender",
)
REQUEST_LOG = InsertInto("request_log", LOG_COLUMNS)
DELIVERIES = InsertInto(
    "deliveries",
    "delivery_id, run_id, heartbeat_id, channel, recipient, fallback_channel, text, state,"
    " last_error, route_session, created_at, updated_at, next_attempt_at",
)


def log_rows(e: RequestLogEntry) -> Rows:
    """A request log line as rows for the writer to merge (`GroupCommitWriter.submit_rows`)."""
    return ((REQUEST_LOG, log_row(e)),)


def accept_rows(op: AcceptOp) -> Rows:
    """What an accepted request without an idempotency key writes, as rows (nothing to read
    first): its events, its runs and its log line."""
    rows = [(EVENTS, (*event_row(e), op.now)) for e in op.events]
    rows += [
        (RUNS, (*run_row(r), op.now, op.log.request_id, r.callback_url, r.trace, r.sender))
        for r in op.runs
    ]
    rows += [(DELIVERIES, (*delivery_row(d), op.now, op.now, op.now)) for d in op.deliveries]
    rows.append((REQUEST_LOG, log_row(op.log)))
    return tuple(rows)


def insert_log(cur: sqlite3.Cursor, e: RequestLogEntry, *, created: bool = True) -> None:
    cur.execute(REQUEST_LOG.sql(1), log_row(e, created=created))


def accept(op: AcceptOp, cur: sqlite3.Cursor) -> Accepted:
    if op.idempotency_key is not None:
        row = cur.execute(
            "SELECT fingerprint, status, body, created_at FROM idempotency_keys WHERE key = ?",
            (op.idempotency_key,),
        ).fetchone()
        if row is not None and row[3] > op.now - op.idempotency_window:
            if row[0] != op.fingerprint:
                return Accepted(status=0, body=b"", conflict=True)
            insert_log(cur, op.log, created=False)
            return Accepted(status=row[1], body=bytes(row[2]), replayed=True)
        cur.execute(
            "INSERT OR REPLACE INTO idempotency_keys (key, fingerprint, status, body, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (op.idempotency_key, op.fingerprint, op.status, op.body, op.now),
        )
    spec = op.coalesce if len(op.runs) == 1 and not op.events else None
    if spec is not None:
        answer = accept_coalescing(op, spec, op.runs[0], cur)
        if answer is not None and answer.joined is not None:
            insert_log(cur, joined_log(op, answer.joined).log)
            _remember(cur, op, answer)
            return answer
    if op.events:
        cur.executemany(EVENTS.sql(1), [(*event_row(e), op.now) for e in op.events])
    if op.runs:
        cur.executemany(
            RUNS.sql(1),
            [
                (*run_row(r), op.now, op.log.request_id, r.callback_url, r.trace, r.sender)
                for r in op.runs
            ],
        )
    if op.deliveries:
        cur.executemany(
            DELIVERIES.sql(1),
            [(*delivery_row(d), op.now, op.now, op.now) for d in op.deliveries],
        )
    if spec is not None:
        open_window(cur, spec, op.runs[0], op.now)
    insert_log(cur, op.log)
    return Accepted(status=op.status, body=op.body)


def _remember(cur: sqlite3.Cursor, op: AcceptOp, answer: Accepted) -> None:
    """A joining request's idempotency record keeps the answer it was given (the joined run)."""
    if op.idempotency_key is not None:
        cur.execute(
            "UPDATE idempotency_keys SET body = ? WHERE key = ?", (answer.body, op.idempotency_key)
        )
