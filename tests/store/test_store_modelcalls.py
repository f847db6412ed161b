"""The store contract for model calls and breakers, on every backend: records are read back as
written; a breaker's failures are counted once each, even from several stores (processes) at
once; it opens at the threshold, half-opens after the cool-down, lets exactly one caller try,
and closes on a success."""

from __future__ import annotations

import asyncio

from hookwise.server.store.modelcalls import BreakerPolicy, ModelCallRecord, Usage
from tests.store.conftest import Backend

POLICY = BreakerPolicy(failures=3, window=60.0, cooldown=30.0)


def call(owner: str, seq: int, **fields: object) -> ModelCallRecord:
    values: dict[str, object] = {
        "owner_id": owner,
        "attempt": 1,
        "seq": seq,
        "model": "openai/gpt-4.1",
        "agent_id": "main",
        "rule_id": None,
        "outcome": "ok",
        "error_class": None,
        "status": None,
        "error": None,
        "started_at": 1000.0 + seq,
        "duration_ms": 12.5,
    }
    values.update(fields)
    return ModelCallRecord(**values)  # type: ignore[arg-type]


def test_model_calls_are_read_back_per_owner_in_order(backend: Backend) -> None:
    written = [
        call("r1", 2, input_tokens=10, output_tokens=3, cache_read_tokens=5, cost=0.25),
        call("r1", 1, outcome="error", error_class="rate_limited", status=429, error="slow down"),
        call("r2", 1, input_tokens=1, output_tokens=1, cost=None),
    ]

    async def body(store) -> None:
        await store.record_model_calls(written)
        read = await store.model_calls_of(["r1", "r2", "unknown"])
        assert read == [written[1], written[0], written[2]]
        assert await store.model_calls_of([]) == []

    backend.run(body)
    u = Usage.of([written[0], written[1]])
    assert (u.calls, u.input_tokens, u.output_tokens, u.cache_read_tokens) == (2, 10, 3, 5)
    assert u.cost == 0.25 and Usage.of([written[2]]).cost is None


def test_a_breaker_opens_at_its_threshold_and_closes_on_success(backend: Backend) -> None:
    async def body(store) -> None:
        for i in range(2):
            b = await store.breaker_failure(
                "m/a", now=100.0 + i, policy=POLICY, error_class="rate_limited"
            )
            assert b.state == "closed" and b.failures == i + 1
        b = await store.breaker_failure("m/a", now=102.0, policy=POLICY, error_class="overloaded")
        assert b.state == "open" and b.open_until == 132.0
        [stored] = await store.breakers()
        assert stored == b and stored.state_at(131.0) == "open"
        assert stored.state_at(132.0) == "half_open"
        await store.breaker_success("m/a")
        assert await store.breakers() == []

    backend.run(body)


def test_failures_outside_the_window_start_a_new_count(backend: Backend) -> None:
    async def body(store) -> None:
        await store.breaker_failure("m/a", now=0.0, policy=POLICY, error_class="timeout")
        await store.breaker_failure("m/a", now=1.0, policy=POLICY, error_class="timeout")
        b = await store.breaker_failure("m/a", now=100.0, policy=POLICY, error_class="timeout")
        assert b.state == "closed" and b.failures == 1 and b.window_start == 100.0

    backend.run(body)


def test_failures_from_several_processes_are_each_counted_once(backend: Backend) -> None:
    policy = BreakerPolicy(failures=1000, window=60.0, cooldown=30.0)

    async def body(a, b) -> None:
        await asyncio.gather(
            *(
                s.breaker_failure("m/a", now=10.0, policy=policy, error_class="server_error")
                for s in [a, b] * 10
            )
        )
        [stored] = await b.breakers()
        assert stored.failures == 20

    backend.run(body, instances=2)


def test_exactly_one_caller_gets_the_half_open_try(backend: Backend) -> None:
    async def body(a, b) -> None:
        for i in range(3):
            await a.breaker_failure("m/a", now=float(i), policy=POLICY, error_class="overloaded")
        assert not await a.breaker_probe("m/a", now=10.0, lease=60.0)  # still open
        tries = await asyncio.gather(
            *(s.breaker_probe("m/a", now=40.0, lease=60.0) for s in [a, b] * 5)
        )
        assert sum(tries) == 1
        # the try's lease over (its caller gone): another may try
        assert await b.breaker_probe("m/a", now=101.0, lease=60.0)
        # the try failed: open again for a cool-down
        again = await a.breaker_failure("m/a", now=102.0, policy=POLICY, error_class="overloaded")
        assert again.state == "open" and again.open_until == 132.0 and again.probe_until is None

    backend.run(body, instances=2)


def test_model_calls_are_pruned_with_the_runs_horizon(backend: Backend) -> None:
    from hookwise.server.store.retention import TARGETS

    [target] = [t for t in TARGETS if t.table == "model_calls"]
    assert target.key == "runs"

    async def body(store) -> None:
        await store.record_model_calls(
            [call(f"r{age}", 1, started_at=1000.0 - age) for age in (300, 200, 100, 5)]
        )
        upto = await store.retention_boundary(target, 850.0)
        assert await store.prune_batch(target, upto=upto, cutoff=850.0, limit=10) == 2
        left = await store.model_calls_of(["r300", "r200", "r100", "r5"])
        assert [c.owner_id for c in left] == ["r100", "r5"]

    backend.run(body)
