"""SQLite statements for the runtime: claiming and finishing runs, heartbeats, deliveries, routes.

Each function takes a cursor inside the writer's transaction (writes) or a read connection
(reads); `hookwise.server.store.sqlite.store.SQLiteStore` wraps them into the `Store` interface.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..base import Limit, resolve_limit
from ..lanes import requeued_state, run_paused
from ..records import (
    HeartbeatOutcome,
    NewDelivery,
    NewTurn,
    Route,
    RunOutcome,
    Turn,
)
from ..rows import (
    DELIVERY_COLUMNS,
    HEARTBEAT_COLUMNS,
    HEARTBEAT_UPSERT,
    RUN_COLUMNS,
    delivery_row,
    event_row,
)
from .accept import DELIVERIES, EVENTS
from .inserts import InsertInto, UpdateWhere
from .writer import Rows

TURNS = InsertInto("turns", "session_key, role, content, run_id, created_at")
RUN_FINISHED = UpdateWhere(
    "runs",
    "state, finished_at, reply, error, model_used, input_tokens, output_tokens, lease_until",
    "run_id",
)


def insert_turns(cur: sqlite3.Cursor, turns: tuple[NewTurn, ...], now: float) -> None:
    cur.executemany(TURNS.sql(1), [_turn_row(t, now) for t in turns])


def _turn_row(t: NewTurn, now: float) -> tuple[Any, ...]:
    return (t.session_key, t.role, t.content, t.run_id, now)


def insert_delivery(cur: sqlite3.Cursor, d: NewDelivery, now: float) -> None:
    cur.execute(DELIVERIES.sql(1), (*delivery_row(d), now, now, now))


def recover_runs(
    cur: sqlite3.Cursor, max_attempts: int, now: float, *, expired_only: bool
) -> tuple[int, int]:
    """Runs left `running` by a stopped process: back to `queued` (`held` while paused), or
    `failed` past `max_attempts`. With `expired_only`, only runs whose lease has expired (another
    live process may own the others)."""
    lease = " AND (lease_until IS NULL OR lease_until < ?)" if expired_only else ""
    extra: tuple[Any, ...] = (now,) if expired_only else ()
    error = f"gave up after {max_attempts} attempts: the gateway stopped during the run"
    failed = cur.execute(
        "UPDATE runs SET state = 'failed', finished_at = ?, error = ?, lease_until = NULL"
        " WHERE state = 'running' AND attempts >= ?" + lease,
        (now, error, max_attempts, *extra),
    ).rowcount
    requeued = cur.execute(
        f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL,"
        " lease_until = NULL WHERE state = 'running'" + lease,
        extra,
    ).rowcount
    return requeued, failed


#: the runs of a session lane: the partial index `runs_lane` holds these rows only, and SQLite
#: uses it only for a query that repeats its WHERE term as is (migration 0012)
ACTIVE = "state IN ('queued', 'running', 'held', 'awaiting_approval')"

#: a queued run `q` may start only when its session has no run `running` (or parked,
#: `awaiting_approval`: it holds its session, not a slot) and no older run still waiting
#: (`queued` or `held`): one run of a session at a time, in acceptance order. Each
#: check is a seek in `runs_lane` (session_key, state, seq), whatever the session's history.
SESSION_FREE = (
    " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_key = q.session_key"
    f" AND r.state IN ('running', 'awaiting_approval') AND r.{ACTIVE})"
    " AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.session_key = q.session_key"
    f" AND r.state IN ('queued', 'held') AND r.{ACTIVE} AND r.seq < q.seq)"
)


#: none of the mappings whose lanes are full (a JSON list of rule ids; `[]`: none is)
NOT_FULL = " AND (q.rule_id IS NULL OR q.rule_id NOT IN (SELECT value FROM json_each(?)))"


#: not a coalescing run whose window is still open (`not_before`, migration 0019)
DUE = " AND (q.not_before IS NULL OR q.not_before <= ?)"


def _claim_sql(which: str) -> str:
    return (
        "UPDATE runs SET state = 'running', started_at = ?, attempts = attempts + 1,"
        " lease_until = ? + COALESCE(timeout_seconds, ?) + ?"
        f" WHERE seq IN (SELECT q.seq FROM runs q WHERE {which}{SESSION_FREE}"
        f" AND NOT {run_paused('q')}{NOT_FULL}{DUE} ORDER BY q.seq LIMIT ?)"
        f" RETURNING {RUN_COLUMNS}"
    )


#: an agent's lane: served by `runs_agent` (agent_id, state, seq), in seq order. A condition
#: that also allows "any agent" (`? IS NULL OR agent_id = ?`) cannot use that index: each claim
#: then walked every agent's queued runs in seq order until it found its own.
CLAIM_AGENT = _claim_sql("q.agent_id = ? AND q.state = 'queued'")
CLAIM_ANY = _claim_sql("q.state = 'queued'")


def claim_runs(
    cur: sqlite3.Cursor,
    limit: Limit,
    now: float,
    lease: float,
    default_timeout: float,
    agent_id: str | None = None,
    full: tuple[str, ...] = (),
) -> list[tuple[Any, ...]]:
    """Queued runs (of `agent_id`, when given) -> `running`, oldest first, each leased for its
    timeout plus `lease` seconds; at most one per session, and only a session's oldest waiting
    run while none of it runs (`SESSION_FREE`)."""
    limit = resolve_limit(limit)
    if limit <= 0:
        return []
    lease_args = (now, now, default_timeout, lease)
    full_json = json.dumps(list(full))
    if agent_id is None:
        return cur.execute(CLAIM_ANY, (*lease_args, full_json, now, limit)).fetchall()
    return cur.execute(CLAIM_AGENT, (*lease_args, agent_id, full_json, now, limit)).fetchall()


def finish_rows(o: RunOutcome) -> Rows:
    """What finishing a run writes, as rows for the writer to merge (nothing to read first):
    the run's outcome, its turns, its summary event and its delivery."""
    now = o.finished_at
    rows: list[Any] = [(TURNS, _turn_row(t, now)) for t in o.turns]
    if o.summary is not None:
        rows.append((EVENTS, (*event_row(o.summary), now)))
    for d in (o.delivery, *o.signed):
        if d is not None:
            rows.append((DELIVERIES, (*delivery_row(d), now, now, now)))
    # last: the batch statement runs its sinks in order, updates after inserts
    outcome = (o.state, now, o.reply, o.error, o.model_used, o.input_tokens, o.output_tokens)
    rows.append((RUN_FINISHED, (*outcome, None, o.run_id)))
    return tuple(rows)


def finish_run_again(cur: sqlite3.Cursor, o: RunOutcome) -> bool:
    """Finish a run whose first finish may have been committed before its answer was lost (the
    writer died): the same writes, only while the run is still `running`. False: it was not."""
    row = cur.execute("SELECT state FROM runs WHERE run_id = ?", (o.run_id,)).fetchone()
    if row is None or row[0] != "running":
        return False
    by_sink: dict[Any, list[tuple[Any, ...]]] = {}
    for sink, values in finish_rows(o):
        by_sink.setdefault(sink, []).append(values)
    for sink, rows in by_sink.items():  # in order: inserts, then the run's update
        for sql, args in sink.statements(rows):
            cur.execute(sql, args)
    return True


def release_runs(cur: sqlite3.Cursor, agent_id: str | None, keep: tuple[str, ...]) -> int:
    """Runs (of `agent_id`, when given) left `running` that the only process using the store
    does not execute (`keep`: those it does): a claim committed whose answer was lost. Back to
    the queue (`held` while paused), without using up an attempt."""
    return cur.execute(
        f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL, lease_until = NULL,"
        " attempts = MAX(attempts - 1, 0)"
        " WHERE state = 'running' AND (? IS NULL OR agent_id = ?)"
        " AND run_id NOT IN (SELECT value FROM json_each(?))",
        (agent_id, agent_id, json.dumps(list(keep))),
    ).rowcount


def finish_heartbeat(cur: sqlite3.Cursor, o: HeartbeatOutcome) -> None:
    cur.execute(
        f"INSERT INTO heartbeats ({HEARTBEAT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        + HEARTBEAT_UPSERT,
        (
            o.heartbeat_id,
            o.reason,
            o.state,
            len(o.event_ids),
            o.requested_at,
            o.started_at,
            o.finished_at,
            o.reply,
            o.error,
            int(o.acknowledged),
            o.model_used,
            o.agent_id,
        ),
    )
    if o.event_ids:  # the beat's caller passes none when they stay pending
        # one statement for the whole beat (a statement per event held the writer, and every
        # request waiting on it, for as many statements as the beat consumed events)
        cur.execute(
            "UPDATE events SET consumed_at = ?, heartbeat_id = ?"
            " WHERE event_id IN (SELECT value FROM json_each(?)) AND consumed_at IS NULL",
            (o.finished_at, o.heartbeat_id, json.dumps(list(o.event_ids))),
        )
    insert_turns(cur, o.turns, o.finished_at)
    if o.delivery is not None:
        insert_delivery(cur, o.delivery, o.finished_at)


def session_turns(conn: sqlite3.Connection, session_key: str, limit: int) -> list[Turn]:
    rows = conn.execute(
        "SELECT role, content FROM (SELECT seq, role, content FROM turns WHERE session_key = ?"
        " ORDER BY seq DESC LIMIT ?) ORDER BY seq",
        (session_key, limit),
    ).fetchall()
    return [Turn(role, content) for role, content in rows]


def last_route(conn: sqlite3.Connection, session_key: str) -> Route | None:
    row = conn.execute(
        "SELECT last_channel, last_to FROM sessions WHERE session_key = ?", (session_key,)
    ).fetchone()
    if row is None or not row[0] or not row[1]:
        return None
    return Route(row[0], row[1])


def set_last_route(
    cur: sqlite3.Cursor, session_key: str, route: Route, now: float, *, only_if_unset: bool
) -> None:
    if only_if_unset:
        cur.execute(
            "INSERT INTO sessions (session_key, last_channel, last_to, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_key) DO NOTHING",
            (session_key, route.channel, route.to, now),
        )
    else:
        cur.execute(
            "INSERT INTO sessions (session_key, last_channel, last_to, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_key) DO UPDATE SET last_channel = excluded.last_channel,"
            " last_to = excluded.last_to, updated_at = excluded.updated_at",
            (session_key, route.channel, route.to, now),
        )


def claim_deliveries(
    cur: sqlite3.Cursor, limit: int, now: float, lease: float
) -> list[tuple[Any, ...]]:
    return cur.execute(
        "UPDATE deliveries SET lease_until = ?, attempts = attempts + 1, updated_at = ?"
        " WHERE seq IN (SELECT seq FROM deliveries WHERE state = 'pending' AND next_attempt_at <= ?"
        " AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_attempt_at, seq LIMIT ?)"
        f" RETURNING {DELIVERY_COLUMNS}",
        (now + lease, now, now, now, limit),
    ).fetchall()


def update_delivery(
    cur: sqlite3.Cursor,
    delivery_id: str,
    *,
    state: str,
    now: float,
    last_error: str | None = None,
    message_ids: tuple[str, ...] = (),
    next_attempt_at: float | None = None,
    channel: str | None = None,
    to: str | None = None,
    fallback_channel: str | None = None,
    reset: bool = False,
    then: tuple[NewDelivery, ...] = (),
) -> None:
    """Record a delivery attempt's outcome (also as a row of `delivery_attempts`). A row already
    `sent` is never changed again.

    `reset` (moving to a fallback channel) clears the attempts and the message ids. `then`:
    deliveries this outcome plans (the `delivery.failed` lifecycle events), written in the same
    transaction when the row changed.
    """
    cur.execute(
        "INSERT INTO delivery_attempts (delivery_id, at, channel, recipient, outcome, error)"
        " SELECT delivery_id, ?, channel, recipient, ?, ? FROM deliveries"
        " WHERE delivery_id = ? AND state != 'sent'",
        (now, state, last_error, delivery_id),
    )
    cur.execute(
        "UPDATE deliveries SET state = ?, updated_at = ?, last_error = COALESCE(?, last_error), lease_until = NULL,"
        " message_ids = CASE WHEN ? THEN NULL ELSE COALESCE(?, message_ids) END,"
        " attempts = CASE WHEN ? THEN 0 ELSE attempts END,"
        " next_attempt_at = COALESCE(?, next_attempt_at),"
        " channel = COALESCE(?, channel), recipient = COALESCE(?, recipient),"
        " fallback_channel = CASE WHEN ? THEN ? ELSE fallback_channel END"
        " WHERE delivery_id = ? AND state != 'sent'",
        (
            state,
            now,
            last_error,
            int(reset),
            json.dumps(list(message_ids)) if message_ids else None,
            int(reset),
            next_attempt_at,
            channel,
            to,
            int(fallback_channel is not None),
            fallback_channel or None,
            delivery_id,
        ),
    )
    if then and cur.rowcount:
        for d in then:
            insert_delivery(cur, d, now)


def recover_deliveries(cur: sqlite3.Cursor) -> int:
    """A single process owns all leases: after a restart, none of them is held."""
    return cur.execute(
        "UPDATE deliveries SET lease_until = NULL WHERE state = 'pending' AND lease_until IS NOT NULL"
    ).rowcount
