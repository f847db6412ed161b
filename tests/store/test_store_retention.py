"""Retention on every backend: the oldest rows are found by primary key, finished records older
than the cut-off are deleted oldest first in batches, and waiting work is never touched."""

from __future__ import annotations

from typing import Any

from hookwise.server.store.records import RunOutcome
from hookwise.server.store.retention import TARGETS
from tests.store.conftest import Backend
from tests.store.support import NOW, accept_op, new_event, new_run

BY_KEY = {t.key: t for t in TARGETS}


async def prune(store: Any, key: str, cutoff: float, limit: int) -> list[int]:
    """Prune `key` like the retention loop does; returns each batch's count."""
    target = BY_KEY[key]
    upto = await store.retention_boundary(target, cutoff)
    counts = []
    while upto:
        counts.append(await store.prune_batch(target, upto=upto, cutoff=cutoff, limit=limit))
        if counts[-1] < limit:
            break
    return counts


def test_the_request_log_is_pruned_oldest_first_in_batches(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for age in (100, 90, 80, 70, 60, 10, 5):
            await store.accept(accept_op(now=NOW - age, path=f"/age/{age}"))
        assert await store.retention_boundary(BY_KEY["requests"], NOW - 1000) == 0
        assert await prune(store, "requests", NOW - 50, limit=2) == [2, 2, 1]
        log = await store.request_log(limit=10, cursor=None)
        assert [e.path for e in log.items] == ["/age/5", "/age/10"]

    backend.run(body)


def test_waiting_work_is_never_pruned(backend: Backend) -> None:
    async def body(store: Any) -> None:
        old = NOW - 1000
        done, running, queued = new_run(), new_run(), new_run()
        await store.accept(accept_op(runs=(done, running, queued), now=old))
        await store.accept(accept_op(events=(new_event(), new_event()), now=old))
        claimed = await store.claim_runs(limit=2, now=old, lease=60, default_timeout=60)
        assert {r.run_id for r in claimed} == {done.run_id, running.run_id}
        await store.finish_run(RunOutcome(run_id=done.run_id, state="succeeded", finished_at=old))
        assert await prune(store, "runs", NOW - 10, limit=100) == [1]
        assert await store.get_run(done.run_id) is None
        assert (await store.get_run(running.run_id)).state == "running"
        assert (await store.get_run(queued.run_id)).state == "queued"
        assert await prune(store, "events", NOW - 10, limit=100) == [0]  # none consumed
        assert len(await store.pending_events("main", limit=10)) == 2

    backend.run(body)


def test_queue_stats_count_what_waits(backend: Backend) -> None:
    async def body(store: Any) -> None:
        assert await store.queue_stats(now=NOW) == {"runs": (0, None), "deliveries": (0, None)}
        await store.accept(accept_op(runs=(new_run(), new_run()), now=NOW - 30))
        await store.accept(accept_op(runs=(new_run(),), now=NOW - 5))
        stats = await store.queue_stats(now=NOW)
        assert stats["runs"] == (3, 30.0) and stats["deliveries"] == (0, None)
        assert await store.readiness() == []

    backend.run(body)
