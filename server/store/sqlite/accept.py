"""The request path's writes on SQLite: an accepted request's idempotency key, events, runs and
log line, in the writer's transaction (one savepoint per request, one commit per group)."""

from __future__ import annotations

import sqlite3

from hookwise.server.store.base import (
    LOG_COLUMNS,
    Accepted,
    AcceptOp,
    RequestLogEntry,
    event_row,
    log_row,
    run_row,
)


def insert_log(cur: sqlite3.Cursor, e: RequestLogEntry, *, created: bool = True) -> None:
    cur.execute(
        f"INSERT INTO request_log ({LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        log_row(e, created=created),
    )


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
    if op.events:
        cur.executemany(
            "INSERT INTO events (event_id, session, text, source, mode, trusted, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(*event_row(e), op.now) for e in op.events],
        )
    if op.runs:
        cur.executemany(
            "INSERT INTO runs (run_id, session_key, name, message, rule_id, wake_mode, deliver,"
            " channel, recipient, model, thinking, timeout_seconds, fallback_channel,"
            " allow_unsafe, agent_id, created_at, request_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*run_row(r), op.now, op.log.request_id) for r in op.runs],
        )
    insert_log(cur, op.log)
    return Accepted(status=op.status, body=op.body)
