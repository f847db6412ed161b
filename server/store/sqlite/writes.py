"""The SQLite store's writes that are not rows: each a module-level function of the write
cursor (and plain arguments), handed to the writer as `functools.partial(fn, ...)`.

Module-level functions, never closures: the writer runs in its own process (see
`writer_process`), and a job reaches it pickled, by the function's name and its arguments.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ..audit import AUDIT_INSERT
from ..lanes import requeued_state
from ..listing import PAYLOAD_COLUMNS
from ..records import RetryRequest
from ..retention import LOGOUTS_KEPT


def count(cur: sqlite3.Cursor, sql: str, args: Sequence[Any]) -> int:
    """Run one statement; the number of rows it changed."""
    return cur.execute(sql, args).rowcount


def end_console_session(cur: sqlite3.Cursor, session_id: str, now: float) -> None:
    """A console session was logged out of: its cookie is no session any more."""
    cur.execute(
        "INSERT INTO console_logouts (session_id, ended_at) VALUES (?, ?)"
        " ON CONFLICT (session_id) DO NOTHING",
        (session_id, now),
    )


def record_audit(cur: sqlite3.Cursor, row: tuple[Any, ...]) -> None:
    """One operator action into the audit log (`store.audit.audit_row`)."""
    cur.execute(f"INSERT INTO audit ({AUDIT_INSERT}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)


def prune_request_records(
    cur: sqlite3.Cursor, now: float, idempotency_window: float, log_retention: float
) -> None:
    """Forget idempotency keys and auth failures past their window, and old request-log rows."""
    cur.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (now - idempotency_window,))
    cur.execute("DELETE FROM request_log WHERE at < ?", (now - log_retention,))
    cur.execute("DELETE FROM console_logouts WHERE ended_at < ?", (now - LOGOUTS_KEPT,))
    cur.execute(
        "DELETE FROM auth_failures WHERE window_start < ?"
        " AND (locked_until IS NULL OR locked_until <= ?)",
        (now - idempotency_window, now),
    )


def requeue_runs(cur: sqlite3.Cursor, run_ids: Sequence[str]) -> None:
    """Runs interrupted by a clean stop go back to the queue (`held` while paused) without using
    up an attempt."""
    cur.executemany(
        f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL, lease_until = NULL,"
        " attempts = MAX(attempts - 1, 0)"
        " WHERE run_id = ? AND state = 'running'",
        [(r,) for r in run_ids],
    )


def bump_signal(cur: sqlite3.Cursor, topic: str) -> None:
    """Count one more notification of `topic` (other processes poll the counter)."""
    cur.execute(
        "INSERT INTO signals (topic, seq) VALUES (?, 1)"
        " ON CONFLICT (topic) DO UPDATE SET seq = seq + 1",
        (topic,),
    )


def auth_failure(
    cur: sqlite3.Cursor,
    client: str,
    now: float,
    window: float,
    max_failures: int,
    lockout: float,
) -> float | None:
    """Count a failed authentication by `client`; the end of the lock-out it starts, if any."""
    row = cur.execute(
        "SELECT window_start, failures FROM auth_failures WHERE client = ?", (client,)
    ).fetchone()
    if row is None or row[0] <= now - window:
        start, failures = now, 1
    else:
        start, failures = row[0], row[1] + 1
    locked = now + lockout if failures >= max_failures else None
    cur.execute(
        "INSERT INTO auth_failures (client, window_start, failures, locked_until)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (client) DO UPDATE SET"
        " window_start = excluded.window_start, failures = excluded.failures,"
        " locked_until = COALESCE(excluded.locked_until, auth_failures.locked_until)",
        (client, now if locked else start, 0 if locked else failures, locked),
    )
    return locked


def auth_success(cur: sqlite3.Cursor, client: str) -> None:
    """A successful authentication clears the client's failures."""
    cur.execute("DELETE FROM auth_failures WHERE client = ?", (client,))


def retry(
    cur: sqlite3.Cursor,
    kind: str,
    req: RetryRequest,
    pick: str,
    args: Sequence[Any],
    update: str,
    uses_now: bool,
    log: str,
) -> int:
    """Send the failed rows `pick` selects back to the queue, recording each retry."""
    rows = cur.execute(pick, args).fetchall()
    cur.executemany(update, [(req.now, r[0]) if uses_now else (r[0],) for r in rows])
    cur.executemany(log, [(kind, r[1], r[2], r[3], r[4], req.actor, req.now) for r in rows])
    return len(rows)


def keep_payload(cur: sqlite3.Cursor, row: tuple[Any, ...]) -> None:
    """Keep a request for replay (`hooks.retainPayloads`)."""
    cur.execute(
        f"INSERT OR REPLACE INTO payloads ({PAYLOAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", row
    )


def delete_payload(cur: sqlite3.Cursor, request_id: str) -> bool:
    """Forget one kept request; whether it was there."""
    return cur.execute("DELETE FROM payloads WHERE request_id = ?", (request_id,)).rowcount > 0


def prune_payloads(cur: sqlite3.Cursor, before: float, batch: int) -> int:
    """Forget up to `batch` requests kept since before `before`, oldest first; how many."""
    return cur.execute(
        "DELETE FROM payloads WHERE request_id IN (SELECT request_id FROM payloads"
        " WHERE created_at < ? ORDER BY created_at LIMIT ?)",
        (before, batch),
    ).rowcount


def probe(cur: sqlite3.Cursor) -> None:
    """Readiness's write of nothing: the writer answers it when it takes writes."""
    cur.execute("SELECT 1")
