"""Cross-process signals on PostgreSQL: notifications (LISTEN/NOTIFY) and leadership (advisory
locks), each on a dedicated connection of its own that is re-established when it drops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from ...retry import Retries
from .accept import CONNECTION_LOST, RECONNECT

log = logging.getLogger("hookwise.store")

LISTEN_PING_EVERY = 30.0
PING_TIMEOUT = 5.0
_TOPIC = re.compile(r"^[a-z0-9_]+$")

Connect = Callable[[], Awaitable[asyncpg.Connection]]


class Notifier:
    """`notify`/`subscribe` for a store (in its `schema`, if any): `execute` runs a statement on
    any pooled connection, `connect` opens the listening connection."""

    def __init__(
        self, connect: Connect, execute: Callable[..., Awaitable[Any]], schema: str | None
    ) -> None:
        self._connect = connect
        self._execute = execute
        self.schema = schema
        self._callbacks: dict[str, list[Callable[[], None]]] = {}
        self._listen_conn: asyncpg.Connection | None = None
        self._listen_lost = asyncio.Event()
        self._listen_lock = asyncio.Lock()  # one operation at a time on the LISTEN connection
        self._listen_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        """Listen on every channel subscribed so far, and keep listening."""
        await self._listen()
        self._listen_task = asyncio.create_task(self._keep_listening(), name="hookwise-listen")

    async def stop(self) -> None:
        if self._listen_task is not None:
            self._listen_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listen_task
        for task in list(self._pending):
            task.cancel()
        if self._listen_conn is not None:
            with contextlib.suppress(Exception):
                await self._listen_conn.close()

    def _channel(self, topic: str) -> str:
        if not _TOPIC.match(topic):
            raise ValueError(f"topic {topic!r}: use lower-case letters, digits and '_'")
        channel = f"hookwise_{self.schema}_{topic}" if self.schema else f"hookwise_{topic}"
        if len(channel.encode()) > 63:
            raise ValueError(f"channel {channel!r} is longer than 63 bytes")
        return channel

    async def notify(self, topic: str) -> None:
        """Wake every process subscribed to `topic` (this one included)."""
        await self._execute("SELECT pg_notify($1, '')", self._channel(topic))

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
            conn = await self._connect()
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
        retries = Retries(RECONNECT)
        while True:
            await self._watch(self._listen_conn, self._listen_lost)
            log.warning("the LISTEN connection was lost; reconnecting")
            while True:
                try:
                    await self._listen()
                    break
                except Exception:
                    await asyncio.sleep(retries.next())
            retries.reset()
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


class Leadership:
    """`try_lead`/`resign` for a store (in its `schema`, if any): session-level advisory locks
    held on one connection that `connect` opens."""

    def __init__(self, connect: Connect, schema: str | None) -> None:
        self._connect = connect
        self.schema = schema
        self._lead_conn: asyncpg.Connection | None = None
        self._lead_lock = asyncio.Lock()
        self._led: set[str] = set()
        self._closing = False

    async def stop(self) -> None:
        self._closing = True
        if self._lead_conn is not None:
            with contextlib.suppress(Exception):
                await self._lead_conn.close()
        self._led.clear()

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
            conn = self._lead_conn = await self._connect()
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
