"""The store contract for budgets, on every backend: `spend` sums the tokens (in and out) and
the cost of the model calls of one mapping or agent since a window's start, whatever their
outcome (a skipped call counts nothing: it has no tokens), and refuses any other column; an
operator's waiver is read back until it is replaced."""

from __future__ import annotations

import pytest

from tests.store.conftest import Backend
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
