"""The store contract for coalescing, on every backend: the first request of a key writes a run
that no claim takes before its window closes; later requests within the window join it (the
newest message, or a bounded digest), push the window (never past maxWait) and are logged with
its id; an idempotent retry of a joining request replays its answer; other keys, and requests
after the window, write runs of their own."""

from __future__ import annotations

from typing import Any

import attrs

from hookwise.engine.config.mapping import COALESCE_DIGEST_MAX_ITEMS
from hookwise.server.store.coalesce import CoalesceSpec
from hookwise.server.store.lanes import Pause
from tests.store.conftest import Backend
from tests.store.support import NOW, accept_op, new_run


def _op(message: str, now: float, spec: CoalesceSpec, **kw: Any) -> Any:
    run = attrs.evolve(new_run(), message=message)
    body = f'{{"ok":true,"runId":"{run.run_id}","coalesced":true}}'.encode()
    op = accept_op(runs=(run,), now=now, body=body, **kw)
    log = attrs.evolve(op.log, run_ids=(run.run_id,))
    return attrs.evolve(op, coalesce=spec, log=log), run


def test_requests_of_a_key_join_one_run_claimed_when_its_window_closes(
    backend: Backend,
) -> None:
    spec = CoalesceSpec("acme#7", window=10.0, max_wait=25.0)

    async def body(store: Any) -> None:
        op, first = _op("event 0", NOW, spec)
        assert (await store.accept(op)).joined is None
        answers = []
        for n in range(1, 5):  # every 5 s: each pushes the window, maxWait (25 s) bounds it
            op, run = _op(f"event {n}", NOW + 5 * n, spec)
            answers.append(await store.accept(op))
            assert answers[-1].joined == first.run_id
            assert first.run_id.encode() in answers[-1].body
            assert run.run_id.encode() not in answers[-1].body
        other, other_run = _op("another key", NOW + 1, attrs.evolve(spec, key="acme#8"))
        assert (await store.accept(other)).joined is None
        assert await store.claim_runs(limit=10, now=NOW + 10.5) == []  # both windows open
        [other_claimed] = await store.claim_runs(limit=10, now=NOW + 24)  # its window: NOW+11
        assert other_claimed.run_id == other_run.run_id
        assert await store.claim_runs(limit=10, now=NOW + 24.5) == []
        [claimed] = await store.claim_runs(limit=10, now=NOW + 25)  # maxWait, not 20 + 10
        assert claimed.run_id == first.run_id and claimed.message == "event 4"
        # the window of a claimed run is over: the key's next request opens a new one
        late, late_run = _op("event 5", NOW + 26, spec)
        assert (await store.accept(late)).joined is None
        assert (await store.get_run(late_run.run_id)).state == "queued"

    backend.run(body)


def test_keep_all_digests_every_message_within_its_bound(backend: Backend) -> None:
    spec = CoalesceSpec("k", window=60.0, max_wait=600.0, keep="all")

    async def body(store: Any) -> None:
        count = COALESCE_DIGEST_MAX_ITEMS + 5
        ops = [_op(f"event {n}", NOW + n * 0.01, spec) for n in range(count)]
        for op, _ in ops:
            await store.accept(op)
        [run] = await store.claim_runs(limit=10, now=NOW + 61)
        assert run.run_id == ops[0][1].run_id
        assert run.message.startswith(f"{count} events were coalesced into this run (the oldest 5")
        assert "event 4\n" not in run.message and "--- event 6 of 55 ---\nevent 5" in run.message
        assert run.message.endswith(f"--- event {count} of {count} ---\nevent {count - 1}")

    backend.run(body)


def test_a_retry_of_a_joining_request_replays_its_answer(backend: Backend) -> None:
    spec = CoalesceSpec("k", window=60.0, max_wait=600.0)

    async def body(store: Any) -> None:
        first, run = _op("event 0", NOW, spec)
        await store.accept(first)
        joining, _ = _op("event 1", NOW + 1, spec, key="delivery-1")
        answer = await store.accept(joining)
        assert answer.joined == run.run_id
        again, _ = _op("event 1", NOW + 2, spec, key="delivery-1")
        replay = await store.accept(again)
        assert replay.replayed and replay.body == answer.body
        [claimed] = await store.claim_runs(limit=10, now=NOW + 62)
        assert claimed.message == "event 1"

    backend.run(body)


def test_a_paused_mappings_coalescing_run_is_held_joined_and_released(backend: Backend) -> None:
    spec = CoalesceSpec("k", window=10.0, max_wait=600.0)

    async def body(store: Any) -> None:
        await store.pause(
            Pause(kind="mapping", name="rule-1", paused_by="ops", paused_at=NOW)  # type: ignore[arg-type]
        )
        first, run = _op("event 0", NOW, spec)
        await store.accept(first)
        joining, _ = _op("event 1", NOW + 5, spec)
        assert (await store.accept(joining)).joined == run.run_id
        assert (await store.get_run(run.run_id)).state == "held"
        assert await store.claim_runs(limit=10, now=NOW + 20) == []
        assert await store.resume("mapping", "rule-1") == 1
        [claimed] = await store.claim_runs(limit=10, now=NOW + 20)
        assert claimed.run_id == run.run_id and claimed.message == "event 1"

    backend.run(body)
