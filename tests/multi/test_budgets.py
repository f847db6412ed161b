"""A budget is counted once across gateway processes on one PostgreSQL database, and across a
restart: each process reads the same `model_calls` records, so a run one process made counts
for the other, the lane is held once (one pause row) for both, and an operator's release
through either process lets both go on."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.fakes.model_server import ModelServer
from tests.runtime.test_budgets import LONG, pauses, resume
from tests.runtime.test_runtime_http import run_state
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess


def config(server: ModelServer) -> dict[str, Any]:
    return {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {
                    "id": "metered",
                    "match": {"path": "metered"},
                    "action": "agent",
                    "messageTemplate": "alert {{ n }}",
                    "sessionMode": "per-request",
                    "deliver": False,
                    "wakeMode": "next-heartbeat",
                    "budget": {"tokens": 1500, "per": "1h"},
                }
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}, "model": "fake/m"}},
        "models": {"providers": {"fake": server.provider()}},
    }


def run_on(gw: GatewayProcess, n: int) -> str:
    r = gw.hook("metered", {"n": n})
    assert r.status_code == 202, r.text
    return str(r.json()["runId"])


def tokens(run: dict[str, Any]) -> int:
    return int(run["usage"]["inputTokens"]) + int(run["usage"]["outputTokens"])


def test_two_processes_count_one_budget_and_hold_it_once(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as server:
        server.reply(LONG, times=10)
        cfg = config(server)
        one = start_gateway(cfg, name="gw0", extra_args=["--store", postgres_url])
        two = start_gateway(cfg, name="gw1", extra_args=["--store", postgres_url])
        first = run_state(one, run_on(one, 0), "succeeded", "failed", timeout=30)
        # about 1010 tokens: under 1500 for either process, so the second run starts
        second = run_state(two, run_on(two, 1), "succeeded", "failed", timeout=30)
        assert first["state"] == second["state"] == "succeeded"
        spent = tokens(first) + tokens(second)
        assert spent >= 1500
        held = [run_on(two, 2), run_on(one, 3)]
        for run_id in held:
            run_state(one, run_id, "held", timeout=30)
        # one pause for both, whose count is the two runs' tokens: each counted once
        [pause] = pauses(one)
        assert pauses(two) == [pause]
        assert (pause["kind"], pause["name"], pause["by"]) == ("mapping", "metered", "budget")
        m = re.match(r"budget: (\d+) tokens", pause["reason"])
        assert m is not None and int(m.group(1)) == spent, pause["reason"]
        # a restart forgets nothing: the lane stays held, a new run is held too
        two = two.restart()
        later = run_on(two, 4)
        run_state(two, later, "held", timeout=30)
        # the held runs never called the model (a leader's start-up heartbeat may have)
        assert len([q for q in server.requests if "alert" in str(q.body)]) == 2
        # released through one process, the other's runs go too; waived for the window
        r = resume(two, "mapping", "metered")
        assert r.status_code == 200, r.text
        for run_id in [*held, later]:
            assert run_state(one, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
        assert pauses(one) == []


def test_a_raise_through_one_process_releases_the_other_and_survives_a_restart(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as server:
        server.reply(LONG, times=10)
        cfg = config(server)
        cfg["hooks"]["mappings"][0]["budget"] = {"tokens": 500, "per": "1h"}
        one = start_gateway(cfg, name="gw0", extra_args=["--store", postgres_url])
        two = start_gateway(cfg, name="gw1", extra_args=["--store", postgres_url])
        first = run_state(one, run_on(one, 0), "succeeded", "failed", timeout=30)
        assert first["state"] == "succeeded"
        held = [run_on(two, 1), run_on(two, 2)]
        for run_id in held:
            run_state(two, run_id, "held", timeout=30)
        assert one.client is not None
        r = one.client.post(
            "/api/budgets/mapping/metered/raise",
            json={"tokens": "1M", "for": "1h"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert r.status_code == 200, r.text
        for run_id in held:
            assert run_state(two, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
        # both processes see the raise and count the same spend, also after a restart
        two = two.restart()
        [a] = one.admin("/api/budgets/")["items"]
        [b] = two.admin("/api/budgets/")["items"]
        # (a rolling window starts `per` before each answer)
        assert {**a, "windowStart": None} == {**b, "windowStart": None}
        assert a["limitTokens"] == 1_000_000 and a["tokens"] == 500 and a["held"] is False
        assert a["spentTokens"] == sum(
            tokens(one.admin(f"/api/runs/{i}")["run"]) for i in [first["runId"], *held]
        )
        later = run_on(two, 3)
        assert run_state(one, later, "succeeded", "failed", timeout=30)["state"] == "succeeded"
