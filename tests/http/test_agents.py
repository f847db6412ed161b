"""Several agents behind one gateway, through HTTP: `agents.list`, routing by `agentId` (request,
wake, mapping), each agent's own main session, heartbeat and run lane, rebinding of agent-scoped
keys, `hooks.allowedAgentIds`, and the admin API's agent views."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.rows import transcript
from tests.support.wait import eventually

HOOKS_PROMPT = "You triage mail for the hooks agent."


def _config(**hooks: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "models": {
            "providers": {
                # replies with the first lines of its prompt: the system prompt it was given
                "head": {"api": "command", "command": ["sh", "-c", "head -n 2"]},
                "slow": {"api": "command", "command": ["sh", "-c", "sleep 1.5; echo slow done"]},
            }
        },
        "agents": {
            "defaults": {"heartbeat": {"every": 0, "coalesceMs": 50}},
            "list": [
                {"id": "main", "default": True},
                {
                    "id": "hooks",
                    "name": "Hooks",
                    "model": "head/system",
                    "systemPrompt": HOOKS_PROMPT,
                    "heartbeat": {"every": 0, "coalesceMs": 50},
                },
                {
                    "id": "busy",
                    "model": "slow/x",
                    "maxConcurrentRuns": 1,
                    "heartbeat": {"every": 0, "coalesceMs": 50},
                },
            ],
        },
    }


ROUTE_JS = """
export default function ({ payload }) {
  return { agentId: payload.team === "ops" ? "hooks" : undefined };
}
"""


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("agents")
    (workdir / "gw" / "hooks" / "transforms").mkdir(parents=True)
    (workdir / "gw" / "hooks" / "transforms" / "route.js").write_text(ROUTE_JS, encoding="utf-8")
    mappings = [
        {"id": "triage", "match": {"path": "triage"}, "agentId": "hooks",
         "messageTemplate": "{{text}}"},
        {"id": "lost", "match": {"path": "lost"}, "agentId": "ghost",
         "messageTemplate": "{{text}}"},
        {"id": "note", "match": {"path": "note"}, "action": "wake", "agentId": "hooks",
         "textTemplate": "{{text}}"},
        {"id": "routed", "match": {"path": "routed"}, "transform": {"module": "route.js"},
         "messageTemplate": "{{text}}"},
    ]  # fmt: skip
    config = _config(mappings=mappings, transformsDir=str(workdir / "gw" / "hooks" / "transforms"))
    return start_module_gateway(config, workdir=workdir / "gw")


def _run(gw: GatewayProcess, run_id: str, *states: str) -> dict:
    return eventually(
        lambda: (r := gw.admin(f"/api/runs/{run_id}")["run"])["state"] in states and r,
        what=f"run {run_id} in {states}",
    )


def _events(gw: GatewayProcess, session: str) -> list[dict]:
    return gw.admin("/api/events", session=session, limit=500)["items"]


def _consumed(gw: GatewayProcess, session: str, event_id: str) -> float | None:
    return next(e for e in _events(gw, session) if e["eventId"] == event_id)["consumedAt"]


def _heartbeats(gw: GatewayProcess, agent: str) -> list[dict]:
    return [h for h in gw.admin("/api/heartbeats", limit=500)["items"] if h["agentId"] == agent]


def test_the_admin_api_lists_the_agents_and_their_main_sessions(gw: GatewayProcess) -> None:
    items = gw.admin("/api/agents")["items"]
    assert [(a["id"], a["default"], a["mainSession"]) for a in items] == [
        ("main", True, "main"),
        ("hooks", False, "agent:hooks:main"),
        ("busy", False, "agent:busy:main"),
    ]
    assert items[1]["model"] == "head/system" and items[2]["maxConcurrentRuns"] == 1


def test_an_agent_run_uses_its_agent_and_summarises_into_its_main_session(
    gw: GatewayProcess,
) -> None:
    r = gw.hook("agent", {"message": "sort my mail", "agentId": "HOOKS", "name": "Mail"})
    assert r.status_code == 202
    key = r.json()["sessionKey"]
    assert re.fullmatch(r"agent:hooks:hook:[0-9a-f-]{36}", key)
    run = _run(gw, r.json()["runId"], "succeeded")
    assert run["agentId"] == "hooks" and run["sessionKey"] == key
    assert run["modelUsed"] == "head/system"
    assert run["reply"] == f"[system]\n{HOOKS_PROMPT}"  # the agent's own system prompt
    summaries = [e for e in _events(gw, "agent:hooks:main") if e["source"] == f"run:{run['runId']}"]
    assert summaries and summaries[0]["text"].startswith("Hook Mail: [system]")
    assert not [e for e in _events(gw, "main") if e["source"] == f"run:{run['runId']}"]
    # wakeMode now: the hooks agent's heartbeat (not main's) took the summary
    hb = eventually(lambda: _heartbeats(gw, "hooks"), what="the hooks agent's heartbeat")
    assert hb[0]["modelUsed"] == "head/system"
    assert transcript(gw, key)[0][0] == "user"
    assert eventually(lambda: transcript(gw, "agent:hooks:main"))


def test_an_unknown_agent_in_a_request_is_refused_and_named(gw: GatewayProcess) -> None:
    before = gw.admin("/api/runs", limit=500)["items"]
    for name, payload in (
        ("agent", {"message": "m", "agentId": "ghost"}),
        ("wake", {"text": "t", "agentId": "ghost"}),
    ):
        r = gw.hook(name, payload)
        assert r.status_code == 400
        body = r.json()
        assert body["code"] == "unknown_agent" and body["field"] == "agentId"
        assert "'ghost'" in body["error"] and "main, hooks, busy" in body["error"]
    assert gw.admin("/api/runs", limit=500)["items"] == before
    assert all(e["text"] != "t" for e in _events(gw, "main"))


def test_wake_goes_to_the_named_agents_main_session(gw: GatewayProcess) -> None:
    event_id = gw.hook("wake", {"text": "for hooks only", "agentId": "hooks"}).json()["eventId"]
    [event] = [e for e in _events(gw, "agent:hooks:main") if e["eventId"] == event_id]
    assert event["session"] == "agent:hooks:main"
    assert all(e["eventId"] != event_id for e in _events(gw, "main"))
    eventually(
        lambda: _consumed(gw, "agent:hooks:main", event_id),
        what="the hooks heartbeat to consume the event",
    )
    r = gw.hook("note", {"text": "mapped wake"})
    assert r.status_code == 200
    assert any(e["eventId"] == r.json()["eventId"] for e in _events(gw, "agent:hooks:main"))


def test_mappings_route_by_agent_and_an_unknown_one_falls_back(gw: GatewayProcess) -> None:
    triaged = gw.hook("triage", {"text": "x"}).json()
    assert gw.admin(f"/api/runs/{triaged['runId']}")["run"]["agentId"] == "hooks"
    lost = gw.hook("lost", {"text": "x"})
    assert lost.status_code == 202
    assert gw.admin(f"/api/runs/{lost.json()['runId']}")["run"]["agentId"] == "main"
    assert "unknown agent 'ghost'" in gw.stderr()


def test_a_transform_may_route_to_an_agent(gw: GatewayProcess) -> None:
    ops = gw.hook("routed", {"text": "x", "team": "ops"}).json()
    other = gw.hook("routed", {"text": "x", "team": "sales"}).json()
    assert gw.admin(f"/api/runs/{ops['runId']}")["run"]["agentId"] == "hooks"
    assert ops["sessionKey"].startswith("agent:hooks:hook:")
    assert gw.admin(f"/api/runs/{other['runId']}")["run"]["agentId"] == "main"


def test_agent_scoped_keys_are_rebound_to_the_target_agent(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "agentId": "hooks", "sessionKey": "agent:main:x"})
    assert r.json()["sessionKey"] == "agent:hooks:x"
    r = gw.hook("agent", {"message": "m", "sessionKey": "agent:hooks:y"})
    assert r.json()["sessionKey"] == "agent:main:y"
    r = gw.hook("agent", {"message": "m", "agentId": "hooks", "sessionKey": "hook:z"})
    assert r.json()["sessionKey"] == "agent:hooks:hook:z"
    r = gw.hook("agent", {"message": "m", "agentId": "hooks", "sessionKey": "main"})
    assert r.status_code == 400 and r.json()["code"] == "session_key_reserved"


def test_runs_can_be_listed_by_agent(gw: GatewayProcess) -> None:
    gw.hook("agent", {"message": "m", "agentId": "hooks"})
    hooks = gw.admin("/api/runs", agent="hooks", limit=500)["items"]
    assert hooks and {r["agentId"] for r in hooks} == {"hooks"}
    assert all(r["agentId"] == "main" for r in gw.admin("/api/runs", agent="main")["items"])


def test_a_flood_on_one_agent_does_not_hold_up_another(gw: GatewayProcess) -> None:
    flood = [gw.hook("agent", {"message": f"m{i}", "agentId": "busy"}).json() for i in range(4)]
    started = time.monotonic()
    quick = gw.hook("agent", {"message": "quick", "wakeMode": "now"}).json()
    _run(gw, quick["runId"], "succeeded")
    woke = gw.hook("wake", {"text": "main still beats"}).json()["eventId"]
    eventually(lambda: _consumed(gw, "main", woke), what="main's heartbeat")
    assert time.monotonic() - started < 4.0  # the busy lane needs 6 s for its four runs
    states = [gw.admin(f"/api/runs/{f['runId']}")["run"]["state"] for f in flood]
    assert "queued" in states  # one slot: the busy agent's runs wait for each other


def test_allowed_agent_ids_limits_the_effective_agent(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(_config(allowedAgentIds=["hooks"]))
    r = gw.hook("agent", {"message": "m", "agentId": "main"})
    assert r.status_code == 400
    assert r.json()["code"] == "agent_not_allowed" and "hooks.allowedAgentIds" in r.json()["error"]
    assert gw.hook("agent", {"message": "m", "agentId": "hooks"}).status_code == 202
    r = gw.hook("agent", {"message": "m"})  # no agentId: the default agent, not listed
    assert r.status_code == 400 and r.json()["code"] == "agent_not_allowed"
    gw.stop()
    gw.config["hooks"]["allowedAgentIds"] = []
    gw.start()
    r = gw.hook("wake", {"text": "t", "agentId": "hooks"})
    assert r.status_code == 400 and r.json()["code"] == "agent_not_allowed"
    assert gw.hook("wake", {"text": "t"}).json()["code"] == "agent_not_allowed"
