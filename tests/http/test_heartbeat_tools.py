"""Tools in heartbeats, through HTTP: an agent's heartbeat gets the agent's grant (and nothing
else), its calls are recorded on the heartbeat (`GET /api/heartbeats`, `toolCalls`) and counted in
the metrics like a run's, and a heartbeat cut off in a tool call never repeats it: its events are
consumed by the heartbeat written `started` before the call. The echo model calls a tool for each
`call <server>.<tool> <JSON>` line of the event text, when that tool was offered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

SECRET = "beat-marker-51c0e9"
BEAT = {"every": 0, "coalesceMs": 50}


def _config(**tools: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {
            "defaults": {"heartbeat": BEAT, "tools": []},
            "list": [
                {"id": "main", "default": True},  # no grant: its heartbeats see no tool
                {"id": "ops", "heartbeat": BEAT, "tools": ["t.echo", "t.sleep"]},
                {"id": "hasty", "heartbeat": BEAT, "tools": ["t.sleep"], "timeoutSeconds": 2},
            ],
        },
        "tools": {"mcpServers": {"t": stdio_command()}, **tools},
    }


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(_config(), name="beat-tools")


def _beat_of(gw: GatewayProcess, event_id: str, agent: str) -> dict[str, Any]:
    """The finished heartbeat of `agent` that took this event."""
    session = "main" if agent == "main" else f"agent:{agent}:main"

    def consumed() -> dict[str, Any] | bool:
        events = gw.admin("/api/events", session=session, limit=100)["items"]
        [event] = [e for e in events if e["eventId"] == event_id]
        if event["consumedAt"] is None:
            return False
        beats = gw.admin("/api/heartbeats", limit=100)["items"]
        # the newest that took events (one wake at a time here; a beat may follow with none)
        done = [
            h
            for h in beats
            if h["agentId"] == agent and h["state"] != "started" and h["events"] > 0
        ]
        return done[0] if done else False

    return eventually(consumed, timeout=60, what=f"a heartbeat of {agent} to take {event_id}")  # type: ignore[return-value]


def _wake(gw: GatewayProcess, text: str, agent: str) -> str:
    r = gw.hook("wake", {"text": text, "mode": "now", "agentId": agent})
    assert r.status_code == 200, r.text
    return str(r.json()["eventId"])


def test_a_heartbeat_calls_a_tool_of_its_agents_grant_and_records_it(gw: GatewayProcess) -> None:
    event = _wake(gw, f'deploy finished\ncall t.echo {{"text": "{SECRET}"}}', "ops")
    beat = _beat_of(gw, event, "ops")
    assert beat["state"] == "succeeded", beat
    assert beat["reply"] == f"echo: {SECRET}"
    assert beat["events"] == 1
    [call] = beat["toolCalls"]
    assert (call["seq"], call["server"], call["tool"], call["outcome"]) == (1, "t", "echo", "ok")
    assert call["resultBytes"] == len(SECRET)
    assert call.get("arguments") is None and call.get("result") is None  # payloads not kept
    assert SECRET not in gw.stderr()
    # counted like a run's call
    assert gw.client is not None
    r = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert 'hookwise_tool_calls_total{outcome="ok",server="t",tool="echo"}' in r.text


def test_a_heartbeat_never_calls_a_tool_outside_its_agents_grant(gw: GatewayProcess) -> None:
    event = _wake(gw, "please count\ncall t.count {}", "ops")
    beat = _beat_of(gw, event, "ops")
    assert beat["state"] == "succeeded", beat
    assert beat["toolCalls"] == []
    assert "please count" in beat["reply"]  # the event text, no call made


def test_an_agent_without_a_grant_has_heartbeats_without_tools(gw: GatewayProcess) -> None:
    event = _wake(gw, f'for main\ncall t.echo {{"text": "{SECRET}"}}', "main")
    beat = _beat_of(gw, event, "main")
    assert beat["state"] == "succeeded", beat
    assert beat["toolCalls"] == []
    assert "for main" in beat["reply"]


def test_a_heartbeat_that_ends_badly_after_a_call_still_consumes_its_events(
    gw: GatewayProcess,
) -> None:
    first = _wake(gw, 'slow check\ncall t.sleep {"seconds": 20}', "hasty")
    beat = _beat_of(gw, first, "hasty")
    assert beat["state"] == "timed_out" and beat["events"] == 1, beat
    assert [(c["tool"], c["outcome"]) for c in beat["toolCalls"]] == [("sleep", "started")]
    # the next heartbeat answers only the newer event: the call is not made again
    later = _beat_of(gw, _wake(gw, "next one", "hasty"), "hasty")
    assert later["heartbeatId"] != beat["heartbeatId"]
    assert later["toolCalls"] == [] and "slow check" not in later["reply"]


def test_started_is_a_heartbeat_state_the_listing_filters_on(gw: GatewayProcess) -> None:
    assert gw.admin("/api/heartbeats", state="started")["items"] == []
    assert gw.client is not None
    r = gw.client.get(
        "/api/heartbeats",
        params={"state": "running"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert r.status_code == 400 and r.json()["code"] == "invalid_query"


def test_a_heartbeat_interrupted_in_a_tool_call_never_repeats_it(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(_config(callTimeoutSeconds=60), name="beat-recovery")
    event = _wake(gw, 'long check\ncall t.sleep {"seconds": 30}', "ops")

    def started() -> dict[str, Any] | bool:
        beats = gw.admin("/api/heartbeats", limit=10)["items"]
        found = [h for h in beats if h["agentId"] == "ops" and h["toolCalls"]]
        return found[0] if found else False

    beat = eventually(started, timeout=60, what="the heartbeat's call to start")
    # written before the call: the heartbeat `started`, its event consumed
    assert beat["state"] == "started" and "did not finish" in beat["error"]
    assert [c["outcome"] for c in beat["toolCalls"]] == ["started"]
    gw.kill()  # no shutdown: the heartbeat never finishes
    gw.start()
    later = _wake(gw, "after the restart", "ops")
    after = _beat_of(gw, later, "ops")
    assert after["heartbeatId"] != beat["heartbeatId"]
    assert after["events"] == 1 and after["toolCalls"] == []  # the old event is not shown again
    assert "after the restart" in after["reply"] and "long check" not in after["reply"]
    beats = gw.admin("/api/heartbeats", limit=10)["items"]
    [old] = [h for h in beats if h["heartbeatId"] == beat["heartbeatId"]]
    assert old["state"] == "started" and old["events"] == 1
    assert [(c["tool"], c["outcome"]) for c in old["toolCalls"]] == [("sleep", "started")]
    events = gw.admin("/api/events", session="agent:ops:main", limit=10)["items"]
    [first] = [e for e in events if e["eventId"] == event]
    assert first["consumedAt"] is not None
