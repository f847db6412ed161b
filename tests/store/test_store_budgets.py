"""The store contract for budgets, on every backend: `spend` sums the tokens (in and out) and
the cost of the model calls of one mapping or agent since a window's start, whatever their
outcome (a skipped call counts nothing: it has no tokens), and refuses any other column; an
operator's waiver is read back until it is replaced."""

from __future__ import annotations

import asyncio
import sqlite3

import asyncpg
import pytest

from tests.store.conftest import POSTGRES_URL, Backend
from tests.store.test_store_modelcalls import call


def test_spend_sums_tokens_and_cost_of_a_scope_since_the_window_start(backend: Backend) -> None:
    calls = [
        call("r1", 1, rule_id="m", input_tokens=10, output_tokens=5, cost=0.5, started_at=100.0),
        call("r2", 1, rule_id="m", input_tokens=7, output_tokens=None, cost=None, started_at=200.0),
        call("r3", 1, rule_id="other", input_tokens=1000, output_tokens=1, started_at=200.0),
        call("r4", 1, rule_id="m", outcome="skipped", started_at=300.0),
        call("r5", 1, rule_id="m", agent_id="second", output_tokens=3, cost=0.25, started_at=50.0),
    ]

    async def body(store) -> None:
        await store.record_model_calls(calls)
        assert await store.spend("rule_id", "m", since=0.0) == (25, 0.75)
        assert await store.spend("rule_id", "m", since=100.0) == (22, 0.5)
        assert await store.spend("rule_id", "m", since=150.0) == (7, 0.0)
        assert await store.spend("rule_id", "nothing", since=0.0) == (0, 0.0)
        assert await store.spend("agent_id", "main", since=0.0) == (1023, 0.5)
        assert await store.spend("agent_id", "second", since=0.0) == (3, 0.25)
        # a run in progress counts its own calls apart: its records are left out
        assert await store.spend("rule_id", "m", since=0.0, exclude="r1") == (10, 0.25)
        with pytest.raises(ValueError):
            await store.spend("owner_id; DROP TABLE runs", "m", since=0.0)

    backend.run(body)


def test_a_waiver_is_read_back_and_replaced(backend: Backend) -> None:
    async def body(store) -> None:
        assert await store.budget_waiver("agent", "main") is None
        await store.waive_budget("agent", "main", until=500.0, by="ops")
        await store.waive_budget("mapping", "main", until=900.0, by="ops")
        assert await store.budget_waiver("agent", "main") == 500.0
        await store.waive_budget("agent", "main", until=800.0, by="someone")
        assert await store.budget_waiver("agent", "main") == 800.0
        assert await store.budget_waiver("mapping", "main") == 900.0

    backend.run(body)


def exact(calls: list, column: str, name: str, since: float) -> tuple[int, float]:
    """The spend summed from the records themselves, as the slow query does."""
    mine = [c for c in calls if getattr(c, column) == name and c.started_at >= since]
    tokens = sum((c.input_tokens or 0) + (c.output_tokens or 0) for c in mine)
    return tokens, sum(c.cost or 0.0 for c in mine)


def test_spend_from_the_running_totals_is_exact_whatever_the_window_start(
    backend: Backend,
) -> None:
    # calls spread over five buckets of 60 s, several in one bucket, one on a boundary
    starts = [60_000.0, 60_010.5, 60_059.9, 60_060.0, 60_119.0, 60_150.0, 60_200.0, 60_299.5]
    calls = [
        call(
            f"r{i}",
            1,
            rule_id="m",
            input_tokens=i + 1,
            output_tokens=100,
            cost=0.25 * i,
            started_at=at,
        )
        for i, at in enumerate(starts)
    ]
    # windows that start on a boundary, inside a bucket, before and after every call
    sinces = [0.0, 60_000.0, 60_005.0, 60_059.9, 60_060.0, 60_061.0, 60_199.99, 60_299.5, 70_000.0]

    async def body(store) -> None:
        await store.record_model_calls(calls[:3])
        await store.record_model_calls(calls[3:])
        for since in sinces:
            for column, name in (("rule_id", "m"), ("agent_id", "main")):
                tokens, cost = await store.spend(column, name, since=since)
                want_tokens, want_cost = exact(calls, column, name, since)
                assert tokens == want_tokens, (column, since)
                assert cost == pytest.approx(want_cost), (column, since)

    backend.run(body)


def test_a_record_written_again_is_counted_once(backend: Backend) -> None:
    # a write tried again after it had committed (the store's answer was lost)
    first = call("r1", 1, rule_id="m", input_tokens=10, output_tokens=5, cost=0.5, started_at=500.0)

    async def body(store) -> None:
        await store.record_model_calls([first])
        await store.record_model_calls([first])
        assert await store.spend("rule_id", "m", since=0.0) == (15, 0.5)
        assert await store.spend("agent_id", "main", since=0.0) == (15, 0.5)

    backend.run(body)


def test_two_stores_recording_at_once_count_every_call(backend: Backend) -> None:
    async def body(a, b) -> None:
        async def record(store, prefix: str) -> None:
            for i in range(20):
                await store.record_model_calls(
                    [
                        call(
                            f"{prefix}{i}",
                            1,
                            rule_id="m",
                            input_tokens=3,
                            output_tokens=2,
                            cost=0.125,
                            started_at=1000.0 + i,
                        )
                    ]
                )

        await asyncio.gather(record(a, "a"), record(b, "b"))
        for store in (a, b):
            assert await store.spend("rule_id", "m", since=990.0) == (200, 5.0)
            assert await store.spend("agent_id", "main", since=1010.0) == (100, 2.5)

    backend.run(body, instances=2)


def forget_totals(backend: Backend) -> None:
    """Take the database back to before migration 0025's totals (its records kept), and so
    before 0026's senders."""
    undo_senders = (
        "DROP TRIGGER runs_held_when_paused; DROP INDEX model_calls_rule_sender_spend;"
        " DROP INDEX model_calls_agent_sender_spend;"
        " ALTER TABLE runs DROP COLUMN sender; ALTER TABLE model_calls DROP COLUMN sender;"
    )
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.path)
        conn.executescript(f"DROP TABLE budget_usage; {undo_senders} PRAGMA user_version = 24;")
        conn.close()
        return

    async def back() -> None:
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            await conn.execute(f'DROP TABLE "{backend.schema}".budget_usage')
            for table in ("runs", "model_calls"):
                await conn.execute(f'ALTER TABLE "{backend.schema}".{table} DROP COLUMN sender')
            await conn.execute(
                f'DELETE FROM "{backend.schema}".schema_migrations WHERE version IN (25, 26)'
            )
        finally:
            await conn.close()

    asyncio.run(back())


def test_the_migration_totals_the_records_stored_before_it(backend: Backend) -> None:
    calls = [
        call(
            f"r{i}",
            1,
            rule_id="m" if i % 2 else None,
            input_tokens=10 * i,
            output_tokens=1,
            cost=0.5 if i % 3 else None,
            started_at=7_000.0 + 25 * i,
        )
        for i in range(12)
    ]

    async def record(store) -> None:
        await store.record_model_calls(calls)

    backend.run(record)
    forget_totals(backend)

    async def check(store) -> None:
        for since in (0.0, 7_030.0, 7_100.0, 7_200.0):
            for column, name in (("rule_id", "m"), ("agent_id", "main")):
                tokens, cost = await store.spend(column, name, since=since)
                assert (tokens, cost) == pytest.approx(exact(calls, column, name, since))

    backend.run(check)


def test_the_running_totals_are_pruned_with_the_runs_horizon(backend: Backend) -> None:
    from hookwise.server.store.retention import TARGETS

    [target] = [t for t in TARGETS if t.table == "budget_usage"]
    assert target.key == "runs"
    calls = [
        call(f"r{at}", 1, rule_id="m", input_tokens=10, output_tokens=0, started_at=at)
        for at in (60.0, 120.0, 180.0, 600.0)
    ]

    async def body(store) -> None:
        await store.record_model_calls(calls)
        upto = await store.retention_boundary(target, 200.0)
        assert await store.prune_batch(target, upto=upto, cutoff=200.0, limit=10) == 6
        # what is left: the minute of 600 (its agent's and its mapping's)
        assert await store.spend("rule_id", "m", since=0.0) == (10, 0.0)
        assert await store.spend("agent_id", "main", since=0.0) == (10, 0.0)

    backend.run(body)


def test_a_senders_spend_and_the_top_senders_of_a_scope(backend: Backend) -> None:
    """Budgets by sender: each sender's calls are summed apart (exact, from the running totals
    and the first partial minute), per mapping and per agent; a heartbeat's call (no sender)
    counts for no sender; the top senders come from the totals' whole minutes."""
    by_rule = "rule_id || '/' || sender"
    by_agent = "agent_id || '/' || sender"
    calls = [
        call("a1", 1, rule_id="m", sender="github#0", input_tokens=100, cost=1.0, started_at=60.0),
        call("a2", 1, rule_id="m", sender="github#0", input_tokens=50, started_at=130.0),
        call("b1", 1, rule_id="m", sender="github#1", input_tokens=7, cost=0.5, started_at=125.0),
        call("c1", 1, rule_id="other", sender="github#0", input_tokens=1000, started_at=70.0),
        call("h1", 1, input_tokens=5000, started_at=90.0),  # a heartbeat's
    ]

    async def body(store) -> None:
        await store.record_model_calls(calls)
        assert await store.spend(by_rule, "m/github#0", since=0.0) == (150, 1.0)
        assert await store.spend(by_rule, "m/github#0", since=100.0) == (50, 0.0)
        assert await store.spend(by_rule, "m/github#1", since=0.0) == (7, 0.5)
        assert await store.spend(by_rule, "m/token", since=0.0) == (0, 0.0)
        assert await store.spend(by_agent, "main/github#0", since=65.0) == (1050, 0.0)
        # the mapping's own budget still counts every sender
        assert await store.spend("rule_id", "m", since=0.0) == (157, 1.5)
        assert await store.spend(by_rule, "m/github#0", since=0.0, exclude="a1") == (50, 0.0)
        top = await store.top_senders("mapping", "m", since=0.0, limit=10)
        assert top == [("github#0", 150, 1.0), ("github#1", 7, 0.5)]
        assert await store.top_senders("mapping", "m", since=0.0, limit=1) == [top[0]]
        agents = await store.top_senders("agent", "main", since=0.0, limit=10)
        assert [s for s, _, _ in agents] == ["github#0", "github#1"]

    backend.run(body)


def forget_senders(backend: Backend) -> None:
    """Take the database back to before migration 0026 (its records kept)."""
    if backend.name == "sqlite":
        conn = sqlite3.connect(backend.path)
        conn.executescript(
            "DROP INDEX model_calls_rule_sender_spend; DROP INDEX model_calls_agent_sender_spend;"
            " DROP TRIGGER runs_held_when_paused;"
            " ALTER TABLE runs DROP COLUMN sender; ALTER TABLE model_calls DROP COLUMN sender;"
            " DELETE FROM budget_usage WHERE kind LIKE '%-sender'; PRAGMA user_version = 25;"
        )
        conn.close()
        return

    async def back() -> None:
        conn = await asyncpg.connect(POSTGRES_URL)
        schema = f'"{backend.schema}"'
        try:
            for table in ("runs", "model_calls"):
                await conn.execute(f"ALTER TABLE {schema}.{table} DROP COLUMN sender")
            await conn.execute(f"DELETE FROM {schema}.budget_usage WHERE kind LIKE '%-sender'")
            await conn.execute(f"DELETE FROM {schema}.schema_migrations WHERE version = 26")
        finally:
            await conn.close()

    asyncio.run(back())


def test_the_senders_migration_makes_earlier_runs_the_sender_none(backend: Backend) -> None:
    """Migration 0026: the calls of runs stored before it are the sender `none` (with their
    running totals), a heartbeat's are nobody's; a run from before it is held by a hold of
    the sender `none` of its mapping, and goes back to the queue when it is lifted."""
    from hookwise.server.store.lanes import Pause
    from tests.store.support import add_runs

    async def before(store) -> list[str]:
        [run_id] = await add_runs(store, 1)
        await store.record_model_calls(
            [
                call(run_id, 1, rule_id="rule-1", input_tokens=40, cost=0.5, started_at=120.0),
                call("hb-1", 1, input_tokens=900, started_at=125.0),
            ]
        )
        return [run_id]

    [run_id] = backend.run(before)
    forget_senders(backend)

    async def after(store) -> None:
        by_rule, by_agent = "rule_id || '/' || sender", "agent_id || '/' || sender"
        for since in (0.0, 121.0):
            expected = (40, 0.5) if since == 0.0 else (0, 0.0)
            assert await store.spend(by_rule, "rule-1/none", since=since) == expected
            assert await store.spend(by_agent, "main/none", since=since) == expected
        assert await store.top_senders("agent", "main", since=0.0, limit=5) == [("none", 40, 0.5)]
        assert await store.pause(Pause("mapping-sender", "rule-1/none", "budget", 1.0)) == 1
        assert (await store.get_run(run_id)).state == "held"
        assert await store.resume("mapping-sender", "rule-1/none") == 1
        assert (await store.get_run(run_id)).state == "queued"
        # a run accepted while its sender is held is written held (the trigger)
        await store.pause(Pause("mapping-sender", "rule-1/none", "budget", 2.0))
        [later] = await add_runs(store, 1)
        assert (await store.get_run(later)).state == "held"
        await store.pause(Pause("mapping-sender", "rule-1/github#0", "budget", 2.0))
        assert await store.resume("mapping-sender", "rule-1/none") == 2

    backend.run(after)


def test_a_release_waits_for_a_run_accepted_under_the_hold(backend: Backend) -> None:
    """PostgreSQL: a run accepted while its sender is held is written `held` by the trigger; a
    release committed between that write and the accept's commit must not miss it (it would
    stay held with no pause left to lift). The release waits for the accept, then sends it back.
    (SQLite has one writer: an accept and a release never overlap.)"""
    if backend.name != "postgres":
        pytest.skip("one writer on SQLite: nothing overlaps")
    from hookwise.server.store.lanes import Pause
    from tests.store.support import add_runs, eventually

    async def body(store) -> None:
        [first] = await add_runs(store, 1)
        assert await store.pause(Pause("mapping-sender", "rule-1/none", "budget", 1.0)) == 1
        accepting = await asyncpg.connect(POSTGRES_URL)
        watch = await asyncpg.connect(POSTGRES_URL)
        try:
            await accepting.execute(f'SET search_path TO "{backend.schema}"')
            tx = accepting.transaction()
            await tx.start()
            # an accept under way: its run written (held by the trigger), not committed yet
            await accepting.execute(
                "INSERT INTO runs (run_id, session_key, name, message, rule_id, wake_mode,"
                " deliver, channel, agent_id, created_at) SELECT 'later', 'hook:later', name,"
                " message, rule_id, wake_mode, deliver, channel, agent_id, created_at"
                " FROM runs WHERE run_id = $1",
                first,
            )
            release = asyncio.ensure_future(store.resume("mapping-sender", "rule-1/none"))
            pid = accepting.get_server_pid()

            async def release_waits_or_is_done() -> bool:
                waiting = await watch.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                    pid,
                )
                return release.done() or waiting > 0

            await eventually(release_waits_or_is_done, what="the release to wait or be done")
            await tx.commit()
            released = await release
        finally:
            await accepting.close()
            await watch.close()
        assert (await store.get_run("later")).state == "queued"
        assert released == 2

    backend.run(body)
