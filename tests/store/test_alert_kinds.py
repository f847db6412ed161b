"""Each alert kind and the evaluator's lifecycle over a real store, on every backend: the kind's
condition is built with the store's own writes (failed runs, dead letters, refused requests,
pauses, breakers), one round of the evaluator (`AlertEvaluator.evaluate_once`, its clock given)
opens one alert with the ids behind it and plans its notification as a pending delivery; the
next round counts it without telling again; when the condition clears it resolves with a
resolve notification. Two evaluators on one store (two processes): only the `alerts` leader
evaluates, so one alert and one notification."""

from __future__ import annotations

from typing import Any

import attrs

from hookwise.engine.config.alerts import AlertRuleConfig, AlertsConfig
from hookwise.engine.config.convert import structure
from hookwise.server.alerts.evaluator import AlertEvaluator
from hookwise.server.store.approvals import ApprovalRecord
from hookwise.server.store.lanes import BY_BUDGET, Pause
from hookwise.server.store.modelcalls import BreakerPolicy
from hookwise.server.store.records import Filters, RunOutcome
from tests.store.conftest import Backend
from tests.store.support import NOW, accept_op, log_entry, new_delivery, new_run


def _config(rule: dict[str, Any]) -> AlertsConfig:
    return structure({"notify": ["telegram:42"], "rules": [rule]}, AlertsConfig)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _evaluator(store: Any, rule: dict[str, Any], clock: Clock, shared: bool = False) -> Any:
    return AlertEvaluator(store, _config(rule), shared=shared, clock=clock)


async def _notes(store: Any) -> list[Any]:
    page = await store.admin_list(
        "deliveries", Filters({"channel": "telegram"}), limit=50, cursor=None
    )
    return list(page.items)


async def _failed_runs(store: Any, n: int, state: str = "failed") -> list[str]:
    runs = tuple(new_run() for _ in range(n))
    await store.accept(accept_op(runs=runs))
    claimed = await store.claim_runs(limit=n, now=NOW)
    for run in claimed:
        await store.finish_run(RunOutcome(run.run_id, state, NOW + 1, error="model down"))
    return [r.run_id for r in runs]


def test_failing_runs_open_one_alert_told_once_then_resolve_when_they_age_out(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        clock = Clock(NOW + 5)
        rule = {"kind": "runs_failing", "mapping": "rule-1", "threshold": 2, "window": "1m"}
        evaluator = _evaluator(store, rule, clock)
        ids = await _failed_runs(store, 1)
        assert (await evaluator.evaluate_once())["opened"] == 0  # 1 < threshold 2
        ids += await _failed_runs(store, 1, "timed_out")
        assert await evaluator.evaluate_once() == {"opened": 1, "seen": 0, "resolved": 0}
        [alert] = await store.active_alerts()
        assert (alert.rule, alert.key, alert.value, alert.threshold) == (
            "runs_failing:rule-1",
            "rule-1",
            2.0,
            2.0,
        )
        assert set(alert.subjects["runs"]) == set(ids)
        [note] = await _notes(store)
        assert (note.state, note.to, note.delivery_id) == ("pending", "42", alert.notifications[0])
        assert note.text.startswith("[ALERT] runs_failing:rule-1 (rule-1): 2 runs")
        assert "model down" not in note.text

        clock.now += 10
        assert await evaluator.evaluate_once() == {"opened": 0, "seen": 1, "resolved": 0}
        assert len(await _notes(store)) == 1 and (await store.active_alerts())[0].seen == 2

        clock.now = NOW + 120  # the failures left the 1m window
        assert await evaluator.evaluate_once() == {"opened": 0, "seen": 0, "resolved": 1}
        done = await store.get_alert(alert.alert_id)
        assert (done.state, done.resolved_at) == ("resolved", NOW + 120)
        notes = await _notes(store)
        assert len(notes) == 2 and notes[0].text.startswith("[RESOLVED] runs_failing:rule-1")
        assert await evaluator.evaluate_once() == {"opened": 0, "seen": 0, "resolved": 0}

    backend.run(body)


def test_only_the_alerts_leader_evaluates(backend: Backend) -> None:
    async def body(one: Any, two: Any) -> None:
        clock = Clock(NOW + 5)
        rule = {"kind": "runs_failing", "mapping": "rule-1", "threshold": 1}
        await _failed_runs(one, 2)
        first = _evaluator(one, rule, clock, shared=True)
        second = _evaluator(two, rule, clock, shared=True)
        assert (await first.evaluate_once())["opened"] == 1
        assert await second.evaluate_once() == {"opened": 0, "seen": 0, "resolved": 0}
        assert len(await _notes(two)) == 1
        await one.resign("alerts")
        assert (await second.evaluate_once())["seen"] == 1  # it leads now

    backend.run(body, instances=2)


def test_a_signature_failure_spike_on_a_path_opens_with_its_requests(backend: Backend) -> None:
    async def body(store: Any) -> None:
        for path in ("/hooks/github", "/hooks/github", "/hooks/github", "/hooks/stripe"):
            store.log_request(attrs.evolve(log_entry(path, 401), code="invalid_signature"))
        store.log_request(attrs.evolve(log_entry("/hooks/github", 401), code="unauthorized"))
        await store.accept(accept_op())  # the refused requests are written with this group
        rule = {"kind": "signature_failures", "path": "github", "threshold": 3}
        evaluator = _evaluator(store, rule, Clock(NOW + 1))
        assert (await evaluator.evaluate_once())["opened"] == 1
        [alert] = await store.active_alerts()
        assert alert.key == "/hooks/github" and alert.value == 3.0
        assert len(alert.subjects["requests"]) == 3

    backend.run(body)


def test_dead_letters_a_queue_age_and_held_runs_each_open(backend: Backend) -> None:
    async def body(store: Any) -> None:
        dead = new_delivery(state="failed")
        runs = (new_run(), new_run())
        await store.accept(attrs.evolve(accept_op(runs=runs), deliveries=(dead,)))
        await store.pause(Pause("mapping", "rule-1", "ops", NOW))  # both runs held
        clock = Clock(NOW + 400)
        for rule, key, subjects in (
            ({"kind": "dead_letters"}, "all", {"deliveries": (dead.delivery_id,)}),
            ({"kind": "runs_held", "threshold": 2}, "held", None),
        ):
            evaluator = _evaluator(store, rule, clock)
            assert (await evaluator.evaluate_once())["opened"] == 1, rule
            alert = next(a for a in await store.active_alerts() if a.kind == rule["kind"])
            assert alert.key == key
            if subjects:
                assert dict(alert.subjects) == subjects
        await store.resume("mapping", "rule-1")  # both queued again, created at NOW
        evaluator = _evaluator(store, {"kind": "queue_age", "queue": "runs"}, clock)
        assert (await evaluator.evaluate_once())["opened"] == 1
        alert = next(a for a in await store.active_alerts() if a.kind == "queue_age")
        assert alert.value >= 300
        clock.now = NOW + 100  # younger than the 300 s default
        assert (await evaluator.evaluate_once())["resolved"] >= 1

    backend.run(body)


def test_an_open_breaker_and_a_spent_budget_open_one_alert_each(backend: Backend) -> None:
    async def body(store: Any) -> None:
        policy = BreakerPolicy(failures=1, window=60, cooldown=30)
        await store.breaker_failure("openai/gpt", now=NOW, policy=policy, error_class="overloaded")
        await store.pause(Pause("mapping", "costly", BY_BUDGET, NOW, reason="cost 20 of 20"))
        clock = Clock(NOW + 1)
        for rule, key in (
            ({"kind": "breaker_open"}, "openai/gpt"),
            ({"kind": "budget_crossed"}, "mapping:costly"),
        ):
            evaluator = _evaluator(store, rule, clock)
            assert (await evaluator.evaluate_once())["opened"] == 1, rule
            assert any(a.key == key for a in await store.active_alerts())
        await store.breaker_success("openai/gpt")
        evaluator = _evaluator(store, {"kind": "breaker_open"}, clock)
        assert (await evaluator.evaluate_once())["resolved"] == 1

    backend.run(body)


def test_a_rule_removed_from_the_configuration_resolves_its_alerts_untold(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        await _failed_runs(store, 1)
        clock = Clock(NOW + 2)
        rule = {"kind": "runs_failing", "mapping": "rule-1", "threshold": 1}
        assert (await _evaluator(store, rule, clock).evaluate_once())["opened"] == 1
        other = AlertEvaluator(store, AlertsConfig(), shared=False, clock=clock)
        assert (await other.evaluate_once())["resolved"] == 1
        assert len(await _notes(store)) == 1  # the opening's only

    backend.run(body)


def test_rule_ids_default_to_kind_and_scope() -> None:
    assert AlertRuleConfig("runs_failing", mapping="m").rule_id == "runs_failing:m"
    assert AlertRuleConfig("dead_letters").rule_id == "dead_letters"


def test_a_tool_call_waiting_for_approval_too_long_opens_and_resolves_when_decided(
    backend: Backend,
) -> None:
    async def body(store: Any) -> None:
        run = new_run()
        await store.accept(accept_op(runs=(run,)))
        [claimed] = await store.claim_runs(limit=1, now=NOW)
        approval = ApprovalRecord(
            approval_id="apr_1",
            run_id=claimed.run_id,
            seq=0,
            call_id="call_1",
            server="github",
            tool="merge_pull_request",
            arguments="{}",
            arguments_digest="sha256:0",
            token_hash="0" * 64,
            state="pending",
            created_at=NOW,
            expires_at=NOW + 3600,
        )
        assert await store.park_run(claimed.run_id, "{}", [approval])
        evaluator = _evaluator(store, {"kind": "approvals_waiting"}, Clock(NOW + 60))
        assert (await evaluator.evaluate_once())["opened"] == 0  # under the 900 s default
        evaluator = _evaluator(store, {"kind": "approvals_waiting"}, Clock(NOW + 1000))
        assert (await evaluator.evaluate_once())["opened"] == 1
        [alert] = await store.active_alerts()
        assert alert.key == "approvals" and alert.value >= 1000
        assert alert.subjects["runs"] == (claimed.run_id,)
        await store.expire_approvals(now=NOW + 4000, state="timed_out")
        assert (await evaluator.evaluate_once())["resolved"] == 1

    backend.run(body)
