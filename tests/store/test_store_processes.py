"""Several gateway processes on one database, each played by its own store: work claimed once,
idempotency keys shared, migrations run once; and the cross-process signals (notifications,
leadership, the shared auth throttle)."""

from __future__ import annotations

import asyncio
from collections import Counter
from importlib import resources
from typing import Any

import asyncpg
import pytest

from tests.store.conftest import POSTGRES_URL, Backend
from tests.store.support import NOW, accept_op, add_runs, eventually, new_run

# --- work and keys shared between processes ------------------------------------------------------


def test_two_stores_claim_each_of_1000_runs_exactly_once(backend: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        ids: list[str] = []
        for _ in range(10):
            ids += await add_runs(a, 100)

        async def drain(store: Any) -> list[str]:
            got: list[str] = []
            while runs := await store.claim_runs(limit=7, now=NOW):
                got += [r.run_id for r in runs]
            return got

        from_a, from_b = await asyncio.gather(drain(a), drain(b))
        claims = Counter(from_a + from_b)
        assert sorted(claims) == sorted(ids)
        assert [run_id for run_id, n in claims.items() if n > 1] == []
        listed = await a.list_runs(limit=2000, cursor=None, state="running")
        assert {r.attempts for r in listed.items} == {1} and len(listed.items) == 1000

    backend.run(body, instances=2)


def test_one_idempotency_key_sent_to_two_stores_creates_one_run(backend: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        sends = [
            store.accept(accept_op(runs=(new_run(),), key="shared", body=f"{i}".encode()))
            for i in range(10)
            for store in (a, b)
        ]
        answers = await asyncio.gather(*sends)
        assert sum(not x.replayed for x in answers) == 1
        assert len({x.body for x in answers}) == 1
        assert len((await b.list_runs(limit=50, cursor=None, state=None)).items) == 1

    backend.run(body, instances=2)


def test_a_dead_stores_runs_are_taken_over_once_their_lease_expires(backend: Backend) -> None:
    async def body(survivor: Any) -> None:
        dead = backend.store()
        await dead.open()
        ids = await add_runs(dead, 2, timeout=30.0)
        await dead.claim_runs(limit=2, now=NOW, lease=60.0)
        await dead.close()  # gone without finishing: leased until NOW + 90
        assert await survivor.recover_runs(max_attempts=3, now=NOW + 60, expired_only=True) == (
            0,
            0,
        )
        assert await survivor.claim_runs(limit=5, now=NOW + 60) == []
        assert await survivor.recover_runs(max_attempts=3, now=NOW + 91, expired_only=True) == (
            2,
            0,
        )
        taken = await survivor.claim_runs(limit=5, now=NOW + 91)
        assert [(r.run_id, r.attempts) for r in taken] == [(ids[0], 2), (ids[1], 2)]

    backend.run(body)


def test_stores_opening_together_migrate_once(postgres: Backend) -> None:
    async def body() -> None:
        stores = [postgres.store() for _ in range(4)]
        await asyncio.gather(*(s.open() for s in stores))
        try:
            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                rows = await conn.fetch(
                    f'SELECT version FROM "{postgres.schema}".schema_migrations ORDER BY version'
                )
            finally:
                await conn.close()
            shipped = sorted(
                int(f.name[:4])
                for f in (
                    resources.files("hookwise.server.store.postgres") / "migrations"
                ).iterdir()
                if f.name.endswith(".sql")
            )
            assert [r["version"] for r in rows] == shipped  # each once, however many there are
            assert (await stores[3].accept(accept_op())).status == 202
        finally:
            for s in stores:
                await s.close()

    asyncio.run(body())


# --- notifications -------------------------------------------------------------------------------


def _requires(store: Any, method: str) -> None:
    if not hasattr(store, method):
        pytest.skip(f"{type(store).__name__} has no {method}() yet")


def test_a_store_hears_its_own_notifications(backend: Backend) -> None:
    async def body(store: Any) -> None:
        _requires(store, "notify")
        heard: list[str] = []
        store.subscribe("runs", lambda: heard.append("runs"))

        async def probe() -> bool:
            await store.notify("runs")  # until the LISTEN has reached the server
            return bool(heard)

        await eventually(probe, what="the notification")

    backend.run(body)


def test_a_notification_reaches_every_store_subscribed_before_open(postgres: Backend) -> None:
    async def body() -> None:
        a, b = postgres.store(), postgres.store()
        heard: list[str] = []
        a.subscribe("runs", lambda: heard.append("a runs"))
        a.subscribe("deliveries", lambda: heard.append("a deliveries"))
        b.subscribe("runs", lambda: heard.append("b runs"))
        await a.open()
        await b.open()
        try:
            await b.notify("runs")
            await eventually(lambda: len(heard) >= 2, what="both stores to hear it")
            assert sorted(heard) == ["a runs", "b runs"]
            await a.notify("deliveries")
            await eventually(lambda: "a deliveries" in heard, what="the second topic")
        finally:
            await a.close()
            await b.close()

    asyncio.run(body())


def test_a_store_subscribed_after_open_hears_another_store(postgres: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        heard: list[str] = []
        a.subscribe("wake", lambda: heard.append("wake"))

        async def probe() -> bool:
            await b.notify("wake")  # until the LISTEN has reached the server
            return bool(heard)

        await eventually(probe, what="the notification from the other store")

    postgres.run(body, instances=2)


async def _terminate(application_name: str) -> int:
    """Kill the server's backends of `application_name`; how many. Returns once they are gone
    (`pg_terminate_backend` only signals them), and the client has had a moment to read the
    closed sockets: a statement sent in between would meet the server's FATAL half-read
    (asyncpg's "another operation is in progress"), which is the kill's race, not a store's."""
    conn = await asyncpg.connect(POSTGRES_URL)
    try:
        killed = await conn.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = $1",
            application_name,
        )
        for _ in range(200):
            left = await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                application_name,
            )
            if not left:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        return int(killed)
    finally:
        await conn.close()


def test_the_listener_comes_back_after_its_connection_is_killed(postgres: Backend) -> None:
    async def body() -> None:
        a, b = postgres.store(), postgres.store()
        heard: list[str] = []
        a.subscribe("runs", lambda: heard.append("runs"))
        await a.open()
        await b.open()
        try:
            # both stores listen; kill both listening connections
            assert await _terminate(f"hookwise/listen {postgres.schema}") == 2
            # on reconnecting, a store calls its callbacks (notifications may have been missed)
            await eventually(lambda: heard, what="the reconnection")
            heard.clear()
            await b.notify("runs")
            await eventually(lambda: heard, what="a notification after the reconnection")
        finally:
            await a.close()
            await b.close()

    asyncio.run(body())


# --- leadership ----------------------------------------------------------------------------------


def test_one_store_leads_and_another_takes_over_when_it_closes(postgres: Backend) -> None:
    async def body(b: Any) -> None:
        a = postgres.store()
        await a.open()
        assert await a.try_lead("heartbeat")
        assert not await b.try_lead("heartbeat")
        assert await a.try_lead("heartbeat")  # still held
        assert await b.try_lead("other")  # another name is another leadership
        await a.close()
        await eventually(lambda: b.try_lead("heartbeat"), what="the other store to lead")
        assert await b.try_lead("heartbeat")

    postgres.run(body)


def test_resign_hands_leadership_over(postgres: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        assert await a.try_lead("heartbeat")
        assert await a.try_lead("heartbeat")  # held once, however often asked
        await a.resign("heartbeat")
        assert await b.try_lead("heartbeat")
        assert not await a.try_lead("heartbeat")
        await a.resign("heartbeat")  # not held: nothing to give up
        assert not await a.try_lead("heartbeat")

    postgres.run(body, instances=2)


def test_leadership_is_lost_with_its_connection(postgres: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        assert await a.try_lead("heartbeat")
        assert await _terminate(f"hookwise/lead {postgres.schema}") == 1
        await eventually(lambda: b.try_lead("heartbeat"), what="the other store to lead")
        assert not await a.try_lead("heartbeat")
        await b.close()
        await eventually(lambda: a.try_lead("heartbeat"), what="the first store to lead again")

    postgres.run(body, instances=2)


def test_leadership_is_scoped_to_the_schema(postgres: Backend, tmp_path: Any) -> None:
    other = Backend("postgres", tmp_path)

    async def body(a: Any) -> None:
        b = other.store()
        await b.open()
        try:
            assert await a.try_lead("heartbeat")
            assert await b.try_lead("heartbeat")
        finally:
            await b.close()

    try:
        postgres.run(body)
    finally:
        other.drop()


# --- the shared auth throttle --------------------------------------------------------------------

THROTTLE = {"window": 60.0, "max_failures": 3, "lockout": 300.0}


def test_failures_within_the_window_lock_the_client_out(backend: Backend) -> None:
    async def body(store: Any) -> None:
        _requires(store, "auth_failure")
        assert await store.auth_failure("1.2.3.4", now=NOW, **THROTTLE) is None
        assert await store.auth_failure("1.2.3.4", now=NOW + 1, **THROTTLE) is None
        assert await store.auth_locked_until("1.2.3.4", now=NOW + 1) is None
        assert await store.auth_failure("1.2.3.4", now=NOW + 2, **THROTTLE) == NOW + 302
        assert await store.auth_locked_until("1.2.3.4", now=NOW + 3) == NOW + 302
        assert await store.auth_locked_until("5.6.7.8", now=NOW + 3) is None
        assert await store.auth_locked_until("1.2.3.4", now=NOW + 302) is None

    backend.run(body)


def test_a_failure_after_the_window_starts_a_new_count(backend: Backend) -> None:
    """The window starts at the first failure; a failure after it ends counts from one again."""

    async def body(store: Any) -> None:
        _requires(store, "auth_failure")
        assert await store.auth_failure("c", now=NOW, **THROTTLE) is None
        assert await store.auth_failure("c", now=NOW + 30, **THROTTLE) is None
        assert await store.auth_failure("c", now=NOW + 60, **THROTTLE) is None  # a new window
        assert await store.auth_failure("c", now=NOW + 61, **THROTTLE) is None
        assert await store.auth_failure("c", now=NOW + 62, **THROTTLE) == NOW + 362

    backend.run(body)


def test_the_count_starts_over_after_a_lockout(backend: Backend) -> None:
    async def body(store: Any) -> None:
        _requires(store, "auth_failure")
        for i in range(2):
            await store.auth_failure("c", now=NOW + i, **THROTTLE)
        assert await store.auth_failure("c", now=NOW + 2, **THROTTLE) == NOW + 302
        assert await store.auth_failure("c", now=NOW + 3, **THROTTLE) is None
        assert await store.auth_locked_until("c", now=NOW + 3) == NOW + 302

    backend.run(body)


def test_a_success_clears_the_failures_and_the_lockout(backend: Backend) -> None:
    async def body(store: Any) -> None:
        _requires(store, "auth_failure")
        for i in range(3):
            await store.auth_failure("c", now=NOW + i, **THROTTLE)
        await store.auth_success("c")
        assert await store.auth_locked_until("c", now=NOW + 3) is None
        assert await store.auth_failure("c", now=NOW + 4, **THROTTLE) is None
        assert await store.auth_failure("c", now=NOW + 5, **THROTTLE) is None
        await store.auth_success("never-failed")

    backend.run(body)


def test_the_throttle_is_shared_between_stores(backend: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        _requires(a, "auth_failure")
        assert await a.auth_failure("c", now=NOW, **THROTTLE) is None
        assert await b.auth_failure("c", now=NOW + 1, **THROTTLE) is None
        assert await a.auth_failure("c", now=NOW + 2, **THROTTLE) == NOW + 302
        assert await b.auth_locked_until("c", now=NOW + 3) == NOW + 302
        await b.auth_success("c")
        assert await a.auth_locked_until("c", now=NOW + 3) is None

    backend.run(body, instances=2)


def test_concurrent_failures_from_two_stores_all_count(backend: Backend) -> None:
    async def body(a: Any, b: Any) -> None:
        _requires(a, "auth_failure")
        limits = {**THROTTLE, "max_failures": 20}
        ends = await asyncio.gather(
            *(s.auth_failure("c", now=NOW, **limits) for _ in range(10) for s in (a, b))
        )
        assert ends.count(NOW + 300) == 1 and ends.count(None) == 19

    backend.run(body, instances=2)


def test_prune_forgets_idle_throttle_records_but_not_lockouts(postgres: Backend) -> None:
    """PostgreSQL only for now: `SQLiteStore.prune` keeps every throttle record."""

    async def body(store: Any) -> None:
        limits = {"window": 1000.0, "max_failures": 2, "lockout": 1000.0}
        await store.auth_failure("idle", now=NOW - 100, **limits)
        await store.auth_failure("locked", now=NOW - 101, **limits)
        await store.auth_failure("locked", now=NOW - 100, **limits)
        await store.prune(now=NOW, idempotency_window=50.0, log_retention=50.0)
        assert await store.auth_failure("idle", now=NOW, **limits) is None  # the count restarted
        assert await store.auth_locked_until("locked", now=NOW) == NOW + 900

    postgres.run(body)


# --- connections that drop -----------------------------------------------------------------------


def test_writes_and_reads_survive_their_connections_being_killed(postgres: Backend) -> None:
    async def body(store: Any) -> None:
        await add_runs(store, 1)
        assert len((await store.list_runs(limit=10, cursor=None, state=None)).items) == 1
        for role in ("writer", "read"):
            assert await _terminate(f"hookwise/{role} {postgres.schema}") >= 1
        assert (await store.accept(accept_op(runs=(new_run(),)))).status == 202
        assert len((await store.list_runs(limit=10, cursor=None, state=None)).items) == 2

    postgres.run(body)


def test_sqlite_signals_that_cannot_be_read_are_logged_once_and_heard_again(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process's notifications are read from the `signals` table every 0.1 s: a read
    that fails is logged when the failures start and when they end, not every poll; the
    notifications are heard again after."""
    import sqlite3

    backend = Backend("sqlite", tmp_path)
    caplog.set_level("WARNING", logger="hookwise.store")

    async def body(store: Any, other: Any) -> None:
        heard: list[str] = []
        store.subscribe("runs", lambda: heard.append("runs"))
        await asyncio.sleep(0.3)  # the first poll has seen the table
        side = sqlite3.connect(backend.path, isolation_level=None)
        try:
            side.execute("ALTER TABLE signals RENAME TO signals_away")
            await asyncio.sleep(0.6)  # several polls fail
            failing = [r for r in caplog.records if "signals failed" in r.getMessage()]
            assert len(failing) == 1, [r.getMessage() for r in caplog.records]
            side.execute("ALTER TABLE signals_away RENAME TO signals")
        finally:
            side.close()

        async def recovered() -> bool:
            return any("works again" in r.getMessage() for r in caplog.records)

        await eventually(recovered, what="the recovery's log line")

        async def probe() -> bool:
            await other.notify("runs")
            return bool(heard)

        await eventually(probe, what="another store's notification after the failures")

    backend.run(body, instances=2)
