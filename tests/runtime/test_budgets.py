"""Budgets that hold, not fail, through the real server (SQLite) and a fake model that reports
usage: a run that would start past its budget is `held` (the lane paused `by: budget`), kept in
order, and released when the window has room again, or at once by an operator (who waives the
budget for the window). Spend is read from the store, so a restart forgets nothing.
(Two processes on PostgreSQL: tests/multi/test_budgets.py.)"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import httpx

from tests.fakes.model_server import ModelServer
from tests.runtime.test_runtime_http import config, run_state
from tests.runtime.test_session_lanes import post
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess
from tests.support.wait import eventually

#: a reply of 1000 words: the fake reports 1000 output tokens (and the prompt's words as input)
LONG = " ".join(["token"] * 1000)


def budget_config(server: ModelServer, **budget: Any) -> dict[str, Any]:
    cfg = config(server, model="fake/m", maxConcurrentRuns=2)
    cfg["gateway"]["metrics"] = {"enabled": True}
    cfg["agents"]["defaults"]["budget"] = budget
    return cfg


def at(value: str | float) -> float:
    """A time of the admin API (ISO 8601 or epoch seconds) as epoch seconds."""
    if isinstance(value, (int, float)):
        return float(value)
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def pauses(gw: GatewayProcess) -> list[dict[str, Any]]:
    return list(gw.admin("/api/queues")["pauses"])


def resume(gw: GatewayProcess, kind: str, name: str) -> httpx.Response:
    assert gw.client is not None
    return gw.client.post(
        "/api/resume",
        json={"kind": kind, "name": name},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


def scrape(gw: GatewayProcess, name: str) -> dict[str, float]:
    """The samples of `name` in a scrape, by their labels as written."""
    assert gw.client is not None
    body = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    return {
        line.rsplit(" ", 1)[0][len(name) :]: float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith(name + "{")
    }


def test_runs_past_the_budget_are_held_in_order_then_released_after_the_window(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=1500, per="8s"))
    model_server.reply(LONG, times=10)
    ids = [post(gw, "budget", n) for n in range(4)]
    first = run_state(gw, ids[0], "succeeded", "failed", timeout=30)
    assert first["state"] == "succeeded"
    second = run_state(gw, ids[1], "succeeded", "failed", timeout=30)
    assert second["state"] == "succeeded"  # 1000 and some tokens spent: below 1500
    # 2000 and some: the third would start past the budget; it and the fourth wait, held
    held = run_state(gw, ids[2], "held", timeout=30)
    assert held["attempts"] == 0  # put back without using up an attempt
    assert run_state(gw, ids[3], "held")["state"] == "held"
    [pause] = pauses(gw)
    assert pause["kind"] == "agent" and pause["name"] == "main" and pause["by"] == "budget"
    assert pause["reason"].startswith("budget: ")
    assert sum(scrape(gw, "hookwise_budget_breaches_total").values()) == 1
    labels = '{kind="tokens",name="main",scope="agent"}'
    assert scrape(gw, "hookwise_budget_limit")[labels] == 1500
    spent = scrape(gw, "hookwise_budget_spend")[labels]
    m = re.match(r"budget: (\d+) tokens", pause["reason"])
    assert m is not None and spent == int(m.group(1)) >= 1500
    # the window slides past the first two runs' calls: both go, in their order
    third = run_state(gw, ids[2], "succeeded", "failed", timeout=60)
    fourth = run_state(gw, ids[3], "succeeded", "failed", timeout=60)
    assert third["state"] == fourth["state"] == "succeeded"
    calls = [gw.admin(f"/api/runs/{i}")["run"]["modelCalls"][0] for i in ids]
    # released only once the window no longer held enough of the earlier spend
    assert at(calls[2]["startedAt"]) >= at(calls[0]["startedAt"]) + 8
    assert third["startedAt"] < fourth["startedAt"]
    assert all(gw.admin(f"/api/runs/{i}")["run"]["error"] is None for i in ids)


def test_an_operator_releases_a_held_budget_for_its_window(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    model_server.reply(LONG, times=10)
    ids = [post(gw, "budget", n) for n in range(3)]
    assert run_state(gw, ids[0], "succeeded", "failed", timeout=30)["state"] == "succeeded"
    run_state(gw, ids[1], "held", timeout=30)
    run_state(gw, ids[2], "held")
    r = resume(gw, "agent", "main")
    assert r.status_code == 200, r.text
    assert r.json()["released"] == 2
    for run_id in ids[1:]:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    assert pauses(gw) == []  # waived for the window: not held again
    assert "released by" in gw.stderr() or "budget of agent main released" in gw.stderr()


def test_spend_survives_a_restart_and_a_new_run_is_held(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h", window="calendar"))
    model_server.reply(LONG, times=10)
    first = post(gw, "budget", 0)
    assert run_state(gw, first, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    gw = gw.restart()
    later = post(gw, "other", 1)
    run_state(gw, later, "held", timeout=30)
    assert [p["by"] for p in pauses(gw)] == ["budget"]
    assert len(model_server.requests) == 1  # the held run never called the model


def test_a_budget_without_a_limit_is_refused_by_config_check(tmp_path) -> None:
    import subprocess
    import sys

    import yaml

    path = tmp_path / "hookwise.yaml"
    path.write_text(
        yaml.safe_dump({"agents": {"defaults": {"budget": {"per": "1d"}}}}), encoding="utf-8"
    )
    r = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "budget needs `tokens`, `cost` or both" in r.stdout + r.stderr


def test_a_mapping_budget_holds_only_its_own_lane(start_gateway, model_server: ModelServer) -> None:
    cfg = config(model_server, model="fake/m")
    cfg["hooks"]["mappings"] = [
        {
            "id": "metered",
            "match": {"path": "metered"},
            "action": "agent",
            "messageTemplate": "alert {{ n }}",
            "sessionKey": "hook:metered",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "budget": {"tokens": 500, "per": "1h"},
        }
    ]
    gw = start_gateway(cfg)
    model_server.reply(LONG, times=10)
    first = gw.hook("metered", {"n": 0}).json()["runId"]
    assert run_state(gw, first, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    second = gw.hook("metered", {"n": 1}).json()["runId"]
    run_state(gw, second, "held", timeout=30)
    direct = post(gw, "elsewhere", 9)
    assert run_state(gw, direct, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    [pause] = pauses(gw)
    assert (pause["kind"], pause["name"], pause["by"]) == ("mapping", "metered", "budget")
    eventually(lambda: gw.admin(f"/api/runs/{second}")["run"]["state"] == "held", what="held")


def test_a_run_that_crosses_its_budget_stops_calling_tools_and_says_so(
    start_gateway, model_server: ModelServer
) -> None:
    from tests.fakes.mcp_server import stdio_command
    from tests.fakes.model_server import Reply, ToolCalls

    cfg = config(model_server, model="fake/m")
    cfg["tools"] = {"mcpServers": {"t": stdio_command()}, "callTimeoutSeconds": 30}
    cfg["hooks"]["mappings"] = [
        {
            "id": "tooled",
            "match": {"path": "tooled"},
            "action": "agent",
            "messageTemplate": "check {{ n }}",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "tools": ["t.*"],
            "budget": {"tokens": 20, "per": "1h"},
        }
    ]
    gw = start_gateway(cfg)
    # the first answer (the prompt's words in, 5 out) asks for a tool and crosses the budget
    model_server.enqueue(ToolCalls((("t__echo", {"text": "x"}),), "looking"), Reply("never sent"))
    run_id = gw.hook("tooled", {"n": 1}).json()["runId"]
    run = run_state(gw, run_id, "succeeded", "failed", timeout=60)
    assert run["state"] == "succeeded", run
    assert "stopped this run before calling tools" in run["reply"]
    assert "the budget of mapping tooled is spent" in run["reply"]
    assert run["toolCalls"] == []
    assert len([q for q in model_server.requests if "check 1" in str(q.body)]) == 1
    assert run["usage"]["inputTokens"] + run["usage"]["outputTokens"] >= 20
    assert "crossed the budget of mapping tooled" in gw.stderr()
