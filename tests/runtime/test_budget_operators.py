"""An operator's hand on budgets, through the real server (SQLite) and a fake model that reports
usage: `GET /api/budgets` shows each budget's spend against its limits; a raise (API or
`hookwise budgets raise`) lets the held runs start within a few seconds, in order, and ends on
its own; a release lets them start at once and waives the budget for the window; what is not
held, not a budget or not a valid raise is refused with a stable code.
(Two processes on PostgreSQL: tests/multi/test_budgets.py.)"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from tests.fakes.model_server import ModelServer
from tests.http.test_pause import cli
from tests.runtime.test_budgets import LONG, at, budget_config, pauses, scrape
from tests.runtime.test_runtime_http import run_state
from tests.runtime.test_session_lanes import post
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess
from tests.support.wait import eventually


def call(gw: GatewayProcess, path: str, body: Any = None) -> httpx.Response:
    assert gw.client is not None
    return gw.client.post(
        path,
        json={} if body is None else body,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "X-Hookwise-Actor": "oncall"},
    )


def budget(gw: GatewayProcess, kind: str, name: str) -> dict[str, Any]:
    [found] = [
        b for b in gw.admin("/api/budgets/")["items"] if (b["kind"], b["name"]) == (kind, name)
    ]
    return found


def held_after_one_run(gw: GatewayProcess, model_server: ModelServer, n: int) -> list[str]:
    """`n` runs: the first spends about 1010 tokens, past a budget of 500; the others are held."""
    model_server.reply(LONG, times=20)
    ids = [post(gw, "budget", i) for i in range(n)]
    assert run_state(gw, ids[0], "succeeded", "failed", timeout=30)["state"] == "succeeded"
    for run_id in ids[1:]:
        run_state(gw, run_id, "held", timeout=30)
    return ids


def test_a_raise_lets_the_held_runs_start_in_order_and_shows_in_the_budgets(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    ids = held_after_one_run(gw, model_server, 3)
    b = budget(gw, "agent", "main")
    assert (b["tokens"], b["limitTokens"], b["cost"], b["window"]) == (500, 500, None, "rolling")
    assert b["spentTokens"] >= 1000 and b["held"] is True and b["raised"] is None
    assert b["perSeconds"] == 3600
    r = call(gw, "/api/budgets/agent/main/raise", {"tokens": "10K", "for": "1h"})
    assert r.status_code == 200, r.text
    raised = r.json()["budget"]
    assert raised["limitTokens"] == 10_000 and raised["tokens"] == 500
    assert raised["raised"]["tokens"] == 10_000 and raised["raised"]["by"].startswith("oncall@")
    assert 3500 < at(raised["raised"]["until"]) - time.time() <= 3600
    second = run_state(gw, ids[1], "succeeded", "failed", timeout=30)
    third = run_state(gw, ids[2], "succeeded", "failed", timeout=30)
    assert second["state"] == third["state"] == "succeeded"
    assert second["startedAt"] < third["startedAt"]
    assert pauses(gw) == []
    # a new run starts under the raised limit; the gauge shows the limit in force
    later = post(gw, "budget", 9)
    assert run_state(gw, later, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    labels = '{kind="tokens",name="main",scope="agent"}'
    assert scrape(gw, "hookwise_budget_limit")[labels] == 10_000
    assert "budget of agent main raised by oncall@" in gw.stderr()


def test_a_raise_ends_on_its_own_and_the_configured_limit_holds_again(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    ids = held_after_one_run(gw, model_server, 2)
    r = call(gw, "/api/budgets/agent/main/raise", {"tokens": 100_000, "for": "8s"})
    assert r.status_code == 200, r.text
    assert run_state(gw, ids[1], "succeeded", "failed", timeout=30)["state"] == "succeeded"
    eventually(lambda: budget(gw, "agent", "main")["raised"] is None, what="the raise's end")
    assert budget(gw, "agent", "main")["limitTokens"] == 500
    later = post(gw, "budget", 9)
    run_state(gw, later, "held", timeout=30)


def test_a_release_starts_the_held_runs_and_waives_the_budget_for_its_window(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    ids = held_after_one_run(gw, model_server, 3)
    r = call(gw, "/api/budgets/agent/main/release")
    assert r.status_code == 200, r.text
    assert r.json()["released"] == 2
    waived = r.json()["budget"]["waivedUntil"]
    assert waived is not None and 3500 < at(waived) - time.time() <= 3600
    for run_id in ids[1:]:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    again = call(gw, "/api/budgets/agent/main/release")
    assert again.status_code == 409 and again.json()["code"] == "not_held"


def test_bad_raises_and_releases_are_refused_with_a_stable_code(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    cases = [
        ("/api/budgets/agent/nobody/raise", {"tokens": 10, "for": "1h"}, 404, "budget_not_found"),
        ("/api/budgets/path/main/raise", {"tokens": 10, "for": "1h"}, 400, "invalid_kind"),
        ("/api/budgets/agent/main/raise", {"tokens": 10}, 400, "invalid_body"),
        ("/api/budgets/agent/main/raise", {"for": "1h"}, 400, "invalid_body"),
        ("/api/budgets/agent/main/raise", {"tokens": "lots", "for": "1h"}, 400, "invalid_body"),
        ("/api/budgets/agent/main/raise", {"cost": -1, "for": "1h"}, 400, "invalid_body"),
        ("/api/budgets/agent/main/raise", {"tokens": 10, "for": "90d"}, 400, "invalid_body"),
        (
            "/api/budgets/agent/main/raise",
            {"tokens": 10, "until": "2001-01-01T00:00:00Z"},
            400,
            "invalid_body",
        ),
        ("/api/budgets/agent/main/raise", {"tokens": 10, "for": "1h", "x": 1}, 400, None),
        ("/api/budgets/agent/main/release", None, 409, "not_held"),
        ("/api/budgets/mapping/main/release", None, 404, "budget_not_found"),
    ]
    for path, body, status, code in cases:
        r = call(gw, path, body)
        assert r.status_code == status, (path, body, r.text)
        assert r.json()["ok"] is False, r.text
        if code is not None:
            assert r.json()["code"] == code, (path, body, r.text)
    assert budget(gw, "agent", "main")["raised"] is None


def test_the_cli_lists_raises_and_releases(start_gateway, model_server: ModelServer) -> None:
    gw = start_gateway(budget_config(model_server, tokens=500, per="1h"))
    ids = held_after_one_run(gw, model_server, 2)
    listed = cli(gw, "budgets", "list")
    [row] = [line.split() for line in listed.splitlines() if line.startswith("agent")]
    assert row[:2] == ["agent", "main"] and row[4].endswith("/500") and row[-1] == "true", listed
    out = json.loads(cli(gw, "budgets", "raise", "agent", "main", "--cost", "5", "--for", "1h",
                         "--json"))  # fmt: skip
    assert out["budget"]["raised"]["cost"] == 5 and out["budget"]["limitTokens"] == 500
    # a cost raise leaves the tokens' limit: still held
    assert budget(gw, "agent", "main")["held"] is True
    out = cli(gw, "budgets", "release", "agent", "main")
    assert "released agent main: 1 run(s) back in the queue" in out, out
    assert run_state(gw, ids[1], "succeeded", "failed", timeout=30)["state"] == "succeeded"
