"""Budgets by sender (`budget: {by: sender}`) through the real server (SQLite) and a fake model
that reports usage: two senders sign one mapping's requests with different secrets of its
`verify` block; the one past its allowance is held (a pause of kind `mapping-sender`), in order,
while the other's runs keep running; it is released when the window allows, by an operator
(API, for one sender), and its spend survives a restart. `config check` refuses any other `by`.
(Two processes on PostgreSQL: tests/multi/test_sender_budgets.py.)"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from typing import Any

import httpx
import yaml

from tests.fakes.model_server import ModelServer
from tests.http.test_pause import cli
from tests.runtime.test_budgets import LONG, at, pauses, scrape
from tests.runtime.test_runtime_http import config, run_state
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess
from tests.support.wait import eventually

#: the secrets of the two senders, in the order of the block's `secrets`
SECRETS = ("sender-zero-secret-0000", "sender-one-secret-1111")


def sender_config(server: ModelServer, **budget: Any) -> dict[str, Any]:
    cfg = config(server, model="fake/m", maxConcurrentRuns=2)
    cfg["gateway"]["metrics"] = {"enabled": True}
    cfg["hooks"]["mappings"] = [
        {
            "id": "shared",
            "match": {"path": "shared"},
            "action": "agent",
            "messageTemplate": "alert {{ n }}",
            "sessionMode": "per-request",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "verify": {"scheme": "github", "secrets": list(SECRETS), "auth": "signature"},
            "budget": {"by": "sender", **budget},
        }
    ]
    return cfg


def signature(sender: int, body: bytes) -> dict[str, str]:
    """The headers of `body` signed with the secret of `sender` (GitHub's scheme)."""
    sig = hmac.new(SECRETS[sender].encode(), body, hashlib.sha256).hexdigest()
    return {"content-type": "application/json", "x-hub-signature-256": f"sha256={sig}"}


def rule_checked(shared: dict[str, Any]) -> dict[str, Any]:
    """The mapping `checked`: as `shared`, but the rule checks the signature itself (the path
    wants the hook token too)."""
    checked = {**shared, "id": "checked", "match": {"path": "checked"}}
    checked["verify"] = {"scheme": "github", "secrets": list(SECRETS)}
    return checked


def signed(gw: GatewayProcess, sender: int, n: int, path: str = "shared") -> str:
    """A run of the mapping (of `path`), signed with the secret of `sender` (no hook token)."""
    body = json.dumps({"n": n}).encode()
    r = gw.hook(path, token=None, content=body, headers=signature(sender, body))
    assert r.status_code == 202, r.text
    return str(r.json()["runId"])


def done(gw: GatewayProcess, run_id: str, timeout: float = 30) -> dict[str, Any]:
    return run_state(gw, run_id, "succeeded", "failed", timeout=timeout)


def budget(gw: GatewayProcess) -> dict[str, Any]:
    [found] = [b for b in gw.admin("/api/budgets")["items"] if b["name"] == "shared"]
    return dict(found)


def release(gw: GatewayProcess, sender: str | None = None) -> httpx.Response:
    assert gw.client is not None
    return gw.client.post(
        "/api/budgets/mapping/shared/release",
        params={} if sender is None else {"sender": sender},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


def test_one_sender_past_its_allowance_is_held_the_other_keeps_running(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(sender_config(model_server, tokens=500, per="1h"))
    model_server.reply(LONG, times=20)
    a1 = signed(gw, 0, 1)
    first = done(gw, a1)
    assert first["state"] == "succeeded" and first["sender"] == "github#0"
    a2, a3 = signed(gw, 0, 2), signed(gw, 0, 3)
    run_state(gw, a2, "held", timeout=30)
    # the other sender has its own allowance: it runs while the first is held
    b1 = signed(gw, 1, 1)
    other = done(gw, b1)
    assert other["state"] == "succeeded" and other["sender"] == "github#1"
    assert run_state(gw, a3, "held")["attempts"] == 0
    [pause] = pauses(gw)
    assert (pause["kind"], pause["name"], pause["by"]) == (
        "mapping-sender",
        "shared/github#0",
        "budget",
    )
    # visible: the budget lists its senders, with their spend and which is held
    found = budget(gw)
    assert found["by"] == "sender" and found["held"] is True
    senders = {s["sender"]: s for s in found["senders"]}
    assert senders["github#0"]["held"] is True and senders["github#0"]["spentTokens"] >= 1000
    assert senders["github#1"]["held"] is False and senders["github#1"]["spentTokens"] >= 1000
    # counted by the budget's kind and name, never by sender
    assert scrape(gw, "hookwise_budget_breaches_total") == {
        '{name="shared",scope="mapping-sender"}': 1.0
    }
    labels = '{kind="tokens",name="shared",scope="mapping-sender"}'
    assert scrape(gw, "hookwise_budget_limit")[labels] == 500
    listed = cli(gw, "budgets", "list")
    [row] = [line.split() for line in listed.splitlines() if "shared/github#0" in line]
    assert row[0] == "mapping-sender" and row[4].endswith("/500") and row[-1] == "true", listed
    # an operator releases that sender: its held runs go, in order, waived for the window
    r = release(gw, "github#1")
    assert r.status_code == 409 and r.json()["code"] == "not_held"
    out = cli(gw, "budgets", "release", "mapping", "shared", "--sender", "github#0")
    assert "released mapping shared sender(s) github#0: 2 run(s) back in the queue" in out, out
    second, third = done(gw, a2), done(gw, a3)
    assert second["state"] == third["state"] == "succeeded"
    assert at(second["startedAt"]) <= at(third["startedAt"])  # claimed in order, 2 at once
    assert pauses(gw) == []
    assert "budget of mapping shared sender github#0 released by" in gw.stderr()
    # the second sender, past its own allowance now, is held in its turn
    b2 = signed(gw, 1, 2)
    run_state(gw, b2, "held", timeout=30)
    assert [p["name"] for p in pauses(gw)] == ["shared/github#1"]


def test_a_held_sender_goes_on_when_the_window_allows_and_after_a_restart(
    start_gateway, model_server: ModelServer
) -> None:
    # a window long enough for a restart and the next claim on a loaded machine (with 8 s, the
    # window slid past the first call before the second run was claimed: it ran, never held)
    gw = start_gateway(sender_config(model_server, tokens=500, per="25s"))
    model_server.reply(LONG, times=20)
    a1 = signed(gw, 0, 1)
    assert done(gw, a1)["state"] == "succeeded"
    gw = gw.restart()  # the spend is the store's: the restart forgets nothing
    a2 = signed(gw, 0, 2)
    run_state(gw, a2, "held", timeout=30)
    b1 = signed(gw, 1, 1)
    assert done(gw, b1)["state"] == "succeeded"
    eventually(lambda: gw.admin(f"/api/runs/{a2}")["run"]["state"] == "held", what="held")
    # the window slides past the first call: the held sender goes on by itself
    second = done(gw, a2, timeout=90)
    assert second["state"] == "succeeded"
    calls = [gw.admin(f"/api/runs/{i}")["run"]["modelCalls"][0] for i in (a1, a2)]
    assert at(calls[1]["startedAt"]) >= at(calls[0]["startedAt"]) + 25
    assert "budget of mapping-sender shared/github#0 has room again" in gw.stderr()


def test_config_check_refuses_a_by_other_than_sender(tmp_path) -> None:
    path = tmp_path / "hookwise.yaml"
    path.write_text(
        yaml.safe_dump(
            {"agents": {"defaults": {"budget": {"tokens": 10, "by": {"field": "$.user"}}}}}
        ),
        encoding="utf-8",
    )
    r = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "agents.defaults.budget.by" in r.stdout + r.stderr
    # by sender on a mapping nothing signs: valid, but every run is the sender `token`
    mapping = {"id": "m", "match": {"path": "m"}, "action": "agent", "messageTemplate": "hi",
               "budget": {"tokens": 10, "by": "sender"}}  # fmt: skip
    hooks = {"enabled": True, "token": "a-long-hook-token-0123456789abcdef", "mappings": [mapping]}
    path.write_text(yaml.safe_dump({"hooks": hooks}), encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hooks.mappings[0].budget.by is sender, but no verify block" in r.stderr


def test_the_sender_is_what_the_door_or_the_rule_verified(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = sender_config(model_server, tokens=500, per="1h")
    [shared] = cfg["hooks"]["mappings"]
    plain = {**shared, "id": "plain", "match": {"path": "plain"}}
    del plain["verify"]
    cfg["hooks"]["mappings"] = [shared, rule_checked(shared), plain]
    gw = start_gateway(cfg)
    body = json.dumps({"n": 1}).encode()
    headers = signature(1, body)
    by_rule = gw.hook("checked", content=body, headers=headers).json()["runId"]
    by_token = gw.hook("plain", {"n": 1}).json()["runId"]
    # a payload cannot name its sender: only what authenticated it does
    claims = gw.hook("plain", {"n": 2, "sender": "github#0"}).json()["runId"]
    senders = [gw.admin(f"/api/runs/{i}")["run"]["sender"] for i in (by_rule, by_token, claims)]
    assert senders == ["github#1", "token", "token"]
    assert (
        gw.hook(
            "checked", content=body, headers={**headers, "x-hub-signature-256": "sha256=00"}
        ).status_code
        == 401
    )


def test_an_agents_budget_by_sender_and_a_raise_of_it(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = sender_config(model_server, tokens=500, per="1h")
    del cfg["hooks"]["mappings"][0]["budget"]
    cfg["agents"]["defaults"]["budget"] = {"tokens": 500, "per": "1h", "by": "sender"}
    gw = start_gateway(cfg)
    model_server.reply(LONG, times=20)
    assert done(gw, signed(gw, 0, 1))["state"] == "succeeded"
    held = signed(gw, 0, 2)
    run_state(gw, held, "held", timeout=30)
    assert done(gw, signed(gw, 1, 1))["state"] == "succeeded"  # its own allowance
    [pause] = pauses(gw)
    assert (pause["kind"], pause["name"]) == ("agent-sender", "main/github#0")
    # a raise is of the budget: every sender's allowance, so the held sender goes on
    assert gw.client is not None
    r = gw.client.post(
        "/api/budgets/agent/main/raise",
        json={"tokens": "1M", "for": "1h"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert r.status_code == 200, r.text
    assert r.json()["budget"]["limitTokens"] == 1_000_000
    assert done(gw, held)["state"] == "succeeded"
    assert pauses(gw) == []
    assert "budget of agent-sender main/github#0 has room again" in gw.stderr()
