"""The approvals' timeout sweep: one process sweeps when several share the store (the
`approvals` leader, as the alert evaluator), and a single process always does. Every test runs on
SQLite (writer process and thread) and PostgreSQL; two stores on one database are two gateway
processes."""

from __future__ import annotations

from typing import Any

from hookwise.engine.config.approvals import ApprovalsConfig
from hookwise.server.runtime.approvals import LEADERSHIP, Approvals
from tests.store.conftest import Backend
from tests.store.support import NOW, accept_op, new_run, pending_approval

#: after every approval parked here has expired
LATER = NOW + 100


async def _park_expiring(store: Any, n: int) -> str:
    """Accept, claim and park a run on one approval that expires at NOW + 10; its id."""
    run = new_run()
    await store.accept(accept_op(runs=(run,)))
    [claimed] = await store.claim_runs(limit=1, now=NOW)
    approval = pending_approval(claimed.run_id, n, expires_at=NOW + 10)
    assert await store.park_run(claimed.run_id, "{}", [approval])
    return str(claimed.run_id)


def _approvals(store: Any, *, shared: bool, resumed: list[int]) -> Approvals:
    return Approvals(
        store,
        ApprovalsConfig(),
        on_resumed=lambda: resumed.append(1),
        shared=shared,
        clock=lambda: LATER,
    )


def test_only_the_approvals_leader_sweeps_when_processes_share_the_store(
    backend: Backend,
) -> None:
    async def body(one: Any, two: Any) -> None:
        woken_one: list[int] = []
        woken_two: list[int] = []
        first = _approvals(one, shared=True, resumed=woken_one)
        second = _approvals(two, shared=True, resumed=woken_two)
        run = await _park_expiring(one, 1)
        assert await first.sweep() == 1  # it takes the leadership and times the approval out
        assert (await two.get_run(run)).state == "queued"
        await _park_expiring(one, 2)
        assert await second.sweep() == 0  # not the leader: it leaves the expired one alone
        assert woken_two == []
        await one.resign(LEADERSHIP)
        assert await second.sweep() == 1  # it leads now
        assert woken_one == [1] and woken_two == [1]

    backend.run(body, instances=2)


def test_a_single_process_sweeps_without_asking_for_the_leadership(backend: Backend) -> None:
    async def body(one: Any, two: Any) -> None:
        assert await one.try_lead(LEADERSHIP)  # held elsewhere: a single process never asks
        alone = _approvals(two, shared=False, resumed=[])
        await _park_expiring(two, 1)
        assert await alone.sweep() == 1

    backend.run(body, instances=2)
