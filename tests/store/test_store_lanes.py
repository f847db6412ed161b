"""The store contract for pauses and lane queues, on every backend: a pause holds the queued
runs of its mapping or agent and every run accepted after it, no claim takes them, the wakes it
covers stay pending; resuming sends them back in order; pauses survive a new store."""

from __future__ import annotations

from typing import Any

import attrs

from hookwise.server.store.lanes import LaneStat, Pause
from tests.store.conftest import Backend
from tests.store.support import NOW, accept_op, new_event, new_run


def _pause(kind: str = "mapping", name: str = "rule-1", **kw: Any) -> Pause:
    return Pause(kind=kind, name=name, paused_by="ops@127.0.0.1", paused_at=NOW, **kw)  # type: ignore[arg-type]


async def _states(store: Any, ids: list[str]) -> list[str]:
    return [(await store.get_run(i)).state for i in ids]


def test_a_pause_holds_queued_and_new_runs_and_resume_releases_them_in_order(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        before = [new_run() for _ in range(3)]
        await store.accept(accept_op(runs=tuple(before)))
        assert await store.pause(_pause(reason="deploy")) == 3
        after = [new_run() for _ in range(2)]
        await store.accept(accept_op(runs=tuple(after)))
        ids = [r.run_id for r in before + after]
        assert await _states(store, ids) == ["held"] * 5
        assert await store.claim_runs(limit=10, now=NOW + 1) == []
        [pause] = await store.pauses()
        assert (pause.kind, pause.name, pause.reason, pause.paused_by) == (
            "mapping",
            "rule-1",
            "deploy",
            "ops@127.0.0.1",
        )
        assert await store.lanes() == [LaneStat("main", "rule-1", 0, 5, NOW)]
        assert await store.resume("mapping", "rule-1") == 5
        assert await store.resume("mapping", "rule-1") is None
        assert await store.pauses() == []
        claimed = await store.claim_runs(limit=10, now=NOW + 2)
        assert [r.run_id for r in claimed] == ids

    backend.run(body)


def test_an_agents_pause_holds_its_runs_only_and_a_run_held_twice_waits_for_both(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        mine, other = new_run(agent_id="ops"), new_run(agent_id="main")
        await store.accept(accept_op(runs=(mine, other)))
        await store.pause(_pause("agent", "ops"))
        await store.pause(_pause("mapping", "rule-1"))
        assert await _states(store, [mine.run_id, other.run_id]) == ["held", "held"]
        assert await store.resume("mapping", "rule-1") == 1  # only `other`: `mine` still held
        assert await _states(store, [mine.run_id, other.run_id]) == ["held", "queued"]
        assert await store.resume("agent", "ops") == 1
        assert await _states(store, [mine.run_id, other.run_id]) == ["queued", "queued"]

    backend.run(body)


def test_a_held_run_keeps_its_place_in_its_session(backend: Backend) -> None:
    async def body(store: Any) -> None:
        first = new_run(session_key="s")
        await store.accept(accept_op(runs=(first,)))
        await store.pause(_pause())
        later = attrs.evolve(new_run(session_key="s"), rule_id="rule-2")  # not paused
        await store.accept(accept_op(runs=(later,)))
        # the later run of the session waits for the held one: order within a session holds
        assert await store.claim_runs(limit=5, now=NOW + 1) == []
        await store.resume("mapping", "rule-1")
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 2)] == [first.run_id]

    backend.run(body)


def test_paused_wakes_stay_pending_until_resumed(backend: Backend) -> None:
    async def body(store: Any) -> None:
        mapped = attrs.evolve(new_event("main"), source="hook:rule-1")
        plain = new_event("main")
        other_agent = new_event("agent:ops:main")
        await store.accept(accept_op(events=(mapped, plain, other_agent)))
        await store.pause(_pause())
        await store.pause(_pause("agent", "ops", session="agent:ops:main"))
        pending = await store.pending_events("main", limit=10)
        assert [e.event_id for e in pending] == [plain.event_id]
        assert await store.pending_events("agent:ops:main", limit=10) == []
        await store.resume("mapping", "rule-1")
        await store.resume("agent", "ops")
        pending = await store.pending_events("main", limit=10)
        assert [e.event_id for e in pending] == [mapped.event_id, plain.event_id]
        assert len(await store.pending_events("agent:ops:main", limit=10)) == 1

    backend.run(body)


def test_a_pause_is_kept_by_the_database(backend: Backend) -> None:
    async def first(store: Any) -> None:
        await store.pause(_pause(reason="incident 42"))

    async def then(store: Any) -> None:
        [pause] = await store.pauses()
        assert pause.reason == "incident 42"
        run = new_run()
        await store.accept(accept_op(runs=(run,)))
        assert (await store.get_run(run.run_id)).state == "held"

    backend.run(first)
    backend.run(then)


def test_a_claim_takes_no_run_of_a_full_mapping(backend: Backend) -> None:
    async def body(store: Any) -> None:
        noisy = [attrs.evolve(new_run(), rule_id="noisy") for _ in range(3)]
        quiet, direct = (
            attrs.evolve(new_run(), rule_id="quiet"),
            attrs.evolve(new_run(), rule_id=None),
        )
        await store.accept(accept_op(runs=(*noisy, quiet, direct)))
        claimed = await store.claim_runs(limit=10, now=NOW + 1, full=("noisy",))
        assert [r.run_id for r in claimed] == [quiet.run_id, direct.run_id]
        again = await store.claim_runs(limit=10, now=NOW + 2, agent_id="main", full=())
        assert [r.run_id for r in again] == [r.run_id for r in noisy]

    backend.run(body)
