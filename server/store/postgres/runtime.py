"""PostgreSQL statements for the runtime: claiming and finishing runs, heartbeats, deliveries,
routes, and the shared auth-failure throttle.

Each function takes a connection inside the group-commit writer's transaction
(`hookwise.server.store.postgres.writer`); `PostgresStore` wraps them into the `Store` interface.
Claims use `FOR UPDATE SKIP LOCKED` and leases, so several processes share the queues.

Back to the queue while a lane is paused: a run set back in the queue (`recover_runs`,
`RELEASE_RUNS`, `REQUEUE_RUNS`; likewise an operator's retry, `listing.RETRYABLE`, and a decided
approval) is written `requeued_state`: `held` when its statement's snapshot sees a pause of the
run's lane. It needs no lock of its own against a pause or a resume committed at the same time:
it is an UPDATE of `runs` (ROW EXCLUSIVE on the table, from the statement's start to its
transaction's end), and `lanes.pause` and `lanes.resume` first take `LOCK_RUNS` (EXCLUSIVE,
which conflicts with it), so the two transactions never overlap:

- the requeue's transaction wrote `runs` first: the pause's lock waits for its commit, and the
  pause's update (a later statement, a later snapshot) sees the run `queued` and holds it; a
  resume's update sees it `held` and releases it (or leaves it, another pause still holding it);
- the pause or resume took the table first: the requeue's statement waits for the lock before
  its snapshot (a statement's table locks are taken while it is parsed or its plan checked,
  before it runs), so it sees the pause row written, or deleted, and lands `held`, or `queued`.

Either way no run is left `queued` behind a pause, nor `held` with none. When no pause is being
written nothing waits: the check is a read of `pauses` (a handful of rows).
"""

from __future__ import annotations

import json

import asyncpg

from ..base import Limit, resolve_limit
from ..lanes import requeued_state, run_paused
from ..records import HeartbeatOutcome, NewDelivery, NewTurn, Route, RunOutcome
from ..rows import (
    DELIVERY_COLUMNS,
    HEARTBEAT_COLUMNS,
    HEARTBEAT_UPSERT,
    RUN_COLUMNS,
    delivery_row,
    event_row,
)
from .accept import columns


async def insert_turns(conn: asyncpg.Connection, turns: tuple[NewTurn, ...], now: float) -> None:
    if turns:
        await conn.executemany(
            "INSERT INTO turns (session_key, role, content, run_id, created_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            [(t.session_key, t.role, t.content, t.run_id, now) for t in turns],
        )


async def insert_delivery(conn: asyncpg.Connection, d: NewDelivery, now: float) -> None:
    await conn.execute(
        "INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
        " fallback_channel, text, state, last_error, route_session, created_at, updated_at,"
        " next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $11)",
        *delivery_row(d),
        now,
    )


async def recover_runs(
    conn: asyncpg.Connection, max_attempts: int, now: float, *, expired_only: bool
) -> tuple[int, int]:
    """Runs left `running`: back to `queued` (`held` while paused, see the module), or
    `failed` past `max_attempts`. With `expired_only`, only runs whose lease has expired
    (another live process owns the others)."""
    expired = " AND (lease_until IS NULL OR lease_until < $1::float8)" if expired_only else ""
    error = f"gave up after {max_attempts} attempts: the gateway stopped during the run"
    failed = await conn.fetch(
        "UPDATE runs SET state = 'failed', finished_at = $1::float8, error = $2, lease_until = NULL"
        f" WHERE state = 'running' AND attempts >= $3{expired} RETURNING seq",
        now,
        error,
        max_attempts,
    )
    requeued = await conn.fetch(
        f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL,"
        f" lease_until = NULL WHERE state = 'running'{expired} RETURNING seq",
        *((now,) if expired_only else ()),
    )
    return len(requeued), len(failed)


#: a queued run `q` may start only when its session has no run `running` or
#: `awaiting_approval` (a parked run holds its session, not a slot) and no older run still
#: waiting (`queued` or `held`): one run of a session at a time, in acceptance order. Each
#: check is a seek in the partial index `runs_lane` (session_key, state, seq) of active runs.
#: Between processes: a run another claim holds (locked, not committed) is still `queued` in
#: this statement's snapshot, so it blocks its session's later runs here; one committed
#: meanwhile fails the re-check of `state = 'queued'`. The checks are scalar subqueries with
#: `LIMIT 1`, not `NOT EXISTS`: PostgreSQL turns `NOT EXISTS` into an anti-join, which on small
#: or fresh tables it ran as a scan of every active run per candidate; a subplan is run per
#: candidate row, as the seek it is meant to be, and the walk stops at the claim's limit.
SESSION_FREE = (
    " AND (SELECT 1 FROM runs r WHERE r.session_key = q.session_key"
    " AND r.state IN ('running', 'awaiting_approval') LIMIT 1) IS NULL"
    " AND (SELECT 1 FROM runs r WHERE r.session_key = q.session_key"
    " AND r.state IN ('queued', 'held') AND r.seq < q.seq LIMIT 1) IS NULL"
)


def _claim_sql(which: str) -> str:
    # the queued runs walked oldest first in a fenced subquery (`OFFSET 0`): the session and
    # pause checks run on the rows the walk reaches, up to the limit, never on every queued
    # run (with stale statistics the planner otherwise filtered them all, then sorted)
    return (
        "WITH picked AS MATERIALIZED (SELECT q.seq FROM"
        f" (SELECT seq, session_key, agent_id, rule_id, sender, not_before FROM runs WHERE {which}"
        " ORDER BY seq OFFSET 0) q"
        f" WHERE TRUE{SESSION_FREE} AND NOT {run_paused('q')}"
        " AND (q.rule_id IS NULL OR NOT (q.rule_id = ANY($5::text[])))"
        " AND (q.not_before IS NULL OR q.not_before <= $1::float8)"
        " LIMIT $4 FOR UPDATE SKIP LOCKED)"
        " UPDATE runs SET state = 'running', started_at = $1::float8, attempts = attempts + 1,"
        " lease_until = $1::float8 + COALESCE(timeout_seconds, $2::float8) + $3::float8"
        f" WHERE seq IN (SELECT seq FROM picked) RETURNING {RUN_COLUMNS}"
    )


#: an agent's lane: served by `runs_agent` (agent_id, state, seq). A condition that also allows
#: "any agent" (`$5 IS NULL OR agent_id = $5`) cannot use that index in a generic plan.
CLAIM_AGENT = _claim_sql("agent_id = $6 AND state = 'queued'")
CLAIM_ANY = _claim_sql("state = 'queued'")


async def claim_runs(
    conn: asyncpg.Connection,
    limit: Limit,
    now: float,
    lease: float,
    default_timeout: float,
    agent_id: str | None = None,
    full: tuple[str, ...] = (),
) -> list[asyncpg.Record]:
    """Queued runs -> `running`, oldest first, each leased for its timeout plus `lease` seconds;
    at most one per session, and only a session's oldest waiting run while none of it runs
    (`SESSION_FREE`).

    Rows another transaction has locked (claimed by another process, not yet committed) are
    skipped, never waited for; a row claimed and committed meanwhile fails the re-check.
    """
    limit = resolve_limit(limit)
    if limit <= 0:
        return []
    if agent_id is None:
        return await conn.fetch(CLAIM_ANY, now, default_timeout, lease, limit, list(full))
    return await conn.fetch(CLAIM_AGENT, now, default_timeout, lease, limit, list(full), agent_id)


# A run's ending in one statement: its state, its transcript turns (column arrays), the summary
# event for the main session, the delivery of its reply and the signed POST of its outcome to its
# callback URL (each written when its id is given).
FINISH_RUN = (
    "WITH done AS ("
    " UPDATE runs SET state = $1, finished_at = $2, reply = $3, error = $4, model_used = $5,"
    " input_tokens = $6::bigint, output_tokens = $7::bigint, lease_until = NULL"
    " WHERE run_id = $8 AND ($29::bool OR state = 'running') RETURNING 1"
    "), turns_added AS ("
    " INSERT INTO turns (session_key, role, content, run_id, created_at)"
    " SELECT t.session_key, t.role, t.content, t.run_id, $2 FROM unnest($9::text[],"
    " $10::text[], $11::text[], $12::text[]) WITH ORDINALITY AS t(session_key, role, content,"
    " run_id, n) WHERE EXISTS (SELECT 1 FROM done) ORDER BY t.n"
    "), summary AS ("
    " INSERT INTO events (event_id, session, text, source, mode, trusted, created_at)"
    " SELECT $13::text, $14::text, $15::text, $16::text, $17::text, $18::bool, $2"
    " WHERE $13::text IS NOT NULL AND EXISTS (SELECT 1 FROM done)"
    "), delivery AS ("
    " INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
    " fallback_channel, text, state, last_error, route_session, created_at, updated_at,"
    " next_attempt_at)"
    " SELECT $19::text, $20::text, $21::text, $22::text, $23::text, $24::text, $25::text,"
    " $26::text, $27::text, $28::text, $2, $2, $2"
    " WHERE $19::text IS NOT NULL AND EXISTS (SELECT 1 FROM done)"
    "), callback AS ("
    " INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
    " fallback_channel, text, state, last_error, route_session, created_at, updated_at,"
    " next_attempt_at)"
    " SELECT s.delivery_id, s.run_id, s.heartbeat_id, s.channel, s.recipient,"
    " s.fallback_channel, s.text, s.state, s.last_error, s.route_session, $2, $2, $2"
    " FROM unnest($30::text[], $31::text[], $32::text[], $33::text[], $34::text[],"
    " $35::text[], $36::text[], $37::text[], $38::text[], $39::text[]) WITH ORDINALITY AS"
    " s(delivery_id, run_id, heartbeat_id, channel, recipient, fallback_channel, text, state,"
    " last_error, route_session, n)"
    " WHERE EXISTS (SELECT 1 FROM done) ORDER BY s.n"
    ") SELECT count(*) FROM done"
)

#: runs left `running` that nobody executes, back to the queue (`held` while paused, see
#: the module)
RELEASE_RUNS = (
    f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL, lease_until = NULL,"
    " attempts = GREATEST(attempts - 1, 0)"
    " WHERE state = 'running' AND ($1::text IS NULL OR agent_id = $1::text)"
    " AND NOT (run_id = ANY($2::text[])) RETURNING seq"
)


#: runs interrupted by a clean stop back to the queue (`held` while paused, see
#: the module), without using up an attempt
REQUEUE_RUNS = (
    f"UPDATE runs SET state = {requeued_state('runs')}, started_at = NULL, lease_until = NULL,"
    " attempts = GREATEST(attempts - 1, 0) WHERE run_id = ANY($1::text[]) AND state = 'running'"
)


async def finish_run(conn: asyncpg.Connection, o: RunOutcome, *, again: bool = False) -> bool:
    """Write a run's ending; `again`: only while it is still `running` (see `Store.finish_run`)."""
    turns = columns([(t.session_key, t.role, t.content, t.run_id) for t in o.turns], 4)
    e, d = o.summary, o.delivery
    summary = (None,) * 6 if e is None else event_row(e)
    delivery = (None,) * 10 if d is None else delivery_row(d)
    signed = columns([delivery_row(s) for s in o.signed], 10)
    written = await conn.fetchval(
        FINISH_RUN,
        o.state,
        o.finished_at,
        o.reply,
        o.error,
        o.model_used,
        o.input_tokens,
        o.output_tokens,
        o.run_id,
        *turns,
        *summary,
        *delivery,
        not again,
        *signed,
    )
    return bool(written)


async def finish_heartbeat(conn: asyncpg.Connection, o: HeartbeatOutcome) -> None:
    await conn.execute(
        f"INSERT INTO heartbeats ({HEARTBEAT_COLUMNS})"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)" + HEARTBEAT_UPSERT,
        o.heartbeat_id,
        o.reason,
        o.state,
        len(o.event_ids),
        o.requested_at,
        o.started_at,
        o.finished_at,
        o.reply,
        o.error,
        o.acknowledged,
        o.model_used,
        o.agent_id,
    )
    if o.event_ids:  # the beat's caller passes none when they stay pending
        await conn.execute(
            "UPDATE events SET consumed_at = $1, heartbeat_id = $2"
            " WHERE event_id = ANY($3::text[]) AND consumed_at IS NULL",
            o.finished_at,
            o.heartbeat_id,
            list(o.event_ids),
        )
    await insert_turns(conn, o.turns, o.finished_at)
    if o.delivery is not None:
        await insert_delivery(conn, o.delivery, o.finished_at)


async def set_last_route(
    conn: asyncpg.Connection, session_key: str, route: Route, now: float, *, only_if_unset: bool
) -> None:
    action = (
        "DO NOTHING"
        if only_if_unset
        else "DO UPDATE SET last_channel = excluded.last_channel,"
        " last_to = excluded.last_to, updated_at = excluded.updated_at"
    )
    await conn.execute(
        "INSERT INTO sessions (session_key, last_channel, last_to, updated_at)"
        f" VALUES ($1, $2, $3, $4) ON CONFLICT (session_key) {action}",
        session_key,
        route.channel,
        route.to,
        now,
    )


async def claim_deliveries(
    conn: asyncpg.Connection, limit: int, now: float, lease: float
) -> list[asyncpg.Record]:
    return await conn.fetch(
        "WITH picked AS MATERIALIZED (SELECT seq FROM deliveries WHERE state = 'pending'"
        " AND next_attempt_at <= $1::float8 AND (lease_until IS NULL OR lease_until <= $1::float8)"
        " ORDER BY next_attempt_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED)"
        " UPDATE deliveries SET lease_until = $1::float8 + $2::float8, attempts = attempts + 1,"
        " updated_at = $1::float8"
        f" WHERE seq IN (SELECT seq FROM picked) RETURNING seq, {DELIVERY_COLUMNS}",
        now,
        lease,
        limit,
    )


async def update_delivery(
    conn: asyncpg.Connection,
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
    await conn.execute(
        "INSERT INTO delivery_attempts (delivery_id, at, channel, recipient, outcome, error)"
        " SELECT delivery_id, $1, channel, recipient, $2, $3 FROM deliveries"
        " WHERE delivery_id = $4 AND state != 'sent'",
        now,
        state,
        last_error,
        delivery_id,
    )
    status = await conn.execute(
        "UPDATE deliveries SET state = $1, updated_at = $2, last_error = COALESCE($3, last_error),"
        " lease_until = NULL,"
        " message_ids = CASE WHEN $4 THEN NULL ELSE COALESCE($5, message_ids) END,"
        " attempts = CASE WHEN $4 THEN 0 ELSE attempts END,"
        " next_attempt_at = COALESCE($6, next_attempt_at),"
        " channel = COALESCE($7, channel), recipient = COALESCE($8, recipient),"
        " fallback_channel = CASE WHEN $9 THEN $10 ELSE fallback_channel END"
        " WHERE delivery_id = $11 AND state != 'sent'",
        state,
        now,
        last_error,
        reset,
        json.dumps(list(message_ids)) if message_ids else None,
        next_attempt_at,
        channel,
        to,
        fallback_channel is not None,
        fallback_channel or None,
        delivery_id,
    )
    if then and status != "UPDATE 0":
        for d in then:
            await insert_delivery(conn, d, now)


async def auth_failure(
    conn: asyncpg.Connection,
    client: str,
    now: float,
    window: float,
    max_failures: int,
    lockout: float,
) -> float | None:
    """One more failure for `client`, counted under its row lock (every process shares it).

    A window starts at a client's first failure; `max_failures` failures before it ends lock the
    client out until `now + lockout` (returned) and start a new count.
    """
    row = await conn.fetchrow(
        "INSERT INTO auth_failures AS a (client, window_start, failures) VALUES ($1, $2, 0)"
        " ON CONFLICT (client) DO UPDATE SET client = a.client RETURNING window_start, failures",
        client,
        now,
    )
    start, failures = row["window_start"], row["failures"] + 1
    if start <= now - window:  # also a new row: it starts at `now` with no failure
        start, failures = now, 1
    locked = now + lockout if failures >= max_failures else None
    await conn.execute(
        "UPDATE auth_failures SET window_start = $2, failures = $3,"
        " locked_until = COALESCE($4, locked_until) WHERE client = $1",
        client,
        now if locked is not None else start,
        0 if locked is not None else failures,
        locked,
    )
    return locked
