"""The PostgreSQL store: the `Store` for several gateway processes sharing one database.

Same tables, records, orderings and cursors as `hookwise.server.store.sqlite`; what differs is what several
processes need. Accepted requests are written by the accept lane (`hookwise.server.store.postgres_accept`):
a group of requests in one statement that commits alone, the next group forming meanwhile; an
idempotency key is taken with `INSERT ... ON CONFLICT`, so two processes given the same key at
once create one row. Every other write (the runtime's) goes through one asyncio task per process
(`_GroupCommitWriter`) that runs the waiting jobs in one transaction and commits once; a job that
fails rolls back alone. Runs and deliveries are claimed with `FOR UPDATE SKIP LOCKED` and
leased; a dead process's work is taken over once its lease has expired, so `recover_deliveries`
does nothing here. Reads use a connection pool and never wait behind a commit.

Cross-process signals live here too: `notify`/`subscribe` (LISTEN/NOTIFY on a dedicated
connection that is re-established when it drops), `try_lead`/`resign` (a session-level advisory
lock on a dedicated connection), and the shared auth-failure throttle (`auth_*`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any, Generic, TypeVar

import asyncpg
from hookwise.server.store.base import (
    Accepted,
    AcceptOp,
    DeliveryRecord,
    EventRecord,
    HeartbeatOutcome,
    HeartbeatRecord,
    NewDelivery,
    NewTurn,
    Page,
    RequestLogEntry,
    Route,
    RunOutcome,
    RunRecord,
    Turn,
    cursor_value,
    delivery_row,
    event_row,
    page_of,
)
from hookwise.server.store.postgres_accept import (
    CONNECTION_LOST,
    MAX_RETRIES,
    RETRYABLE,
    AcceptLane,
    columns,
    insert_log,
)
from hookwise.server.store.sqlite_runtime import (
    DELIVERY_COLUMNS,
    HEARTBEAT_COLUMNS,
    RUN_COLUMNS,
    delivery_record,
    heartbeat_record,
)

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

Job = Callable[[asyncpg.Connection], Awaitable[T]]

# 'hookwise' as a big-endian int64: outside hashtext()'s int4 range, so the migration lock never
# collides with a leadership lock.
MIGRATION_LOCK = 0x686F6F6B77697365
MAX_BATCH = 1024
LISTEN_PING_EVERY = 30.0
PING_TIMEOUT = 5.0
RECONNECT_DELAY = (0.1, 5.0)
KEEPALIVES = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}
_TOPIC = re.compile(r"^[a-z0-9_]+$")

_EVENT_COLUMNS = "seq, event_id, session, text, source, mode, trusted, created_at, consumed_at"


# --- migrations ---------------------------------------------------------------------------------


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("hookwise.server.store") / "migrations" / "postgres"
    out = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            out.append((int(name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def quote_ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


async def migrate(conn: asyncpg.Connection, schema: str | None = None) -> int:
    """Bring the schema up to date, once even when several processes start together.

    Everything runs in one transaction holding a transaction-level advisory lock: the first
    process migrates, the others wait for it and then find nothing to do. Returns the version.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        if schema is not None:
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
            await conn.execute(f"SET LOCAL search_path = {quote_ident(schema)}")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        version = max(done, default=0)
        for number, sql in _migrations():
            if number not in done:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", number)
                version = max(version, number)
        return version


# --- records ------------------------------------------------------------------------------------


def _run_record(row: asyncpg.Record) -> RunRecord:
    return RunRecord(*row)


def _event_record(row: asyncpg.Record) -> EventRecord:
    return EventRecord(*row)


# --- write statements (each runs inside the writer's transaction) -------------------------------


async def _insert_turns(conn: asyncpg.Connection, turns: tuple[NewTurn, ...], now: float) -> None:
    if turns:
        await conn.executemany(
            "INSERT INTO turns (session_key, role, content, run_id, created_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            [(t.session_key, t.role, t.content, t.run_id, now) for t in turns],
        )


async def _insert_delivery(conn: asyncpg.Connection, d: NewDelivery, now: float) -> None:
    await conn.execute(
        "INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
        " fallback_channel, text, state, last_error, created_at, updated_at, next_attempt_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $10)",
        *delivery_row(d),
        now,
    )


async def _recover_runs(
    conn: asyncpg.Connection, max_attempts: int, now: float, *, expired_only: bool
) -> tuple[int, int]:
    """Runs left `running`: back to `queued`, or `failed` past `max_attempts`. With
    `expired_only`, only runs whose lease has expired (another live process owns the others)."""
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
        "UPDATE runs SET state = 'queued', started_at = NULL, lease_until = NULL"
        f" WHERE state = 'running'{expired} RETURNING seq",
        *((now,) if expired_only else ()),
    )
    return len(requeued), len(failed)


async def _claim_runs(
    conn: asyncpg.Connection, limit: int, now: float, lease: float, default_timeout: float
) -> list[asyncpg.Record]:
    """Queued runs -> `running`, oldest first, each leased for its timeout plus `lease` seconds.

    Rows another transaction has locked (claimed by another process, not yet committed) are
    skipped, never waited for; a row claimed and committed meanwhile fails the re-check.
    """
    return await conn.fetch(
        "WITH picked AS MATERIALIZED (SELECT seq FROM runs WHERE state = 'queued'"
        " ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED)"
        " UPDATE runs SET state = 'running', started_at = $1::float8, attempts = attempts + 1,"
        " lease_until = $1::float8 + COALESCE(timeout_seconds, $2::float8) + $3::float8"
        f" WHERE seq IN (SELECT seq FROM picked) RETURNING {RUN_COLUMNS}",
        now,
        default_timeout,
        lease,
        limit,
    )


# A run's ending in one statement: its state, its transcript turns (column arrays), the summary
# event for the main session and the delivery of its reply (each written when its id is given).
_FINISH_RUN = (
    "WITH done AS ("
    " UPDATE runs SET state = $1, finished_at = $2, reply = $3, error = $4, model_used = $5,"
    " input_tokens = $6::bigint, output_tokens = $7::bigint, lease_until = NULL"
    " WHERE run_id = $8"
    "), turns_added AS ("
    " INSERT INTO turns (session_key, role, content, run_id, created_at)"
    " SELECT t.session_key, t.role, t.content, t.run_id, $2 FROM unnest($9::text[],"
    " $10::text[], $11::text[], $12::text[]) WITH ORDINALITY AS t(session_key, role, content,"
    " run_id, n) ORDER BY t.n"
    "), summary AS ("
    " INSERT INTO events (event_id, session, text, source, mode, trusted, created_at)"
    " SELECT $13::text, $14::text, $15::text, $16::text, $17::text, $18::bool, $2"
    " WHERE $13::text IS NOT NULL"
    ") INSERT INTO deliveries (delivery_id, run_id, heartbeat_id, channel, recipient,"
    " fallback_channel, text, state, last_error, created_at, updated_at, next_attempt_at)"
    " SELECT $19::text, $20::text, $21::text, $22::text, $23::text, $24::text, $25::text,"
    " $26::text, $27::text, $2, $2, $2 WHERE $19::text IS NOT NULL"
)


async def _finish_run(conn: asyncpg.Connection, o: RunOutcome) -> None:
    turns = columns([(t.session_key, t.role, t.content, t.run_id) for t in o.turns], 4)
    e, d = o.summary, o.delivery
    summary = (None,) * 6 if e is None else event_row(e)
    delivery = (None,) * 9 if d is None else delivery_row(d)
    await conn.execute(
        _FINISH_RUN,
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
    )


async def _finish_heartbeat(conn: asyncpg.Connection, o: HeartbeatOutcome) -> None:
    await conn.execute(
        f"INSERT INTO heartbeats ({HEARTBEAT_COLUMNS})"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
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
    )
    if o.state == "succeeded" and o.event_ids:
        await conn.execute(
            "UPDATE events SET consumed_at = $1, heartbeat_id = $2"
            " WHERE event_id = ANY($3::text[]) AND consumed_at IS NULL",
            o.finished_at,
            o.heartbeat_id,
            list(o.event_ids),
        )
    await _insert_turns(conn, o.turns, o.finished_at)
    if o.delivery is not None:
        await _insert_delivery(conn, o.delivery, o.finished_at)


async def _set_last_route(
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


async def _claim_deliveries(
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


async def _update_delivery(
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
) -> None:
    """Record a delivery attempt's outcome. A row already `sent` is never changed again.

    `reset` (moving to a fallback channel) clears the attempts and the message ids.
    """
    await conn.execute(
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


async def _auth_failure(
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


# --- group commit -------------------------------------------------------------------------------


class _Job(Generic[T]):
    __slots__ = ("fn", "future", "retries")

    def __init__(self, fn: Job[T], future: asyncio.Future[T] | None) -> None:
        self.fn = fn
        self.future = future
        self.retries = 0


_STOP = object()


class _GroupCommitWriter:
    """An asyncio task that owns one connection and commits the waiting write jobs together.

    It takes every job in the queue, runs them in one transaction, commits once and then resolves
    the futures, so an awaited write returns only after its commit. A job that fails rolls back
    alone (see `_commit`: the batch then runs again with a savepoint per job). A deadlock or a
    serialization failure (possible when two processes lock the same rows in different orders)
    is retried in the next batch, after this transaction's locks are gone; so is a batch whose
    connection was lost before its COMMIT was sent.
    """

    def __init__(self, connect: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._carry: list[_Job[Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._conn = await self._connect()
        self._task = asyncio.create_task(self._run(), name="hookwise-postgres-writer")

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._queue.put_nowait(_STOP)
            await self._task
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None

    def submit(self, fn: Job[T]) -> asyncio.Future[T]:
        """Run `fn(connection)` in the next batch; the future resolves after the commit."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Job(fn, fut))
        return fut

    def submit_nowait(self, fn: Job[Any]) -> None:
        """Run `fn(connection)` in the next batch; nobody waits for it."""
        self._queue.put_nowait(_Job(fn, None))

    async def _run(self) -> None:
        while True:
            batch, self._carry = self._carry, []
            if not batch:
                first = await self._queue.get()
                if first is _STOP:
                    return
                batch.append(first)
            stop = False
            while len(batch) < MAX_BATCH and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            await self._run_batch(batch)
            if stop and not self._carry:
                return
            if stop:
                self._queue.put_nowait(_STOP)

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await self._connect()
        return self._conn

    async def _run_batch(self, batch: list[_Job[Any]]) -> None:
        try:
            results = await self._commit(batch)
        except _Uncommitted as e:
            log.warning("the write connection was lost before the commit: %r", e.__cause__)
            results = [(job, None, e) for job in batch]
            await asyncio.sleep(RECONNECT_DELAY[0])
        except Exception as e:
            log.exception("commit failed; %d writes refused", len(batch))
            results = [(job, None, e) for job in batch]
        for job, value, error in results:
            if isinstance(error, (*RETRYABLE, _Uncommitted)) and job.retries < MAX_RETRIES:
                job.retries += 1
                self._carry.append(job)
            elif isinstance(error, _Uncommitted):
                _settle(job, None, error.__cause__)
            else:
                _settle(job, value, error)

    async def _commit(self, batch: list[_Job[Any]]) -> list[_Outcome]:
        """Run the batch in one transaction and commit it.

        The jobs first run without savepoints (two round trips fewer per job). When one fails,
        that transaction is rolled back and the batch runs again with a savepoint per job, so
        the failing job rolls back alone. A batch of one needs no savepoint: its transaction is.
        """
        results = await self._transaction(batch, savepoints=False)
        if results is None:
            results = await self._transaction(batch, savepoints=True)
        assert results is not None
        return results

    async def _transaction(
        self, batch: list[_Job[Any]], *, savepoints: bool
    ) -> list[_Outcome] | None:
        """One try at the batch: its outcomes once committed, or None when a job failed and
        the transaction (without savepoints) was rolled back.

        A connection lost before the COMMIT was sent wrote nothing: `_Uncommitted` says that the
        whole batch may run again on a new connection.
        """
        committing = False
        conn: asyncpg.Connection | None = None
        tx: Any = None
        run = self._run_in_savepoint if savepoints else self._run_alone
        try:
            conn = await self._connection()
            tx = conn.transaction()
            await tx.start()
            results = []
            for job in batch:
                results.append(await run(conn, job))
                if results[-1][2] is not None and not savepoints:
                    await tx.rollback()
                    return results if len(batch) == 1 else None
            committing = True
            await tx.commit()
            return results
        except CONNECTION_LOST as e:
            if committing:
                raise
            raise _Uncommitted() from e
        except BaseException:
            if not committing and tx is not None and conn is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await tx.rollback()
            raise

    async def _run_alone(self, conn: asyncpg.Connection, job: _Job[Any]) -> _Outcome:
        try:
            return job, await job.fn(conn), None
        except CONNECTION_LOST:
            raise
        except Exception as e:
            return job, None, e

    async def _run_in_savepoint(self, conn: asyncpg.Connection, job: _Job[Any]) -> _Outcome:
        try:
            async with conn.transaction():
                value = await job.fn(conn)
        except CONNECTION_LOST:
            raise
        except Exception as e:
            return job, None, e
        return job, value, None


_Outcome = tuple[_Job[Any], Any, BaseException | None]


class _Uncommitted(Exception):
    """The connection was lost before the COMMIT was sent: nothing of the batch was written."""


def _settle(job: _Job[Any], value: Any, error: BaseException | None) -> None:
    if job.future is None:
        if error is not None:
            log.error("background write failed: %s", type(error).__name__)
        return
    if job.future.done():
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(value)


# --- the store ----------------------------------------------------------------------------------


async def _no_session_state(_conn: asyncpg.Connection) -> None:
    """The read pool's reset: nothing to undo. Pooled connections only run single statements
    in autocommit (no LISTEN, locks, SET or open transaction; those have connections of their
    own), so asyncpg's default reset would cost a round trip per use for nothing."""


class PostgresStore:
    """The `Store` on a PostgreSQL database (optionally in its own `schema`)."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 10) -> None:
        self.url = url
        self.schema = schema
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._writer = _GroupCommitWriter(lambda: self._connect("writer"))
        self._accepts = AcceptLane(lambda: self._connect("accept"))
        self._callbacks: dict[str, list[Callable[[], None]]] = {}
        self._listen_conn: asyncpg.Connection | None = None
        self._listen_lost = asyncio.Event()
        self._listen_lock = asyncio.Lock()  # one operation at a time on the LISTEN connection
        self._listen_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[Any]] = set()
        self._lead_conn: asyncpg.Connection | None = None
        self._lead_lock = asyncio.Lock()
        self._led: set[str] = set()
        self._closing = False

    # connections ------------------------------------------------------------------------------

    def _server_settings(self, role: str) -> dict[str, str]:
        name = f"hookwise/{role}" + (f" {self.schema}" if self.schema else "")
        # The server notices a vanished machine within ~25 s (not the OS's 2 hours), so that its
        # leadership and row locks are released.
        settings = {"application_name": name[:63], **KEEPALIVES}
        if self.schema is not None:
            settings["search_path"] = quote_ident(self.schema)
        return settings

    async def _connect(self, role: str) -> asyncpg.Connection:
        return await asyncpg.connect(self.url, server_settings=self._server_settings(role))

    @property
    def _readers(self) -> asyncpg.Pool:
        assert self._pool is not None, "store not open"
        return self._pool

    def write(self, fn: Job[T]) -> asyncio.Future[T]:
        """Run `await fn(connection)` in the next group commit; resolves once committed."""
        return self._writer.submit(fn)

    # lifecycle --------------------------------------------------------------------------------

    async def open(self) -> None:
        """Migrate, then open the read pool, the writer and the LISTEN connection."""
        conn = await self._connect("migrate")
        try:
            await migrate(conn, self.schema)
        finally:
            await conn.close()
        try:
            self._pool = await asyncpg.create_pool(
                self.url,
                min_size=min(2, self._pool_size),
                max_size=self._pool_size,
                server_settings=self._server_settings("read"),
                reset=_no_session_state,
            )
            await self._writer.start()
            await self._accepts.start()
            await self._listen()
        except BaseException:
            await self.close()
            raise
        self._listen_task = asyncio.create_task(self._keep_listening(), name="hookwise-listen")

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._listen_task is not None:
            self._listen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listen_task
        for task in list(self._pending):
            task.cancel()
        await self._accepts.stop()
        await self._writer.stop()
        for conn in (self._listen_conn, self._lead_conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._led.clear()
        if self._pool is not None:
            await self._pool.close()

    # the request path -------------------------------------------------------------------------

    async def accept(self, op: AcceptOp) -> Accepted:
        """Write a request's key, events, runs and log line with the next group of the accept
        lane (see `hookwise.server.store.postgres_accept`); returns once they are committed."""
        return await self._accepts.submit(op)

    def log_request(self, entry: RequestLogEntry) -> None:
        self._writer.submit_nowait(lambda conn: insert_log(conn, entry))

    async def prune(self, *, now: float, idempotency_window: float, log_retention: float) -> None:
        """Forget expired idempotency keys, old log lines, and the throttle records whose count
        started an idempotency window ago and that lock nobody out."""

        async def fn(conn: asyncpg.Connection) -> None:
            await conn.execute(
                "DELETE FROM idempotency_keys WHERE created_at < $1", now - idempotency_window
            )
            await conn.execute("DELETE FROM request_log WHERE at < $1", now - log_retention)
            await conn.execute(
                "DELETE FROM auth_failures WHERE window_start < $1"
                " AND (locked_until IS NULL OR locked_until <= $2)",
                now - idempotency_window,
                now,
            )

        await self._writer.submit(fn)

    # reads ------------------------------------------------------------------------------------

    async def list_events(self, session: str, *, limit: int, cursor: str | None) -> Page:
        rows = await self._readers.fetch(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = $1 AND seq < $2"
            " ORDER BY seq DESC LIMIT $3",
            session,
            cursor_value(cursor),
            limit + 1,
        )
        return page_of(rows, limit, _event_record)

    async def list_runs(self, *, limit: int, cursor: str | None, state: str | None) -> Page:
        rows = await self._readers.fetch(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE seq < $1"
            " AND ($2::text IS NULL OR state = $2) ORDER BY seq DESC LIMIT $3",
            cursor_value(cursor),
            state,
            limit + 1,
        )
        return page_of(rows, limit, _run_record)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._readers.fetchrow(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = $1", run_id
        )
        return _run_record(row) if row else None

    async def request_log(self, *, limit: int, cursor: str | None) -> Page:
        rows = await self._readers.fetch(
            "SELECT seq, at, path, status, client, size, action, rule_id, code FROM request_log"
            " WHERE seq < $1 ORDER BY seq DESC LIMIT $2",
            cursor_value(cursor),
            limit + 1,
        )
        return page_of(rows, limit, lambda r: RequestLogEntry(*list(r)[1:]))

    # the runtime ------------------------------------------------------------------------------

    async def recover_runs(
        self, *, max_attempts: int, now: float, expired_only: bool = False
    ) -> tuple[int, int]:
        """Re-queue runs left `running` (or fail them past `max_attempts`). Several processes
        share the queue: call it with `expired_only=True` unless no other process is running."""
        return await self._writer.submit(
            lambda conn: _recover_runs(conn, max_attempts, now, expired_only=expired_only)
        )

    async def requeue_runs(self, run_ids: list[str]) -> None:
        """Put runs interrupted by a clean stop back in the queue, without using an attempt."""
        await self._writer.submit(
            lambda conn: conn.execute(
                "UPDATE runs SET state = 'queued', started_at = NULL, lease_until = NULL,"
                " attempts = GREATEST(attempts - 1, 0)"
                " WHERE run_id = ANY($1::text[]) AND state = 'running'",
                list(run_ids),
            )
        )

    async def claim_runs(
        self, *, limit: int, now: float, lease: float = 60.0, default_timeout: float = 600.0
    ) -> list[RunRecord]:
        rows = await self._writer.submit(
            lambda conn: _claim_runs(conn, limit, now, lease, default_timeout)
        )
        return sorted((_run_record(r) for r in rows), key=lambda r: r.seq)

    async def finish_run(self, outcome: RunOutcome) -> None:
        await self._writer.submit(lambda conn: _finish_run(conn, outcome))

    async def finish_heartbeat(self, outcome: HeartbeatOutcome) -> None:
        await self._writer.submit(lambda conn: _finish_heartbeat(conn, outcome))

    async def pending_events(self, session: str, *, limit: int) -> list[EventRecord]:
        rows = await self._readers.fetch(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session = $1 AND consumed_at IS NULL"
            " ORDER BY seq LIMIT $2",
            session,
            limit,
        )
        return [_event_record(r) for r in rows]

    async def has_queued_runs(self) -> bool:
        row = await self._readers.fetchrow("SELECT 1 FROM runs WHERE state = 'queued' LIMIT 1")
        return row is not None

    async def session_turns(self, session_key: str, *, limit: int) -> list[Turn]:
        rows = await self._readers.fetch(
            "SELECT role, content FROM (SELECT seq, role, content FROM turns"
            " WHERE session_key = $1 ORDER BY seq DESC LIMIT $2) AS recent ORDER BY seq",
            session_key,
            limit,
        )
        return [Turn(r["role"], r["content"]) for r in rows]

    async def last_route(self, session_key: str) -> Route | None:
        row = await self._readers.fetchrow(
            "SELECT last_channel, last_to FROM sessions WHERE session_key = $1", session_key
        )
        if row is None or not row[0] or not row[1]:
            return None
        return Route(row[0], row[1])

    async def set_last_route(
        self, session_key: str, route: Route, *, now: float, only_if_unset: bool = False
    ) -> None:
        await self._writer.submit(
            lambda conn: _set_last_route(conn, session_key, route, now, only_if_unset=only_if_unset)
        )

    async def list_heartbeats(self, *, limit: int) -> list[HeartbeatRecord]:
        rows = await self._readers.fetch(
            f"SELECT {HEARTBEAT_COLUMNS} FROM heartbeats ORDER BY seq DESC LIMIT $1", limit
        )
        return [heartbeat_record(tuple(r)) for r in rows]

    async def claim_deliveries(
        self, *, limit: int, now: float, lease: float
    ) -> list[DeliveryRecord]:
        rows = await self._writer.submit(lambda conn: _claim_deliveries(conn, limit, now, lease))
        rows = sorted(rows, key=lambda r: (r["next_attempt_at"], r["seq"]))
        return [delivery_record(tuple(r)[1:]) for r in rows]

    async def recover_deliveries(self) -> int:
        """Nothing to do: other live processes may hold delivery leases, and every lease expires
        by itself, after which any process claims the delivery again."""
        return 0

    async def update_delivery(self, delivery_id: str, **fields: Any) -> None:
        await self._writer.submit(lambda conn: _update_delivery(conn, delivery_id, **fields))

    async def next_delivery_due(self) -> float | None:
        return await self._readers.fetchval(
            "SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'"
        )

    async def list_deliveries(
        self, *, limit: int, cursor: str | None, run_id: str | None = None, state: str | None = None
    ) -> Page:
        rows = await self._readers.fetch(
            f"SELECT seq, {DELIVERY_COLUMNS} FROM deliveries WHERE seq < $1"
            " AND ($2::text IS NULL OR run_id = $2) AND ($3::text IS NULL OR state = $3)"
            " ORDER BY seq DESC LIMIT $4",
            cursor_value(cursor),
            run_id,
            state,
            limit + 1,
        )
        return page_of(rows, limit, lambda r: delivery_record(tuple(r)[1:]))

    # cross-process signals: LISTEN/NOTIFY -----------------------------------------------------

    def _channel(self, topic: str) -> str:
        if not _TOPIC.match(topic):
            raise ValueError(f"topic {topic!r}: use lower-case letters, digits and '_'")
        channel = f"hookwise_{self.schema}_{topic}" if self.schema else f"hookwise_{topic}"
        if len(channel.encode()) > 63:
            raise ValueError(f"channel {channel!r} is longer than 63 bytes")
        return channel

    async def notify(self, topic: str) -> None:
        """Wake every process subscribed to `topic` (this one included)."""
        await self._readers.execute("SELECT pg_notify($1, '')", self._channel(topic))

    def subscribe(self, topic: str, callback: Callable[[], None]) -> None:
        """Call `callback()` on the event loop whenever `topic` is notified by any process.

        Subscriptions made before `open()` are listening when it returns; later ones a moment
        after. When the listening connection drops, it is re-established and every callback is
        called once, since notifications sent in between are lost.
        """
        channel = self._channel(topic)
        new = channel not in self._callbacks
        self._callbacks.setdefault(channel, []).append(callback)
        if new and self._listen_conn is not None:
            task = asyncio.get_running_loop().create_task(self._add_listener(channel))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _add_listener(self, channel: str) -> None:
        async with self._listen_lock:
            conn = self._listen_conn
            if conn is None or conn.is_closed():
                return  # the reconnection listens on every subscribed channel
            try:
                await conn.add_listener(channel, self._dispatch)
            except Exception:
                log.warning("LISTEN %s failed; the connection will be re-established", channel)
                conn.terminate()

    def _dispatch(self, _conn: Any, _pid: int, channel: str, _payload: str) -> None:
        for callback in self._callbacks.get(channel, []):
            try:
                callback()
            except Exception:
                log.exception("notification callback for %s failed", channel)

    async def _listen(self) -> None:
        """Open the listening connection and LISTEN on every subscribed channel."""
        async with self._listen_lock:
            conn = await self._connect("listen")
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c: lost.set())
            self._listen_conn, self._listen_lost = conn, lost
            try:
                for channel in list(self._callbacks):
                    await conn.add_listener(channel, self._dispatch)
            except BaseException:
                conn.terminate()
                raise

    async def _keep_listening(self) -> None:
        delay = RECONNECT_DELAY[0]
        while True:
            await self._watch(self._listen_conn, self._listen_lost)
            log.warning("the LISTEN connection was lost; reconnecting")
            while True:
                try:
                    await self._listen()
                    break
                except Exception:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RECONNECT_DELAY[1])
            delay = RECONNECT_DELAY[0]
            for channel in list(self._callbacks):
                self._dispatch(None, 0, channel, "")

    async def _watch(self, conn: asyncpg.Connection | None, lost: asyncio.Event) -> None:
        """Return once `conn` is lost: closed by the server, or not answering a ping."""
        while conn is not None and not conn.is_closed():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), LISTEN_PING_EVERY)
                return
            try:
                async with self._listen_lock:
                    await conn.fetchval("SELECT 1", timeout=PING_TIMEOUT)
            except Exception:
                conn.terminate()
                return

    # cross-process signals: leadership --------------------------------------------------------

    def _lead_key(self, name: str) -> str:
        return f"{self.schema}:{name}" if self.schema else name

    async def try_lead(self, name: str) -> bool:
        """Hold leadership `name` (a session-level advisory lock); True while this store holds it.

        Cheap to call repeatedly: while held, it only checks that the lock's connection is alive.
        When that connection is lost, so is leadership, and this call tries to take it again.
        """
        async with self._lead_lock:
            if self._closing:
                return False
            try:
                conn = await self._lead_connection(name)
                if name in self._led:
                    return True
                got = await conn.fetchval(
                    "SELECT pg_try_advisory_lock(hashtext($1))", self._lead_key(name)
                )
            except (*CONNECTION_LOST, asyncpg.PostgresError, TimeoutError):
                log.warning("leadership %s: the database is unreachable", name, exc_info=True)
                self._drop_lead_connection()
                return False
            if got:
                self._led.add(name)
            return bool(got)

    async def _lead_connection(self, name: str) -> asyncpg.Connection:
        conn = self._lead_conn
        if conn is not None and not conn.is_closed() and name in self._led:
            try:
                await conn.fetchval("SELECT 1", timeout=PING_TIMEOUT)
            except Exception:
                self._drop_lead_connection()
                conn = None
        if conn is None or conn.is_closed():
            self._led.clear()
            conn = self._lead_conn = await self._connect("lead")
            conn.add_termination_listener(self._lead_connection_lost)
        return conn

    def _lead_connection_lost(self, conn: asyncpg.Connection) -> None:
        if conn is self._lead_conn:  # not a connection already replaced
            self._led.clear()

    def _drop_lead_connection(self) -> None:
        self._led.clear()
        conn, self._lead_conn = self._lead_conn, None
        if conn is not None:
            conn.terminate()

    async def resign(self, name: str) -> None:
        """Give leadership `name` up, if this store holds it."""
        async with self._lead_lock:
            if name not in self._led:
                return
            self._led.discard(name)
            conn = self._lead_conn
            if conn is not None and not conn.is_closed():
                try:
                    await conn.fetchval(
                        "SELECT pg_advisory_unlock(hashtext($1))", self._lead_key(name)
                    )
                except Exception:
                    self._drop_lead_connection()

    # the shared auth-failure throttle ---------------------------------------------------------

    async def auth_failure(
        self, client: str, *, now: float, window: float, max_failures: int, lockout: float
    ) -> float | None:
        """Record a failed authentication by `client` at `now` (epoch seconds, not monotonic:
        processes on several machines share the record).

        A window of `window` seconds starts at the first failure; `max_failures` failures before
        it ends lock the client out for `lockout` seconds: the failure that does so returns the
        lock-out's end (and the count starts over); any other returns None.
        """
        return await self._writer.submit(
            lambda conn: _auth_failure(conn, client, now, window, max_failures, lockout)
        )

    async def auth_locked_until(self, client: str, *, now: float) -> float | None:
        """When the lock-out of `client` ends, or None when it is not locked out at `now`."""
        until = await self._readers.fetchval(
            "SELECT locked_until FROM auth_failures WHERE client = $1", client
        )
        return until if until is not None and until > now else None

    async def auth_success(self, client: str) -> None:
        """A correct token: forget `client`'s failures and lock-out."""
        await self._readers.execute("DELETE FROM auth_failures WHERE client = $1", client)
