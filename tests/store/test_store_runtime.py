"""The store contract for the runtime, on every backend: claiming, leasing, recovering and
finishing runs; heartbeats and the events they consume; transcripts; the last route; deliveries."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from hookwise.server.runtime.slots import Slots
from hookwise.server.store.base import NewEvent
from hookwise.server.store.records import (
    HeartbeatOutcome,
    HeartbeatRecord,
    NewDelivery,
    NewTurn,
    Route,
    RunOutcome,
    Turn,
)
from hookwise.server.store.toolcalls import ToolCallRecord
from tests.store.conftest import Backend
from tests.store.support import (
    NOW,
    accept_op,
    add_delivery,
    add_runs,
    new_delivery,
    new_event,
    new_run,
)

# --- claiming and leases -------------------------------------------------------------------------


def test_claim_runs_takes_the_oldest_queued_runs_up_to_the_limit(backend: Backend) -> None:
    async def body(store: Any) -> None:
        ids = await add_runs(store, 3)
        claimed = await store.claim_runs(limit=2, now=NOW + 1)
        assert [r.run_id for r in claimed] == ids[:2]
        assert all(r.state == "running" and r.attempts == 1 for r in claimed)
        assert all(r.started_at == NOW + 1 for r in claimed)
        rest = await store.claim_runs(limit=5, now=NOW + 2)
        assert [r.run_id for r in rest] == ids[2:]
        assert await store.claim_runs(limit=5, now=NOW + 3) == []
        assert not await store.has_queued_runs()

    backend.run(body)


# --- session lanes --------------------------------------------------------------------------------


async def _session_runs(store: Any, sessions: list[str], *, now: float = NOW) -> list[str]:
    """One run per entry of `sessions` (its session key), accepted in that order; their ids."""
    runs = tuple(new_run(session_key=key) for key in sessions)
    await store.accept(accept_op(runs=runs, now=now))
    return [r.run_id for r in runs]


def test_a_claim_takes_one_run_per_session_the_oldest(backend: Backend) -> None:
    async def body(store: Any) -> None:
        a1, b1, a2, c1, b2 = await _session_runs(store, ["a", "b", "a", "c", "b"])
        claimed = await store.claim_runs(limit=10, now=NOW + 1)
        assert [r.run_id for r in claimed] == [a1, b1, c1]
        assert await store.claim_runs(limit=10, now=NOW + 2) == []
        await store.finish_run(RunOutcome(run_id=b1, state="succeeded", finished_at=NOW + 3))
        assert [r.run_id for r in await store.claim_runs(limit=10, now=NOW + 4)] == [b2]
        await store.finish_run(RunOutcome(run_id=a1, state="failed", finished_at=NOW + 5))
        assert [r.run_id for r in await store.claim_runs(limit=10, now=NOW + 6)] == [a2]

    backend.run(body)


def test_a_session_waiting_takes_no_slot_from_another(backend: Backend) -> None:
    async def body(store: Any) -> None:
        busy = await _session_runs(store, ["busy"] * 5)
        other = await _session_runs(store, ["other"])
        first = await store.claim_runs(limit=1, now=NOW + 1)
        assert [r.run_id for r in first] == busy[:1]
        # the four waiting runs of "busy" are older, yet the next slot goes to "other"
        assert [r.run_id for r in await store.claim_runs(limit=1, now=NOW + 2)] == other

    backend.run(body)


def test_a_run_put_back_keeps_its_session_and_its_place(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first, second = await _session_runs(store, ["s", "s"])
        await store.claim_runs(limit=5, now=NOW)
        await store.requeue_runs([first])  # a process stopped during the run
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 1)] == [first]
        # a dead process's lease expires: its run comes back first, the session still serial
        assert await store.recover_runs(max_attempts=5, now=NOW + 10_000) == (1, 0)
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 10_001)] == [first]
        assert await store.claim_runs(limit=5, now=NOW + 10_002) == []
        await store.finish_run(RunOutcome(run_id=first, state="succeeded", finished_at=NOW + 1))
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 10_003)] == [second]

    backend.run(body)


def test_two_stores_never_run_two_runs_of_one_session_at_once(backend: Backend) -> None:
    async def body(one: Any, two: Any) -> None:
        sessions = [f"s{i % 7}" for i in range(70)]
        ids = await _session_runs(one, sessions)
        order = {run_id: n for n, run_id in enumerate(ids)}
        started: dict[str, list[str]] = {}
        running: dict[str, str] = {}

        async def lane(store: Any) -> None:
            t = NOW
            while True:
                t += 1
                claimed = await store.claim_runs(limit=3, now=t)
                for run in claimed:
                    assert run.session_key not in running, (run.session_key, running)
                    running[run.session_key] = run.run_id
                    started.setdefault(run.session_key, []).append(run.run_id)
                await asyncio.sleep(0)
                for run in claimed:
                    # forgotten here before the store frees the session: once `finish_run`
                    # commits, the other lane may rightly claim the session's next run
                    del running[run.session_key]
                    await store.finish_run(
                        RunOutcome(run_id=run.run_id, state="succeeded", finished_at=t)
                    )
                if not claimed and not await store.has_queued_runs():
                    return

        await asyncio.gather(lane(one), lane(two))
        assert sum(len(v) for v in started.values()) == 70
        for runs in started.values():
            assert runs == sorted(runs, key=order.__getitem__)

    backend.run(body, instances=2)


def test_a_claim_limited_by_a_function_takes_what_it_returns_when_the_claim_runs(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        ids = await add_runs(store, 4)
        calls: list[int] = []

        def free_slots() -> int:
            calls.append(len(calls))
            return 0 if len(calls) == 1 else 3

        assert await store.claim_runs(limit=free_slots, now=NOW + 1) == []
        assert calls == [0]  # called once per claim
        assert (await store.get_run(ids[0])).state == "queued"  # nothing taken
        claimed = await store.claim_runs(limit=free_slots, now=NOW + 2)
        assert [r.run_id for r in claimed] == ids[:3] and calls == [0, 1]
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 3)] == ids[3:]

    backend.run(body)


def _read_a_missing_table(conn: Any) -> Any:
    """A write job that fails (module-level: SQLite's writer process receives it pickled)."""
    sql = "SELECT * FROM no_such_table"
    return conn.fetch(sql) if hasattr(conn, "fetch") else conn.execute(sql)


def test_a_claim_the_writer_runs_again_holds_the_slots_it_took_and_no_more(
    backend: Backend,
) -> None:
    """PostgreSQL's writer runs a batch again, a savepoint per job, when one of its jobs failed:
    a claim in that batch executes twice. Its grant takes the free slots once and answers the
    same number again, so the claim that commits takes its runs and no slot is lost."""

    async def body(store: Any) -> None:
        ids = await add_runs(store, 4)
        slots = Slots(3)
        grant = slots.grant()
        calls: list[int] = []

        def limit() -> int:
            calls.append(slots.free)
            return grant()

        # one batch, the claim first: its job is queued, then the failing one, before the
        # writer wakes up
        claim = asyncio.ensure_future(store.claim_runs(limit=limit, now=NOW + 1))
        await asyncio.sleep(0)
        failing = store._writer.submit(_read_a_missing_table)
        claimed = await claim
        with pytest.raises(Exception, match="no_such_table"):
            await failing
        # the premise: PostgreSQL ran the claim twice (the second time with no slot free left)
        assert calls == ([3, 0] if backend.name == "postgres" else [3])
        assert [r.run_id for r in claimed] == ids[:3]
        assert grant.taken == 3 and slots.free == 0
        assert [(await store.get_run(i)).state for i in ids] == ["running"] * 3 + ["queued"]
        for _ in claimed:  # the runs end: every slot comes back
            slots.give()
        assert slots.free == 3

    backend.run(body)


def test_a_run_is_leased_for_its_timeout_plus_the_lease(backend: Backend) -> None:
    async def body(store: Any) -> None:
        (short,) = await add_runs(store, 1, timeout=30.0)
        (default,) = await add_runs(store, 1)
        await store.claim_runs(limit=2, now=NOW, lease=60.0, default_timeout=600.0)
        # short: leased until NOW + 90; default: until NOW + 660
        assert await store.recover_runs(max_attempts=5, now=NOW + 89, expired_only=True) == (0, 0)
        assert await store.recover_runs(max_attempts=5, now=NOW + 91, expired_only=True) == (1, 0)
        assert (await store.get_run(short)).state == "queued"
        assert (await store.get_run(default)).state == "running"
        assert await store.recover_runs(max_attempts=5, now=NOW + 659, expired_only=True) == (0, 0)
        assert await store.recover_runs(max_attempts=5, now=NOW + 661, expired_only=True) == (1, 0)
        assert (await store.get_run(default)).state == "queued"

    backend.run(body)


def test_recover_runs_requeues_every_running_run_and_fails_those_out_of_attempts(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        tired, fresh = await add_runs(store, 2)
        await store.claim_runs(limit=1, now=NOW)  # tired: attempt 1
        assert await store.recover_runs(max_attempts=5, now=NOW + 1) == (1, 0)
        await store.claim_runs(limit=2, now=NOW + 2)  # tired: attempt 2, fresh: attempt 1
        assert await store.recover_runs(max_attempts=2, now=NOW + 3) == (1, 1)
        failed, requeued = await store.get_run(tired), await store.get_run(fresh)
        assert (failed.state, failed.attempts, failed.finished_at) == ("failed", 2, NOW + 3)
        assert failed.error == "gave up after 2 attempts: the gateway stopped during the run"
        assert (requeued.state, requeued.attempts, requeued.started_at) == ("queued", 1, None)
        assert await store.recover_runs(max_attempts=2, now=NOW + 4) == (0, 0)

    backend.run(body)


def test_requeue_runs_gives_the_attempt_back_and_touches_only_running_runs(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        running, done, queued = await add_runs(store, 3)
        await store.claim_runs(limit=2, now=NOW)
        await store.finish_run(RunOutcome(run_id=done, state="succeeded", finished_at=NOW + 1))
        await store.requeue_runs([running, done, queued])
        r = await store.get_run(running)
        assert (r.state, r.attempts, r.started_at) == ("queued", 0, None)
        assert (await store.get_run(done)).state == "succeeded"
        assert (await store.get_run(queued)).state == "queued"
        again = await store.claim_runs(limit=5, now=NOW + 2)
        assert [x.run_id for x in again] == [running, queued]

    backend.run(body)


# --- finishing runs ------------------------------------------------------------------------------


def test_finish_run_writes_the_state_the_transcript_the_summary_and_the_delivery(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        (run_id,) = await add_runs(store, 1)
        await store.claim_runs(limit=1, now=NOW)
        delivery = new_delivery(run_id=run_id)
        summary = NewEvent("sum-1", "main", "run finished", "hook:test", "now", trusted=True)
        await store.finish_run(
            RunOutcome(
                run_id=run_id,
                state="succeeded",
                finished_at=NOW + 5,
                reply="done",
                model_used="echo/echo",
                input_tokens=12,
                output_tokens=34,
                turns=(
                    NewTurn("hook:test", "user", "do it", run_id),
                    NewTurn("hook:test", "assistant", "done", run_id),
                ),
                summary=summary,
                delivery=delivery,
            )
        )
        run = await store.get_run(run_id)
        assert (run.state, run.finished_at, run.reply, run.error) == (
            "succeeded",
            NOW + 5,
            "done",
            None,
        )
        assert (run.model_used, run.input_tokens, run.output_tokens) == ("echo/echo", 12, 34)
        assert await store.session_turns("hook:test", limit=10) == [
            Turn("user", "do it"),
            Turn("assistant", "done"),
        ]
        (event,) = await store.pending_events("main", limit=10)
        assert (event.event_id, event.text, event.trusted, event.created_at) == (
            "sum-1",
            "run finished",
            True,
            NOW + 5,
        )
        (d,) = (await store.list_deliveries(limit=10, cursor=None, run_id=run_id)).items
        assert (d.delivery_id, d.state, d.channel, d.to, d.text) == (
            delivery.delivery_id,
            "pending",
            "slack",
            "C123",
            "the reply",
        )
        assert (d.attempts, d.message_ids, d.created_at, d.next_attempt_at) == (
            0,
            (),
            NOW + 5,
            NOW + 5,
        )
        # finished: no longer leased, nothing to recover
        assert await store.recover_runs(max_attempts=5, now=NOW + 10_000) == (0, 0)

    backend.run(body)


def test_finishing_again_writes_once_and_only_while_the_run_runs(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first, second = await add_runs(store, 2)
        await store.claim_runs(limit=2, now=NOW)

        def outcome(run_id: str) -> RunOutcome:
            return RunOutcome(
                run_id=run_id,
                state="succeeded",
                finished_at=NOW + 5,
                reply="done",
                turns=(NewTurn(f"s:{run_id}", "assistant", "done", run_id),),
                summary=NewEvent(f"sum-{run_id}", "main", "finished", "hook:test", "now"),
                delivery=new_delivery(run_id=run_id),
            )

        # the first finish was committed and its answer lost: the second writes nothing
        assert await store.finish_run(outcome(first)) is True
        assert await store.finish_run(outcome(first), again=True) is False
        # the first finish was never committed: the second writes everything
        assert await store.finish_run(outcome(second), again=True) is True
        for run_id in (first, second):
            assert (await store.get_run(run_id)).state == "succeeded"
            assert await store.session_turns(f"s:{run_id}", limit=10) == [Turn("assistant", "done")]
            page = await store.list_deliveries(limit=10, cursor=None, run_id=run_id)
            assert len(page.items) == 1
        assert len(await store.pending_events("main", limit=10)) == 2

    backend.run(body)


def test_a_run_keeps_its_callback_url_and_its_ending_writes_the_callback(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        with_url = attrs.evolve(new_run(), callback_url="https://ci.example.com/hook-result")
        plain, again = new_run(), attrs.evolve(new_run(), callback_url="https://x.example/cb")
        # the group-committed path (no key) and the read-first path (a key) both keep it
        await store.accept(accept_op(runs=(with_url, plain)))
        await store.accept(accept_op(runs=(again,), key="k-callback"))
        assert (await store.get_run(with_url.run_id)).callback_url == with_url.callback_url
        assert (await store.get_run(plain.run_id)).callback_url is None
        assert (await store.get_run(again.run_id)).callback_url == again.callback_url
        await store.claim_runs(limit=3, now=NOW)

        def outcome(run_id: str, to: str) -> RunOutcome:
            callback = attrs.evolve(
                new_delivery(run_id=run_id, fallback_channel=None),
                channel="callback:rule-1",
                to=to,
                text='{"type": "run.succeeded"}',
            )
            return RunOutcome(
                run_id=run_id,
                state="succeeded",
                finished_at=NOW + 5,
                reply="done",
                delivery=new_delivery(run_id=run_id),
                signed=(callback,),
            )

        assert await store.finish_run(outcome(with_url.run_id, with_url.callback_url)) is True
        assert await store.finish_run(outcome(again.run_id, "https://x.example/cb"), again=True)
        for run, to in ((with_url, with_url.callback_url), (again, "https://x.example/cb")):
            page = await store.list_deliveries(limit=10, cursor=None, run_id=run.run_id)
            by_channel = {d.channel: d for d in page.items}
            assert set(by_channel) == {"slack", "callback:rule-1"}
            d = by_channel["callback:rule-1"]
            assert (d.state, d.to, d.text) == ("pending", to, '{"type": "run.succeeded"}')

    backend.run(body)


def test_an_accepted_notification_is_a_pending_delivery_with_no_run(backend: Backend) -> None:
    async def body(store: Any) -> None:
        plain = attrs.evolve(new_delivery(fallback_channel=None), text="disk full")
        keyed = attrs.evolve(new_delivery(fallback_channel=None), to=None)
        await store.accept(attrs.evolve(accept_op(), deliveries=(plain,)))
        await store.accept(attrs.evolve(accept_op(key="k-notify"), deliveries=(keyed,)))
        # a replay of the key writes nothing more
        await store.accept(attrs.evolve(accept_op(key="k-notify"), deliveries=(keyed,)))
        claimed = await store.claim_deliveries(limit=10, now=NOW + 1, lease=60)
        by_id = {d.delivery_id: d for d in claimed}
        assert set(by_id) == {plain.delivery_id, keyed.delivery_id}
        assert (by_id[plain.delivery_id].text, by_id[plain.delivery_id].run_id) == (
            "disk full",
            None,
        )
        assert by_id[keyed.delivery_id].to is None and by_id[keyed.delivery_id].state == "pending"

    backend.run(body)


def test_release_runs_puts_back_running_runs_nobody_executes(backend: Backend) -> None:
    async def body(store: Any) -> None:
        kept, lost, queued = await add_runs(store, 3)
        await store.claim_runs(limit=2, now=NOW)
        assert await store.release_runs(agent_id="other", keep=[]) == 0
        assert await store.release_runs(agent_id=None, keep=[kept]) == 1
        k, x, q = [await store.get_run(r) for r in (kept, lost, queued)]
        assert (k.state, x.state, x.attempts, x.started_at, q.state) == (
            "running",
            "queued",
            0,
            None,
            "queued",
        )

    backend.run(body)


def test_a_failed_run_records_its_error(backend: Backend) -> None:
    async def body(store: Any) -> None:
        (run_id,) = await add_runs(store, 1)
        await store.claim_runs(limit=1, now=NOW)
        await store.finish_run(
            RunOutcome(run_id=run_id, state="failed", finished_at=NOW + 1, error="model down")
        )
        run = await store.get_run(run_id)
        assert (run.state, run.error, run.reply) == ("failed", "model down", None)
        assert await store.pending_events("main", limit=10) == []
        assert (await store.list_deliveries(limit=10, cursor=None)).items == []

    backend.run(body)


# --- heartbeats ----------------------------------------------------------------------------------


def heartbeat(
    event_ids: tuple[str, ...], *, state: str, hb: str, at: float = NOW
) -> HeartbeatOutcome:
    return HeartbeatOutcome(
        heartbeat_id=hb,
        reason="wake",
        state=state,
        event_ids=event_ids,
        requested_at=at - 1,
        started_at=at,
        finished_at=at + 2,
        reply="HEARTBEAT_OK" if state == "succeeded" else None,
        error=None if state == "succeeded" else "boom",
        acknowledged=state == "succeeded",
        model_used="echo/echo",
        turns=(NewTurn("main", "assistant", f"reply of {hb}"),),
    )


def test_a_heartbeat_consumes_the_events_it_names_and_a_failed_one_names_none(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        a, b, c = new_event(text="a"), new_event(text="b"), new_event(text="c")
        await store.accept(accept_op(events=(a, b, c)))
        await store.finish_heartbeat(heartbeat((), state="failed", hb="hb-1"))
        assert [e.text for e in await store.pending_events("main", limit=10)] == ["a", "b", "c"]
        await store.finish_heartbeat(
            heartbeat((a.event_id, b.event_id), state="succeeded", hb="hb-2")
        )
        assert [e.text for e in await store.pending_events("main", limit=10)] == ["c"]
        listed = (await store.list_events("main", limit=10, cursor=None)).items
        assert [(e.text, e.consumed_at) for e in listed] == [
            ("c", None),
            ("b", NOW + 2),
            ("a", NOW + 2),
        ]
        assert await store.session_turns("main", limit=10) == [
            Turn("assistant", "reply of hb-1"),
            Turn("assistant", "reply of hb-2"),
        ]

    backend.run(body)


def test_a_heartbeat_written_started_is_replaced_by_its_outcome(backend: Backend) -> None:
    """Before its first tool call a heartbeat is written `started`, consuming its events; its
    outcome then replaces that row (one row, in its place); the events stay consumed."""

    async def body(store: Any) -> None:
        a, b = new_event(text="a"), new_event(text="b")
        await store.accept(accept_op(events=(a, b)))
        started = attrs.evolve(
            heartbeat((a.event_id,), state="failed", hb="hb-t"),
            state="started",
            error="did not finish",
            turns=(),
            finished_at=NOW + 1,
        )
        await store.finish_heartbeat(started)
        assert [e.text for e in await store.pending_events("main", limit=10)] == ["b"]
        [row] = await store.list_heartbeats(limit=10)
        assert (row.state, row.events, row.error) == ("started", 1, "did not finish")
        await store.finish_heartbeat(heartbeat((a.event_id,), state="failed", hb="hb-t"))
        [row] = await store.list_heartbeats(limit=10)
        assert (row.heartbeat_id, row.state, row.error, row.events) == ("hb-t", "failed", "boom", 1)
        assert (row.started_at, row.finished_at) == (NOW, NOW + 2)
        assert [e.text for e in await store.pending_events("main", limit=10)] == ["b"]
        assert await store.session_turns("main", limit=10) == [Turn("assistant", "reply of hb-t")]

    backend.run(body)


def test_the_tool_calls_of_several_runs_or_heartbeats_in_one_read(backend: Backend) -> None:
    async def body(store: Any) -> None:
        def call(owner: str, seq: int, outcome: str = "ok") -> ToolCallRecord:
            return ToolCallRecord(owner, seq, "t", f"tool{seq}", outcome, NOW + seq)

        await store.record_tool_calls([call("hb-1", 2, "started"), call("hb-1", 1), call("r", 1)])
        await store.record_tool_calls([call("hb-1", 2)])  # the outcome replaces the row
        found = await store.tool_calls_of(["hb-1", "other", "r"])
        assert sorted((c.run_id, c.seq, c.outcome) for c in found) == [
            ("hb-1", 1, "ok"),
            ("hb-1", 2, "ok"),
            ("r", 1, "ok"),
        ]
        assert [c.seq for c in found if c.run_id == "hb-1"] == [1, 2]
        assert await store.tool_calls_of([]) == []

    backend.run(body)


def test_list_heartbeats_newest_first_with_every_field(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(3):
            await store.finish_heartbeat(
                heartbeat(("x", "y"), state="succeeded", hb=f"hb-{i}", at=NOW + i)
            )
        listed = await store.list_heartbeats(limit=2)
        assert listed == [
            HeartbeatRecord(
                "hb-2",
                "wake",
                "succeeded",
                2,
                NOW + 1,
                NOW + 2,
                NOW + 4,
                "HEARTBEAT_OK",
                None,
                True,
                "echo/echo",
            ),
            HeartbeatRecord(
                "hb-1",
                "wake",
                "succeeded",
                2,
                NOW,
                NOW + 1,
                NOW + 3,
                "HEARTBEAT_OK",
                None,
                True,
                "echo/echo",
            ),
        ]

    backend.run(body)


def test_a_heartbeat_writes_its_delivery(backend: Backend) -> None:
    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        (d,) = (await store.list_deliveries(limit=10, cursor=None)).items
        assert d.delivery_id == delivery_id and d.heartbeat_id is not None and d.run_id is None
        assert [h.heartbeat_id for h in await store.list_heartbeats(limit=5)] == [d.heartbeat_id]

    backend.run(body)


def test_pending_events_are_oldest_first_up_to_the_limit(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(4):
            await store.accept(
                accept_op(events=(new_event(text=f"e{i}"), new_event(session="other")))
            )
        assert [e.text for e in await store.pending_events("main", limit=3)] == ["e0", "e1", "e2"]

    backend.run(body)


def test_pending_events_are_read_page_by_page_after_a_seq(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for i in range(5):
            await store.accept(accept_op(events=(new_event(text=f"e{i}"),)))
        first = await store.pending_events("main", limit=2)
        second = await store.pending_events("main", limit=2, after=first[-1].seq)
        rest = await store.pending_events("main", limit=10, after=second[-1].seq)
        assert [e.text for e in first + second + rest] == ["e0", "e1", "e2", "e3", "e4"]

    backend.run(body)


# --- transcripts and routes ----------------------------------------------------------------------


def test_session_turns_are_the_last_ones_oldest_first(backend: Backend) -> None:
    async def body(store: Any) -> None:
        turns = tuple(
            NewTurn("s1", "user" if i % 2 == 0 else "assistant", f"t{i}") for i in range(5)
        )
        await store.finish_heartbeat(
            HeartbeatOutcome("hb", "wake", "succeeded", (), None, NOW, NOW, turns=turns)
        )
        await store.finish_heartbeat(
            HeartbeatOutcome(
                "hb2",
                "wake",
                "succeeded",
                (),
                None,
                NOW,
                NOW,
                turns=(NewTurn("s2", "user", "other"),),
            )
        )
        assert await store.session_turns("s1", limit=3) == [
            Turn("user", "t2"),
            Turn("assistant", "t3"),
            Turn("user", "t4"),
        ]
        assert await store.session_turns("nobody", limit=3) == []

    backend.run(body)


def test_the_last_route_is_set_replaced_and_kept_when_only_if_unset(backend: Backend) -> None:
    async def body(store: Any) -> None:
        assert await store.last_route("main") is None
        await store.set_last_route("main", Route("slack", "C1"), now=NOW, only_if_unset=True)
        assert await store.last_route("main") == Route("slack", "C1")
        await store.set_last_route("main", Route("discord", "D1"), now=NOW, only_if_unset=True)
        assert await store.last_route("main") == Route("slack", "C1")
        await store.set_last_route("main", Route("discord", "D1"), now=NOW)
        assert await store.last_route("main") == Route("discord", "D1")
        assert await store.last_route("other") is None

    backend.run(body)


def test_a_route_without_a_recipient_is_no_route(backend: Backend) -> None:
    async def body(store: Any) -> None:
        await store.set_last_route("main", Route("slack", ""), now=NOW)
        assert await store.last_route("main") is None

    backend.run(body)


# --- deliveries ----------------------------------------------------------------------------------


def test_claim_deliveries_takes_due_pending_ones_in_due_order_and_leases_them(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        late = await add_delivery(store, at=NOW + 50)
        first = await add_delivery(store, at=NOW)
        second = await add_delivery(store, at=NOW + 1)
        await add_delivery(store, at=NOW, state="skipped")
        claimed = await store.claim_deliveries(limit=5, now=NOW + 10, lease=30.0)
        assert [d.delivery_id for d in claimed] == [first, second]
        assert all(d.attempts == 1 and d.updated_at == NOW + 10 for d in claimed)
        # leased until NOW + 40: nobody else gets them before
        assert [
            d.delivery_id for d in await store.claim_deliveries(limit=5, now=NOW + 39, lease=30.0)
        ] == []
        again = await store.claim_deliveries(limit=1, now=NOW + 40, lease=30.0)
        assert [(d.delivery_id, d.attempts) for d in again] == [(first, 2)]
        rest = await store.claim_deliveries(limit=5, now=NOW + 60, lease=30.0)
        assert sorted(d.delivery_id for d in rest) == sorted([second, late])

    backend.run(body)


def test_a_retry_records_the_error_and_message_ids_and_releases_the_lease(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        await store.claim_deliveries(limit=1, now=NOW, lease=300.0)
        await store.update_delivery(
            delivery_id,
            state="pending",
            now=NOW + 1,
            last_error="429 slow down",
            message_ids=("m1", "m2"),
            next_attempt_at=NOW + 20,
        )
        assert await store.next_delivery_due() == NOW + 20
        assert await store.claim_deliveries(limit=1, now=NOW + 19, lease=300.0) == []
        (d,) = await store.claim_deliveries(limit=1, now=NOW + 20, lease=300.0)
        assert (d.state, d.attempts, d.last_error, d.message_ids) == (
            "pending",
            2,
            "429 slow down",
            ("m1", "m2"),
        )
        await store.update_delivery(
            delivery_id, state="pending", now=NOW + 21, next_attempt_at=NOW + 30
        )
        (kept,) = (await store.list_deliveries(limit=1, cursor=None)).items
        assert (kept.last_error, kept.message_ids, kept.updated_at) == (
            "429 slow down",
            ("m1", "m2"),
            NOW + 21,
        )

    backend.run(body)


def test_a_sent_delivery_is_never_changed_again(backend: Backend) -> None:
    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        await store.claim_deliveries(limit=1, now=NOW, lease=30.0)
        await store.update_delivery(delivery_id, state="sent", now=NOW + 1, message_ids=("m1",))
        await store.update_delivery(
            delivery_id,
            state="failed",
            now=NOW + 2,
            last_error="late",
            channel="discord",
            reset=True,
        )
        (d,) = (await store.list_deliveries(limit=1, cursor=None)).items
        assert (d.state, d.message_ids, d.last_error, d.channel, d.updated_at, d.attempts) == (
            "sent",
            ("m1",),
            None,
            "slack",
            NOW + 1,
            1,
        )
        assert await store.next_delivery_due() is None

    backend.run(body)


def test_a_fallback_resets_the_attempts_the_message_ids_and_the_channel(backend: Backend) -> None:
    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        await store.claim_deliveries(limit=1, now=NOW, lease=30.0)
        await store.update_delivery(delivery_id, state="pending", now=NOW + 1, message_ids=("m1",))
        await store.claim_deliveries(limit=1, now=NOW + 1, lease=30.0)
        await store.update_delivery(
            delivery_id,
            state="pending",
            now=NOW + 2,
            last_error="slack: gone; falling back to discord",
            next_attempt_at=NOW + 2,
            channel="discord",
            to="D9",
            fallback_channel="",
            reset=True,
        )
        (d,) = (await store.list_deliveries(limit=1, cursor=None)).items
        assert (d.channel, d.to, d.fallback_channel, d.attempts, d.message_ids) == (
            "discord",
            "D9",
            None,
            0,
            (),
        )
        assert d.last_error == "slack: gone; falling back to discord"
        (again,) = await store.claim_deliveries(limit=1, now=NOW + 2, lease=30.0)
        assert (again.delivery_id, again.attempts, again.channel) == (delivery_id, 1, "discord")

    backend.run(body)


def test_a_failed_delivery_keeps_its_fallback_and_is_not_due(backend: Backend) -> None:
    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        await store.update_delivery(
            delivery_id, state="failed", now=NOW + 1, last_error="no", message_ids=("m1",)
        )
        (d,) = (await store.list_deliveries(limit=1, cursor=None, state="failed")).items
        assert (d.fallback_channel, d.message_ids, d.last_error) == ("discord", ("m1",), "no")
        assert await store.claim_deliveries(limit=1, now=NOW + 100, lease=30.0) == []

    backend.run(body)


def test_next_delivery_due_is_the_earliest_pending_one(backend: Backend) -> None:
    async def body(store: Any) -> None:
        assert await store.next_delivery_due() is None
        await add_delivery(store, at=NOW + 7)
        await add_delivery(store, at=NOW + 3)
        await add_delivery(store, at=NOW + 1, state="skipped")
        assert await store.next_delivery_due() == NOW + 3

    backend.run(body)


def test_recover_deliveries_frees_leases_only_where_one_process_owns_them(backend: Backend) -> None:
    """SQLite (one process) clears every lease at start; PostgreSQL (several) leaves them to
    expire, since a live process may hold them."""

    async def body(store: Any) -> None:
        delivery_id = await add_delivery(store)
        await store.claim_deliveries(limit=1, now=NOW, lease=300.0)
        recovered = await store.recover_deliveries()
        claimable = await store.claim_deliveries(limit=1, now=NOW + 1, lease=300.0)
        if backend.name == "sqlite":
            assert recovered == 1
            assert [d.delivery_id for d in claimable] == [delivery_id]
        else:
            assert recovered == 0
            assert claimable == []
            (d,) = await store.claim_deliveries(limit=1, now=NOW + 300, lease=300.0)
            assert d.delivery_id == delivery_id

    backend.run(body)


# --- agents ----------------------------------------------------------------------------------------


def test_runs_belong_to_an_agent_whose_lane_claims_only_them(backend: Backend) -> None:
    async def body(store: Any) -> None:
        runs = [new_run(agent_id=a) for a in ("main", "hooks", "main", "hooks")]
        await store.accept(accept_op(runs=tuple(runs)))
        hooks = await store.claim_runs(limit=5, now=NOW + 1, agent_id="hooks")
        assert [r.run_id for r in hooks] == [runs[1].run_id, runs[3].run_id]
        assert {r.agent_id for r in hooks} == {"hooks"}
        assert await store.claim_runs(limit=5, now=NOW + 1, agent_id="hooks") == []
        rest = await store.claim_runs(limit=5, now=NOW + 2)  # no agent: any run
        assert [r.run_id for r in rest] == [runs[0].run_id, runs[2].run_id]
        listed = await store.list_runs(limit=10, cursor=None, state=None, agent="hooks")
        assert [r.run_id for r in listed.items] == [runs[3].run_id, runs[1].run_id]
        assert (await store.get_run(runs[0].run_id)).to_json()["agentId"] == "main"

    backend.run(body)


def test_heartbeats_and_deliveries_keep_their_agent_and_route_session(backend: Backend) -> None:
    async def body(store: Any) -> None:
        delivery = attrs.evolve(new_delivery(heartbeat_id="hb-a"), route_session="agent:a:main")
        outcome = attrs.evolve(
            heartbeat((), state="succeeded", hb="hb-a"), agent_id="a", delivery=delivery
        )
        await store.finish_heartbeat(outcome)
        [hb] = await store.list_heartbeats(limit=5)
        assert hb.agent_id == "a" and hb.to_json()["agentId"] == "a"
        [d] = (await store.list_deliveries(limit=10, cursor=None)).items
        assert d.route_session == "agent:a:main"
        [claimed] = await store.claim_deliveries(limit=5, now=NOW + 10, lease=30.0)
        assert claimed.route_session == "agent:a:main"

    backend.run(body)


def test_a_failed_delivery_writes_the_deliveries_it_plans_once(backend: Backend) -> None:
    """`then` (the `delivery.failed` events) is written with the failure, and not at all when
    the update changes nothing (a delivery already sent)."""

    def event(n: int) -> NewDelivery:
        return NewDelivery(
            delivery_id=f"ev-{n}", text="{}", state="pending", channel="event:0", to="http://x/e"
        )

    async def body(store: Any) -> None:
        first, second = await add_delivery(store), await add_delivery(store)
        await store.update_delivery(second, state="sent", now=NOW + 1, message_ids=("m1",))
        await store.update_delivery(
            first, state="failed", now=NOW + 2, last_error="no", then=(event(1),)
        )
        await store.update_delivery(
            second, state="failed", now=NOW + 3, last_error="late", then=(event(2),)
        )
        pending = (await store.list_deliveries(limit=10, cursor=None, state="pending")).items
        assert [(d.delivery_id, d.channel, d.to) for d in pending] == [
            ("ev-1", "event:0", "http://x/e")
        ]

    backend.run(body)
