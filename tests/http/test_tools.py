"""Tools through HTTP: a mapping's grant decides which MCP tools its runs may call (a payload
never does), every call is recorded on the run (`run.toolCalls`) and counted in the metrics, and
the limits hold (calls per run, per-call timeout, result size). The echo model calls a tool for
each `call <server>.<tool> <JSON>` line, when that tool was offered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import get_run
from tests.support.wait import eventually

SECRET = "payload-marker-7d2c41aa"


def _mapping(rule_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": rule_id, "match": {"path": rule_id}, "messageTemplate": "{{text}}", **extra}


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                _mapping("granted", tools=["t.echo", "t.fail", "t.sleep", "t.big"]),
                _mapping("ungranted"),
                _mapping("other-server", tools=["elsewhere.*"]),
                _mapping("whole-server", tools=["t.*"]),
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"tools": ["t.*"]}},  # never inherited by a mapping
        "tools": {
            "mcpServers": {"t": stdio_command()},
            "maxCallsPerRun": 3,
            "callTimeoutSeconds": 1.5,
            "maxResultBytes": 200,
        },
    }
    return start_module_gateway(config, name="tools")


def _run(gw: GatewayProcess, path: str, text: str) -> dict[str, Any]:
    r = gw.hook(path, {"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    return eventually(
        lambda: (run := get_run(gw, run_id))["state"] not in ("queued", "running") and run,
        timeout=60,
        what=f"run {run_id} to end",
    )


def test_a_granted_tool_is_called_and_recorded(gw: GatewayProcess) -> None:
    run = _run(gw, "granted", f'call t.echo {{"text": "{SECRET}"}}')
    assert run["state"] == "succeeded", run
    assert run["reply"] == f"echo: {SECRET}"
    [call] = run["toolCalls"]
    assert (call["seq"], call["server"], call["tool"], call["outcome"]) == (1, "t", "echo", "ok")
    assert call["resultBytes"] == len(SECRET)
    assert call["durationMs"] >= 0
    # payloads are not kept here: sizes and digests only
    assert call.get("arguments") is None and call.get("result") is None
    assert call["argumentsDigest"].startswith("sha256:")
    assert SECRET not in gw.stderr()


def test_a_mapping_without_a_grant_never_exposes_a_tool(gw: GatewayProcess) -> None:
    run = _run(gw, "ungranted", 'call t.echo {"text": "hi"}')
    assert run["state"] == "succeeded"
    assert run["toolCalls"] == []
    assert run["reply"] == 'echo: call t.echo {"text": "hi"}'


def test_a_grant_of_another_server_exposes_nothing_of_this_one(gw: GatewayProcess) -> None:
    run = _run(gw, "other-server", 'call t.echo {"text": "hi"}')
    assert run["toolCalls"] == [] and run["reply"].startswith("echo: call t.echo")


def test_a_tool_outside_a_single_tool_grant_is_not_called(gw: GatewayProcess) -> None:
    run = _run(gw, "granted", "call t.count {}")
    assert run["toolCalls"] == [] and run["reply"] == "echo: call t.count {}"


def test_tool_errors_and_timeouts_go_back_to_the_model(gw: GatewayProcess) -> None:
    run = _run(
        gw,
        "granted",
        'call t.fail {"reason": "no such deploy"}\ncall t.sleep {"seconds": 10}',
    )
    assert run["state"] == "succeeded", run
    outcomes = [(c["tool"], c["outcome"]) for c in run["toolCalls"]]
    assert outcomes == [("fail", "error"), ("sleep", "timeout")]
    assert "error: Error executing tool fail: no such deploy" in run["reply"]
    assert "did not answer within 1.5 s" in run["reply"]


def test_an_oversize_result_is_truncated_with_a_marker(gw: GatewayProcess) -> None:
    run = _run(gw, "granted", 'call t.big {"size": 5000}')
    [call] = run["toolCalls"]
    assert call["resultBytes"] == 5000 and call["truncated"] is True
    assert run["reply"].endswith("[hookwise: result truncated: 200 of 5000 bytes shown]")


def test_calls_past_the_limit_are_not_made_and_the_run_still_replies(gw: GatewayProcess) -> None:
    lines = "\n".join(f'call t.echo {{"text": "n{i}"}}' for i in range(5))
    run = _run(gw, "whole-server", lines)
    assert run["state"] == "succeeded", run
    assert [c["tool"] for c in run["toolCalls"]] == ["echo"] * 3
    assert "n0" in run["reply"] and "n2" in run["reply"] and "n3" not in run["reply"]
    assert "reached its limit of 3 tool calls" in run["reply"]


def test_the_calls_are_counted_in_the_metrics(gw: GatewayProcess) -> None:
    _run(gw, "granted", 'call t.echo {"text": "m"}')
    assert gw.client is not None
    r = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200
    assert 'hookwise_tool_calls_total{outcome="ok",server="t",tool="echo"}' in r.text
    assert "hookwise_tool_call_duration_seconds_bucket" in r.text


def test_a_run_interrupted_in_a_tool_call_fails_visibly_and_is_not_repeated(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            # a short run timeout: on PostgreSQL a dead process's run is taken back only once
            # its lease (the run's timeout plus leaseGraceSeconds) has expired
            "mappings": [_mapping("slow", tools=["t.sleep", "t.echo"], timeoutSeconds=15)],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"leaseGraceSeconds": 1}},
        "tools": {"mcpServers": {"t": stdio_command()}, "callTimeoutSeconds": 60},
    }
    gw = start_gateway(config, name="recovery")
    r = gw.hook("slow", {"text": 'call t.sleep {"seconds": 6}'})
    run_id = r.json()["runId"]
    eventually(
        lambda: [c["outcome"] for c in get_run(gw, run_id)["toolCalls"]] == ["started"],
        timeout=60,
        what="the call to start",
    )
    gw.kill()  # no shutdown: the run is left `running`, its call `started`
    gw.start()
    run = eventually(lambda: (x := get_run(gw, run_id))["state"] == "failed" and x, timeout=60)
    assert "interrupted after it had called tools (1 call(s) recorded)" in run["error"]
    assert [(c["seq"], c["tool"], c["outcome"]) for c in run["toolCalls"]] == [
        (1, "sleep", "started")
    ]
    # the operator's retry starts over on purpose; the new call is recorded after the old one
    assert gw.client is not None
    retried = gw.client.post(
        f"/api/runs/{run_id}/retry", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert retried.status_code == 202, retried.text
    run = eventually(
        lambda: (
            (x := get_run(gw, run_id))["state"] in ("succeeded", "failed")
            and x["attempts"]
            and x["finishedAt"]
            and x["state"] == "succeeded"
            and x
        ),
        timeout=90,
    )
    assert [(c["seq"], c["outcome"]) for c in run["toolCalls"]] == [(1, "started"), (2, "ok")]
