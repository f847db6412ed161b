"""The PostgreSQL store: the `Store` for several gateway processes sharing one database.

Same tables, records, orderings and cursors as the SQLite store; what differs is what several
processes need. Accepted requests are written by the accept lane (`accept`):
a group of requests in one statement that commits alone, the next group forming meanwhile; an
idempotency key is taken with `INSERT ... ON CONFLICT`, so two processes given the same key at
once create one row. Every other write (the runtime's) goes through one asyncio task per process
(`_GroupCommitWriter`) that runs the waiting jobs in one transaction and commits once; a job that
fails rolls back alone. Runs and deliveries are claimed with `FOR UPDATE SKIP LOCKED` and
leased; a dead process's work is taken over once its lease has expired, so `recover_deliveries`
does nothing here. Reads use a connection pool and never wait behind a commit.

Cross-process signals are delegated to `signals` (`notify`/`subscribe`: LISTEN/NOTIFY;
`try_lead`/`resign`: advisory locks); the shared auth-failure throttle (`auth_*`) is here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg

from ..base import (
    Accepted,
    AcceptOp,
    EventRecord,
    Limit,
    RequestLogEntry,
    RunRecord,
)
from ..bounded import WriterProbe
from ..lanes import event_paused
from ..records import DeliveryRecord, HeartbeatOutcome, Route, RunOutcome, Turn
from ..retention import LOGOUTS_KEPT
from ..rows import EVENT_COLUMNS, delivery_record, event_record, run_record
from . import runtime as rt
from .accept import AcceptLane, insert_log
from .admin import PostgresAdminReads
from .alerts import PostgresAlerts
from .approvals import PostgresApprovals
from .coalesce import accept_coalescing
from .lanes import PostgresLanes
from .migrate import migrate, quote_ident
from .modelcalls import PostgresModelCalls
from .retention import PostgresRetention
from .signals import Leadership, Notifier
from .stats import PostgresStats
from .toolcalls import PostgresToolCalls
from .writer import GroupCommitWriter, Job

T = TypeVar("T")
log = logging.getLogger("hookwise.store")

KEEPALIVES = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}


async def _no_session_state(_conn: asyncpg.Connection) -> None:
    """The read pool's reset: nothing to undo. Pooled connections only run single statements
    in autocommit (no LISTEN, locks, SET or open transaction; those have connections of their
    own), so asyncpg's default reset would cost a round trip per use for nothing."""


class PostgresStore(
    PostgresApprovals,
    PostgresAdminReads,
    PostgresLanes,
    PostgresStats,
    PostgresRetention,
    PostgresToolCalls,
    PostgresModelCalls,
    PostgresAlerts,
):
    """The `Store` on a PostgreSQL database (optionally in its own `schema`)."""

    def __init__(self, url: str, *, schema: str | None = None, pool_size: int = 10) -> None:
        self.url = url
        self.schema = schema
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._writer = GroupCommitWriter(lambda: self._connect("writer"))
        self._accepts = AcceptLane(lambda: self._connect("accept"))
        self._writer_probe = WriterProbe(
            lambda: self._writer.submit(lambda conn: conn.fetchval("SELECT 1"))
        )
        self._notifier = Notifier(
            lambda: self._connect("listen"), lambda *a: self._readers.execute(*a), schema
        )
        self._leadership = Leadership(lambda: self._connect("lead"), schema)
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

    def write(self, fn: Job[T], *, alone: bool = False) -> asyncio.Future[T]:
        """Run `await fn(connection)` in the next group commit; resolves once committed.
        `alone`: in a transaction of its own (see `GroupCommitWriter.submit`)."""
        return self._writer.submit(fn, alone=alone)

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
            await self._notifier.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        await self._notifier.stop()
        await self._leadership.stop()
        await self._accepts.stop()
        await self._writer.stop()
        if self._pool is not None:
            await self._pool.close()

    # the request path -------------------------------------------------------------------------

    async def accept(self, op: AcceptOp) -> Accepted:
        """Write a request's key, events, runs and log line with the next group of the accept
        lane (see `accept`); returns once they are committed. A request of a coalescing
        mapping is written in a transaction of its own (`coalesce`)."""
        if op.coalesce is not None and len(op.runs) == 1 and not op.events:
            async with self._readers.acquire() as conn:
                return await accept_coalescing(conn, op, op.coalesce, op.runs[0])
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
                "DELETE FROM console_logouts WHERE ended_at < $1", now - LOGOUTS_KEPT
            )
            await conn.execute(
                "DELETE FROM auth_failures WHERE window_start < $1"
                " AND (locked_until IS NULL OR locked_until <= $2)",
                now - idempotency_window,
                now,
            )
            # limit counters that no longer hold anything back
            await conn.execute("DELETE FROM limit_rates WHERE tat < $1", now)
            await conn.execute(
                "DELETE FROM limit_in_flight WHERE n = 0 OR seen < $1", now - log_retention
            )

        await self._writer.submit(fn)

    # the runtime ------------------------------------------------------------------------------

    async def recover_runs(
        self, *, max_attempts: int, now: float, expired_only: bool = False
    ) -> tuple[int, int]:
        """Re-queue runs left `running` (or fail them past `max_attempts`). Several processes
        share the queue: call it with `expired_only=True` unless no other process is running."""
        return await self._writer.submit(
            lambda conn: rt.recover_runs(conn, max_attempts, now, expired_only=expired_only)
        )

    async def requeue_runs(self, run_ids: list[str]) -> None:
        """Put runs interrupted by a clean stop back in the queue (`held` while paused, see
        `runtime`), without using an attempt."""
        await self._writer.submit(lambda conn: conn.execute(rt.REQUEUE_RUNS, list(run_ids)))

    async def claim_runs(
        self,
        *,
        limit: Limit,
        now: float,
        lease: float = 60.0,
        default_timeout: float = 600.0,
        agent_id: str | None = None,
        full: tuple[str, ...] = (),
    ) -> list[RunRecord]:
        rows = await self._writer.submit(
            lambda conn: rt.claim_runs(
                conn, limit, now, lease, default_timeout, agent_id, tuple(full)
            )
        )
        return sorted((run_record(r) for r in rows), key=lambda r: r.seq)

    async def finish_run(self, outcome: RunOutcome, *, again: bool = False) -> bool:
        return await self._writer.submit(lambda conn: rt.finish_run(conn, outcome, again=again))

    async def release_runs(self, *, agent_id: str | None, keep: list[str]) -> int:
        released = await self._writer.submit(
            lambda conn: conn.fetch(rt.RELEASE_RUNS, agent_id, list(keep))
        )
        return len(released)

    async def finish_heartbeat(self, outcome: HeartbeatOutcome) -> None:
        await self._writer.submit(lambda conn: rt.finish_heartbeat(conn, outcome))

    async def pending_events(
        self, session: str, *, limit: int, after: int = 0
    ) -> list[EventRecord]:
        rows = await self._readers.fetch(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session = $1 AND consumed_at IS NULL"
            f" AND seq > $3 AND NOT {event_paused('events')} ORDER BY seq LIMIT $2",
            session,
            limit,
            after,
        )
        return [event_record(r) for r in rows]

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
            lambda conn: rt.set_last_route(
                conn, session_key, route, now, only_if_unset=only_if_unset
            )
        )

    async def claim_deliveries(
        self, *, limit: int, now: float, lease: float
    ) -> list[DeliveryRecord]:
        rows = await self._writer.submit(lambda conn: rt.claim_deliveries(conn, limit, now, lease))
        rows = sorted(rows, key=lambda r: (r["next_attempt_at"], r["seq"]))
        return [delivery_record(tuple(r)[1:]) for r in rows]

    async def recover_deliveries(self) -> int:
        """Nothing to do: other live processes may hold delivery leases, and every lease expires
        by itself, after which any process claims the delivery again."""
        return 0

    async def update_delivery(self, delivery_id: str, **fields: Any) -> None:
        await self._writer.submit(lambda conn: rt.update_delivery(conn, delivery_id, **fields))

    async def next_delivery_due(self) -> float | None:
        return await self._readers.fetchval(
            "SELECT MIN(next_attempt_at) FROM deliveries WHERE state = 'pending'"
        )

    # cross-process signals -------------------------------------------------------------------

    async def notify(self, topic: str) -> None:
        """Wake every process subscribed to `topic` (this one included)."""
        await self._notifier.notify(topic)

    def subscribe(self, topic: str, callback: Callable[[], None]) -> None:
        """Call `callback()` on the event loop whenever `topic` is notified by any process."""
        self._notifier.subscribe(topic, callback)

    async def try_lead(self, name: str) -> bool:
        """Hold leadership `name` (a session-level advisory lock); True while this store holds it."""
        return await self._leadership.try_lead(name)

    async def resign(self, name: str) -> None:
        """Give leadership `name` up, if this store holds it."""
        await self._leadership.resign(name)

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
            lambda conn: rt.auth_failure(conn, client, now, window, max_failures, lockout)
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

    # per-route limits, counted across processes (server/ingress/limits.py) -------------------

    async def limit_rate(self, key: str, *, now: float, step: float, burst: float) -> float:
        """Count one request of `key` against its rate (GCRA: one every `step` seconds, up to
        `burst` seconds ahead); 0 when admitted, else the seconds until one would be."""
        return await self._readers.fetchval(
            "SELECT hookwise_limit_rate($1, $2, $3, $4)", key, now, step, burst
        )

    async def limit_enter(
        self, key: str, owner: str, *, most: int, now: float, stale: float
    ) -> bool:
        """One more request of `key` in flight for `owner` (a process), unless `most` are."""
        return await self._readers.fetchval(
            "SELECT hookwise_limit_enter($1, $2, $3, $4, $5)", key, owner, most, now, stale
        )

    async def limit_leave(self, key: str, owner: str, *, now: float) -> None:
        """A request of `key` that `limit_enter` admitted for `owner` is done."""
        await self._readers.execute(
            "UPDATE limit_in_flight SET n = GREATEST(n - 1, 0), seen = $3"
            " WHERE key = $1 AND owner = $2",
            key,
            owner,
            now,
        )
