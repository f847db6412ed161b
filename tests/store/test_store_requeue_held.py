"""The store contract for runs that go back to the queue while their lane is paused, on every
backend: a run that was running (or failed) when its mapping, agent or sender was paused comes
back `held`, not `queued`, by every way back (a clean stop's requeue, a restart's recovery, an
expired lease reclaimed, a lost claim released, an operator's retry, a decided approval); the
resume sends it back
to `queued` and counts it. A run of a lane nobody paused comes back `queued`, as before."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hookwise.server.store.lanes import LaneStat, Pause
from hookwise.server.store.records import RetryRequest, RunOutcome
from tests.store.conftest import Backend
from tests.store.support import NOW, PAUSES, accept_op, pending_approval, sent_run


async def _state(store: Any, run_id: str) -> str:
    return (await store.get_run(run_id)).state


async def _running(store: Any) -> tuple[str, str]:
    """Two runs claimed (`running`, lease until NOW + 660): one of the paused lane, one of a
    lane nobody pauses; their ids."""
    paused, free = sent_run(), sent_run("rule-2", "ops")
    await store.accept(accept_op(runs=(paused, free)))
    claimed = await store.claim_runs(limit=5, now=NOW)
    assert {r.run_id for r in claimed} == {paused.run_id, free.run_id}
    return paused.run_id, free.run_id


async def _requeue(store: Any, ids: list[str]) -> None:
    await store.requeue_runs(ids)  # a clean stop, a mapping's cap, a budget's check


async def _recover(store: Any, ids: list[str]) -> None:
    assert await store.recover_runs(max_attempts=5, now=NOW + 1) == (2, 0)  # a restart


async def _reclaim(store: Any, ids: list[str]) -> None:
    # another process reclaims the runs whose lease expired
    assert await store.recover_runs(max_attempts=5, now=NOW + 661, expired_only=True) == (2, 0)


async def _release(store: Any, ids: list[str]) -> None:
    assert await store.release_runs(agent_id=None, keep=[]) == 2  # a claim whose answer was lost


async def _retry(store: Any, ids: list[str]) -> None:
    for run_id in ids:  # failed, then retried by an operator
        await store.finish_run(RunOutcome(run_id=run_id, state="failed", finished_at=NOW + 1))
    req = RetryRequest(("failed", "timed_out"), "ops@127.0.0.1", NOW + 2)
    assert await store.retry("run", req) == 2


async def _approval(store: Any, ids: list[str]) -> None:
    for n, run_id in enumerate(ids):  # parked on an approval, then approved
        approval = pending_approval(run_id, n, expires_at=NOW + 600)
        assert await store.park_run(run_id, "{}", [approval])
    for n in range(len(ids)):
        decided = await store.decide_approval(
            approval_id=f"apr_{n}", state="approved", by="admin", via="api", now=NOW + 1
        )
        assert decided.resumed


PATHS: dict[str, Callable[[Any, list[str]], Awaitable[None]]] = {
    "requeue": _requeue,
    "recover": _recover,
    "reclaim": _reclaim,
    "release": _release,
    "retry": _retry,
    "approval": _approval,
}


@pytest.mark.parametrize("path", list(PATHS))
def test_a_run_back_in_the_queue_while_its_lane_is_paused_is_held_and_the_resume_counts_it(
    backend: Backend, path: str
) -> None:
    async def body(store: Any) -> None:
        paused, free = await _running(store)
        assert await store.pause(PAUSES[0]) == 0  # a running run is not held by the pause
        await PATHS[path](store, [paused, free])
        assert [await _state(store, i) for i in (paused, free)] == ["held", "queued"]
        assert await store.lanes() == [
            LaneStat("main", "rule-1", 0, 1, NOW),
            LaneStat("ops", "rule-2", 1, 0, NOW),
        ]
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 700)] == [free]
        assert await store.resume("mapping", "rule-1") == 1
        assert await _state(store, paused) == "queued"
        assert [r.run_id for r in await store.claim_runs(limit=5, now=NOW + 701)] == [paused]

    backend.run(body)


@pytest.mark.parametrize("pause", PAUSES, ids=[p.kind for p in PAUSES])
def test_every_kind_of_pause_holds_a_requeued_run(backend: Backend, pause: Pause) -> None:
    async def body(store: Any) -> None:
        paused, free = await _running(store)
        await store.pause(pause)
        await store.requeue_runs([paused, free])
        assert [await _state(store, i) for i in (paused, free)] == ["held", "queued"]
        assert await store.resume(pause.kind, pause.name) == 1
        assert await _state(store, paused) == "queued"

    backend.run(body)


def test_a_requeued_run_held_twice_waits_for_both_resumes(backend: Backend) -> None:
    async def body(store: Any) -> None:
        paused, _ = await _running(store)
        await store.pause(PAUSES[0])
        await store.pause(PAUSES[3])
        await store.requeue_runs([paused])
        assert await store.resume("mapping", "rule-1") == 0  # the sender's budget still holds it
        assert await _state(store, paused) == "held"
        assert await store.resume(PAUSES[3].kind, PAUSES[3].name) == 1
        assert await _state(store, paused) == "queued"

    backend.run(body)


def test_a_run_requeued_after_the_resume_is_queued(backend: Backend) -> None:
    async def body(store: Any) -> None:
        paused, _ = await _running(store)
        await store.pause(PAUSES[1])
        assert await store.resume("agent", "main") == 0
        await store.requeue_runs([paused])
        assert await _state(store, paused) == "queued"

    backend.run(body)
