"""The request path's writes on PostgreSQL: the accept lane.

An accepted request is answered only once its rows are committed. The lane writes the waiting
requests as a group with ONE statement that commits on its own (autocommit: one round trip, one
implicit transaction, one WAL flush for the whole group), on a connection of its own; whatever
arrives meanwhile forms the next group. One group at a time measured faster than two in flight
(bigger groups cost less per request; see docs/performance.md). The runtime's writes (claims,
run endings, heartbeats, deliveries) go through the group-commit writer on another connection and
never delay a `202`.

The statement first takes the group's idempotency keys (`INSERT ... ON CONFLICT`: a fresh key is
inserted, one older than the window taken over, a live one left alone), then writes the events,
runs and log lines of the requests whose key it took or that have none. Two processes given the
same key at once: the unique index makes the second statement wait for the first, then leave the
key alone. A request whose key was not taken is answered by a second statement (`stored_answer`):
a replay of the first response, with its own log line, or a conflict.

A group never holds one key twice (the later request waits for the next group, where it is a
replay). When the group statement fails for one bad request (a duplicate id, say), each request
of the group is written alone, so only the bad one fails. A deadlock or a serialization failure is
retried; a connection lost before a statement was sent is reopened and the statement sent again,
after the one back-off (`RECONNECT`: 0.1 s, doubling with each failure in a row, at most 5 s;
a connection made starts it again from 0.1 s); one lost while a statement was under way fails
those requests, since their commit is unknown.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from ...retry import Backoff, Retries
from ..base import Accepted, AcceptOp, RequestLogEntry
from ..commits import Commit, commits
from ..rows import LOG_COLUMNS, delivery_row, event_row, log_row, run_row

log = logging.getLogger("hookwise.store")

MAX_GROUP = 1024
MAX_RETRIES = 3
#: waits before reconnecting after a failed connect or a lost connection (this lane's and the
#: group-commit writer's, `writer`): 0.1 s, doubling with each failure in a row, at most 5 s
RECONNECT = Backoff(base=0.1, cap=5.0, jitter=0.0)
RETRYABLE = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)
CONNECTION_LOST = (OSError, asyncpg.exceptions.InterfaceError, asyncpg.PostgresConnectionError)

EVENT_FIELDS = 6
RUN_FIELDS = 15
LOG_FIELDS = 13


# --- rows as tuples and columns -----------------------------------------------------------------


def columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as column arrays (for `unnest`)."""
    return [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


_INSERT_LOG = (
    f"INSERT INTO request_log ({LOG_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,"
    " $13, $14)"
)


async def insert_log(conn: asyncpg.Connection, e: RequestLogEntry) -> None:
    await conn.execute(_INSERT_LOG, *log_row(e))


# --- the statements ------------------------------------------------------------------------------

# One group of requests, numbered `op` 0..n-1 in arrival order. Returns the numbers of the
# requests that were written (key taken, or none); the others hold a key taken earlier.
# A key is taken over when older than the window: `created_at - window` of the request bringing
# it again (the `WHERE` is re-checked after a concurrent update, so one process takes it over).
_ACCEPT_GROUP = (
    "WITH ops AS ("
    " SELECT * FROM unnest($1::int[], $2::text[], $3::text[], $4::int[], $5::bytea[],"
    " $6::float8[], $7::float8[], $45::text[])"
    " AS o(op, key, fingerprint, status, body, at, since, request_id)"
    "), taken AS ("
    " INSERT INTO idempotency_keys AS k (key, fingerprint, status, body, created_at)"
    " SELECT key, fingerprint, status, body, at FROM ops WHERE key IS NOT NULL ORDER BY key"
    " ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint,"
    " status = excluded.status, body = excluded.body, created_at = excluded.created_at"
    " WHERE k.created_at <= (SELECT since FROM ops WHERE ops.key = excluded.key)"
    " RETURNING key"
    "), fresh AS ("
    " SELECT op, at, request_id FROM ops WHERE key IS NULL OR key IN (SELECT key FROM taken)"
    "), new_events AS ("
    " INSERT INTO events (event_id, session, text, source, mode, trusted, created_at)"
    " SELECT e.event_id, e.session, e.text, e.source, e.mode, e.trusted, fresh.at"
    " FROM unnest($8::int[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[],"
    " $14::bool[]) WITH ORDINALITY AS e(op, event_id, session, text, source, mode, trusted, n)"
    " JOIN fresh USING (op) ORDER BY e.n"
    "), new_runs AS ("
    " INSERT INTO runs (run_id, session_key, name, message, rule_id, wake_mode, deliver,"
    " channel, recipient, model, thinking, timeout_seconds, fallback_channel, allow_unsafe,"
    " agent_id, created_at, request_id, callback_url, trace, sender)"
    " SELECT r.run_id, r.session_key, r.name, r.message, r.rule_id, r.wake_mode, r.deliver,"
    " r.channel, r.recipient, r.model, r.thinking, r.timeout_seconds, r.fallback_channel,"
    " r.allow_unsafe, r.agent_id, fresh.at, fresh.request_id, r.callback_url, r.trace, r.sender"
    " FROM unnest($15::int[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[],"
    " $21::text[], $22::bool[], $23::text[], $24::text[], $25::text[], $26::text[],"
    " $27::float8[], $28::text[], $29::bool[], $30::text[], $46::text[], $59::text[],"
    " $60::text[])"
    " WITH ORDINALITY AS"
    " r(op, run_id, session_key, name, message, rule_id, wake_mode, deliver, channel,"
    " recipient, model, thinking, timeout_seconds, fallback_channel, allow_unsafe, agent_id,"
    " callback_url, trace, sender, n)"
    " JOIN fresh USING (op) ORDER BY r.n"
    "), new_deliveries AS ("
    " INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
    " fallback_channel, text, state, last_error, route_session, created_at, updated_at,"
    " next_attempt_at)"
    " SELECT d.delivery_id, d.run_id, d.heartbeat_id, d.channel, d.recipient,"
    " d.fallback_channel, d.text, d.state, d.last_error, d.route_session, fresh.at, fresh.at,"
    " fresh.at"
    " FROM unnest($47::int[], $48::text[], $49::text[], $50::text[], $51::text[], $52::text[],"
    " $53::text[], $54::text[], $55::text[], $56::text[], $57::text[]) WITH ORDINALITY AS"
    " d(op, delivery_id, run_id, heartbeat_id, channel, recipient, fallback_channel, text,"
    " state, last_error, route_session, n)"
    " JOIN fresh USING (op) ORDER BY d.n"
    "), new_log AS ("
    f" INSERT INTO request_log ({LOG_COLUMNS})"
    " SELECT l.at, l.path, l.status, l.client, l.size, l.action, l.rule_id, l.code,"
    " l.request_id, l.event_ids, l.run_ids, l.event_type, l.delivery_id, l.trace_id"
    " FROM unnest($31::int[], $32::float8[], $33::text[], $34::integer[], $35::text[],"
    " $36::integer[], $37::text[], $38::text[], $39::text[], $40::text[], $41::text[],"
    " $42::text[], $43::text[], $44::text[], $58::text[])"
    " AS l(op, at, path, status, client, size, action, rule_id, code, request_id, event_ids,"
    " run_ids, event_type, delivery_id, trace_id)"
    " JOIN fresh USING (op) ORDER BY l.op"
    ") SELECT op FROM fresh"
)

# The answer to a key already taken, and (for a replay) its log line, in one statement.
_STORED_ANSWER = (
    "WITH k AS (SELECT fingerprint, status, body FROM idempotency_keys WHERE key = $1),"
    f" logged AS (INSERT INTO request_log ({LOG_COLUMNS})"
    " SELECT $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16 FROM k"
    " WHERE k.fingerprint = $2)"
    " SELECT fingerprint = $2 AS same, status, body FROM k"
)


def _group_args(ops: list[AcceptOp]) -> list[Any]:
    heads = [
        (
            i,
            op.idempotency_key,
            op.fingerprint,
            op.status,
            op.body,
            op.now,
            op.now - op.idempotency_window,
        )
        for i, op in enumerate(ops)
    ]
    events = [(i, *event_row(e)) for i, op in enumerate(ops) for e in op.events]
    runs = [(i, *run_row(r)) for i, op in enumerate(ops) for r in op.runs]
    # the trace id (log_row's last column) goes as $58, after the columns numbered before it
    logs = [(i, *log_row(op.log)[:LOG_FIELDS]) for i, op in enumerate(ops)]
    notes = [(i, *delivery_row(d)) for i, op in enumerate(ops) for d in op.deliveries]
    return [
        *columns(heads, 7),
        *columns(events, 1 + EVENT_FIELDS),
        *columns(runs, 1 + RUN_FIELDS),
        *columns(logs, 1 + LOG_FIELDS),
        [op.log.request_id for op in ops],
        [r.callback_url for op in ops for r in op.runs],  # $46, beside the runs' columns
        *columns(notes, 11),  # $47..$57: notifications (`action: notify`)
        [op.log.trace_id for op in ops],  # $58: the request log's trace ids
        [r.trace for op in ops for r in op.runs],  # $59: the runs' traceparents
        [r.sender for op in ops for r in op.runs],  # $60: the runs' senders
    ]


async def accept_group(conn: asyncpg.Connection, ops: list[AcceptOp]) -> set[int]:
    """Write `ops` (no key twice) in one statement; the indexes of those written."""
    rows = await conn.fetch(_ACCEPT_GROUP, *_group_args(ops))
    return {r[0] for r in rows}


async def stored_answer(conn: asyncpg.Connection, op: AcceptOp) -> Accepted | None:
    """The answer to a key already taken: a replay (its log line written) or a conflict; None
    when the key is gone (pruned in between)."""
    row = await conn.fetchrow(
        _STORED_ANSWER, op.idempotency_key, op.fingerprint, *log_row(op.log, created=False)
    )
    if row is None:
        return None
    if not row["same"]:
        return Accepted(status=0, body=b"", conflict=True)
    return Accepted(status=row["status"], body=bytes(row["body"]), replayed=True)


# --- the lane ------------------------------------------------------------------------------------


class _Pending:
    __slots__ = ("future", "op", "retries", "timed")

    def __init__(self, op: AcceptOp, future: asyncio.Future[Accepted]) -> None:
        self.op = op
        self.future = future
        self.retries = 0
        #: where to tell when its group was committed (`store.commits`); None: nobody asks
        self.timed = commits.get()


class AcceptLane:
    """Writes accepted requests in groups on its own connection, one group at a time."""

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._connect = connect
        self._queue: collections.deque[_Pending] = collections.deque()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._conn: asyncpg.Connection | None = None
        self._stopping = False
        #: failed connects in a row, and the wait before the next (`RECONNECT`)
        self._reconnects = Retries(RECONNECT)

    async def start(self) -> None:
        self._conn = await self._connect()
        self._task = asyncio.create_task(self._serve(), name="hookwise-postgres-accept")

    async def stop(self) -> None:
        """Write what is queued, then close the connection."""
        self._stopping = True
        self._ready.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(RuntimeError("the store is closed"))
        self._queue.clear()

    def submit(self, op: AcceptOp) -> asyncio.Future[Accepted]:
        """Write `op` with the next group; the future resolves once it is committed."""
        fut: asyncio.Future[Accepted] = asyncio.get_running_loop().create_future()
        if self._stopping:
            fut.set_exception(RuntimeError("the store is closed"))
            return fut
        self._queue.append(_Pending(op, fut))
        self._ready.set()
        return fut

    def _take_group(self) -> list[_Pending]:
        """The oldest waiting requests, at most one per key (the others stay queued)."""
        group: list[_Pending] = []
        keys: set[str] = set()
        skipped: list[_Pending] = []
        while self._queue and len(group) < MAX_GROUP:
            p = self._queue.popleft()
            key = p.op.idempotency_key
            if key is not None:
                if key in keys:
                    skipped.append(p)
                    continue
                keys.add(key)
            group.append(p)
        self._queue.extendleft(reversed(skipped))
        if not self._queue:
            self._ready.clear()
        return group

    async def _serve(self) -> None:
        while True:
            if not self._queue:
                if self._stopping:
                    return
                await self._ready.wait()
                # one more turn of the loop: requests parsed in this turn join the group
                await asyncio.sleep(0)
                if not self._queue:
                    continue
            group = self._take_group()
            try:
                await self._write(group)
            except Exception as e:  # never lose the task: fail this group and go on
                log.exception("writing %d accepted requests failed", len(group))
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(e)

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = None
            self._conn = await self._connect()
        return self._conn

    async def _write(self, group: list[_Pending]) -> None:
        try:
            conn = await self._connection()
        except Exception as e:
            wait = self._reconnects.next()
            log.warning(
                "no connection for the accept lane (%d failure(s) in a row): %r; %d request(s)"
                " tried again in %g s",
                self._reconnects.count,
                e,
                len(group),
                wait,
            )
            await asyncio.sleep(wait)
            self._retry(group, e)
            return
        self._reconnects.reset()
        ops = [p.op for p in group]
        try:
            started = time.time_ns()
            written = await accept_group(conn, ops)
            ended = time.time_ns()
        except RETRYABLE as e:
            self._retry(group, e)
            return
        except CONNECTION_LOST as e:
            # sent, but its commit is unknown: the sender's retry (with its key) is safe
            log.warning("the accept connection was lost during a write: %r", e)
            for p in group:
                _fail(p, e)
            return
        except asyncpg.PostgresError as e:
            if len(group) == 1:
                _fail(group[0], e)
                return
            for p in group:  # one bad request fails alone
                await self._write([p])
            return
        commit: Commit | None = None
        for i, p in enumerate(group):
            if i in written:
                if p.timed is not None:  # a traced request's `store.commit` span
                    commit = commit or Commit(started, ended, len(group), None)
                    p.timed.append(commit)
                _resolve(p, Accepted(status=p.op.status, body=p.op.body))
            else:
                await self._answer_taken(conn, p)

    async def _answer_taken(self, conn: asyncpg.Connection, p: _Pending) -> None:
        try:
            answer = await stored_answer(conn, p.op)
        except RETRYABLE as e:
            self._retry([p], e)
            return
        except Exception as e:
            _fail(p, e)
            return
        if answer is None:  # the key was pruned in between: take it anew
            self._retry([p], RuntimeError(f"idempotency key {p.op.idempotency_key!r} vanished"))
        else:
            _resolve(p, answer)

    def _retry(self, group: list[_Pending], error: BaseException) -> None:
        again = []
        for p in group:
            p.retries += 1
            if p.retries > MAX_RETRIES:
                _fail(p, error)
            else:
                again.append(p)
        if again:
            self._queue.extendleft(reversed(again))
            self._ready.set()


def _resolve(p: _Pending, answer: Accepted) -> None:
    if not p.future.done():
        p.future.set_result(answer)


def _fail(p: _Pending, error: BaseException) -> None:
    if not p.future.done():
        p.future.set_exception(error)
