"""PostgreSQL: a pause (or a resume) and an accept committing at the same time. Whichever
takes the table first, the other waits for its commit and then sees it: a run accepted while
its lane is being paused is written `held`, or held by the pause; never left `queued` behind it
(`hookwise.server.store.postgres.lanes.pause`). Each side is held open on a connection of the
test's own, running the store's own SQL (the accept lane's statement, `lanes.pause`), while
the other side goes through a real `PostgresStore`; the wait is read from `pg_stat_activity`.
Likewise a run going back to the queue (a requeue, an expired lease reclaimed, a lost claim
released) against a pause or a resume in flight: it is written `held` behind a pause, `queued`
behind a resume, and a pause behind it holds it (`hookwise.server.store.postgres.runtime`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from hookwise.server.store.lanes import Pause
from hookwise.server.store.postgres import lanes
from hookwise.server.store.postgres import runtime as rt
from hookwise.server.store.postgres.accept import accept_group
from tests.store.conftest import POSTGRES_URL, Backend
from tests.store.support import NOW, PAUSES, accept_op, sent_run


async def _holder(backend: Backend) -> asyncpg.Connection:
    """A connection of the test's own on the backend's schema, in a transaction."""
    conn = await asyncpg.connect(
        POSTGRES_URL,
        server_settings={"search_path": f'"{backend.schema}"', "application_name": "test-holder"},
    )
    await conn.execute("BEGIN")
    return conn


async def _waits_for_a_lock(conn: asyncpg.Connection, role: str, task: asyncio.Task[Any]) -> None:
    """Return once the store's connection `role` (`writer`, `accept`) waits for a lock; fail
    when `task` finishes first (it did not wait) or after 10 s."""
    for _ in range(1000):
        if task.done():
            raise AssertionError(f"the {role} did not wait: {task.result()!r}")
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE $1"
            " AND wait_event_type = 'Lock'",
            f"hookwise/{role} %",
        )
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the {role} never waited")


async def _state(store: Any, run_id: str) -> str:
    return (await store.get_run(run_id)).state


async def _accept_in_flight(backend: Backend, store: Any, act: Any) -> tuple[Any, str]:
    """An accept (the accept lane's statement) held open on the test's connection while the
    store runs `act()` (its pause or resume), which must wait for the accept's commit: what
    `act` returned and the run's state then."""
    holder = await _holder(backend)
    try:
        run = sent_run()
        assert await accept_group(holder, [accept_op(runs=(run,))]) == {0}
        acting = asyncio.create_task(act())
        await _waits_for_a_lock(holder, "writer", acting)
        await holder.execute("COMMIT")
        return await acting, await _state(store, run.run_id)
    finally:
        await holder.close()


async def _accept_behind(backend: Backend, store: Any, write: Any) -> str:
    """`write(connection)` (`lanes.pause` or `lanes.resume`) held open on the test's
    connection while the store accepts a run, which must wait for its commit: the run's state
    then."""
    holder = await _holder(backend)
    try:
        await write(holder)
        run = sent_run()
        accepting = asyncio.create_task(store.accept(accept_op(runs=(run,))))
        await _waits_for_a_lock(holder, "accept", accepting)
        await holder.execute("COMMIT")
        await accepting
        return await _state(store, run.run_id)
    finally:
        await holder.close()


@pytest.mark.parametrize("pause", PAUSES, ids=[p.kind for p in PAUSES])
def test_a_pause_waits_for_an_accept_in_flight_and_holds_its_run(
    postgres: Backend, pause: Pause
) -> None:
    async def body(store: Any) -> None:
        assert await _accept_in_flight(postgres, store, lambda: store.pause(pause)) == (1, "held")
        assert await store.claim_runs(limit=10, now=NOW + 1) == []

    postgres.run(body)


@pytest.mark.parametrize("pause", PAUSES, ids=[p.kind for p in PAUSES])
def test_an_accept_waits_for_a_pause_in_flight_and_is_written_held(
    postgres: Backend, pause: Pause
) -> None:
    async def body(store: Any) -> None:
        assert await _accept_behind(postgres, store, lambda conn: lanes.pause(conn, pause)) == (
            "held"
        )
        assert await store.resume(pause.kind, pause.name) == 1

    postgres.run(body)


def test_a_resume_waits_for_an_accept_in_flight_and_releases_its_run(postgres: Backend) -> None:
    kind, name = PAUSES[2].kind, PAUSES[2].name

    async def body(store: Any) -> None:
        await store.pause(PAUSES[2])
        # the accept's run is written held (its trigger sees the pause), then released
        assert await _accept_in_flight(postgres, store, lambda: store.resume(kind, name)) == (
            1,
            "queued",
        )

    postgres.run(body)


def test_an_accept_waits_for_a_resume_in_flight_and_is_queued(postgres: Backend) -> None:
    kind, name = PAUSES[0].kind, PAUSES[0].name

    async def body(store: Any) -> None:
        await store.pause(PAUSES[0])
        state = await _accept_behind(postgres, store, lambda conn: lanes.resume(conn, kind, name))
        assert state == "queued"

    postgres.run(body)


def test_a_job_written_alone_has_a_transaction_of_its_own(postgres: Backend) -> None:
    """The writer commits the jobs before an `alone` one (a pause), runs it by itself, then
    the jobs after it: submitted together, three transactions, in order."""

    async def body(store: Any) -> None:
        def txid(*, alone: bool = False) -> Any:
            return store.write(lambda conn: conn.fetchval("SELECT txid_current()"), alone=alone)

        futures = [txid(), txid(), txid(alone=True), txid(), txid(alone=True), txid(alone=True)]
        a, b, c, d, e, f = await asyncio.gather(*futures)
        assert a == b < c < d < e < f

    postgres.run(body)


# --- a run going back to the queue (`hookwise.server.store.postgres.runtime`) -----------------


async def _claimed(store: Any) -> str:
    """A run of the paused lanes, claimed (`running`, lease until NOW + 660): its id."""
    run = sent_run()
    await store.accept(accept_op(runs=(run,)))
    assert [r.run_id for r in await store.claim_runs(limit=1, now=NOW)] == [run.run_id]
    return run.run_id


async def _back_behind(
    backend: Backend, store: Any, write: Any, back: Any, *, paused: Pause | None = None
) -> str:
    """A run claimed (then its lane `paused`, when given); `write(connection)` (`lanes.pause`
    or `lanes.resume`) held open on the test's connection while the store sets the run back in
    the queue (`back(store, run_id)`), which must wait for its commit: the run's state then."""
    run_id = await _claimed(store)
    if paused is not None:
        await store.pause(paused)
    holder = await _holder(backend)
    try:
        await write(holder)
        going = asyncio.create_task(back(store, run_id))
        await _waits_for_a_lock(holder, "writer", going)
        await holder.execute("COMMIT")
        await going
        return await _state(store, run_id)
    finally:
        await holder.close()


async def _requeue(store: Any, run_id: str) -> None:
    await store.requeue_runs([run_id])


async def _reclaim(store: Any, run_id: str) -> None:
    assert await store.recover_runs(max_attempts=5, now=NOW + 661, expired_only=True) == (1, 0)


async def _release(store: Any, run_id: str) -> None:
    assert await store.release_runs(agent_id=None, keep=[]) == 1


BACK = {"requeue": _requeue, "reclaim": _reclaim, "release": _release}


@pytest.mark.parametrize("pause", PAUSES, ids=[p.kind for p in PAUSES])
def test_a_requeue_waits_for_a_pause_in_flight_and_is_written_held(
    postgres: Backend, pause: Pause
) -> None:
    async def body(store: Any) -> None:
        state = await _back_behind(postgres, store, lambda conn: lanes.pause(conn, pause), _requeue)
        assert state == "held"
        assert await store.resume(pause.kind, pause.name) == 1

    postgres.run(body)


@pytest.mark.parametrize("way", list(BACK))
def test_every_way_back_waits_for_a_pause_in_flight_and_is_written_held(
    postgres: Backend, way: str
) -> None:
    async def body(store: Any) -> None:
        pause = PAUSES[0]
        state = await _back_behind(
            postgres, store, lambda conn: lanes.pause(conn, pause), BACK[way]
        )
        assert state == "held"

    postgres.run(body)


def test_a_requeue_waits_for_a_resume_in_flight_and_is_queued(postgres: Backend) -> None:
    kind, name = PAUSES[1].kind, PAUSES[1].name

    async def body(store: Any) -> None:
        state = await _back_behind(
            postgres,
            store,
            lambda conn: lanes.resume(conn, kind, name),
            _requeue,
            paused=PAUSES[1],
        )
        assert state == "queued"

    postgres.run(body)


def test_a_pause_waits_for_a_requeue_in_flight_and_holds_its_run(postgres: Backend) -> None:
    async def body(store: Any) -> None:
        run_id = await _claimed(store)
        holder = await _holder(postgres)
        try:
            await holder.execute(rt.REQUEUE_RUNS, [run_id])
            pausing = asyncio.create_task(store.pause(PAUSES[0]))
            await _waits_for_a_lock(holder, "writer", pausing)
            await holder.execute("COMMIT")
            assert await pausing == 1
        finally:
            await holder.close()
        assert await _state(store, run_id) == "held"

    postgres.run(body)
