"""Tool servers that misbehave, through the real server: what a stdio MCP server (the SDK's, run
as a child) sends is bounded. A 50 MiB result is cut at `maxResultBytes` and the call ends when
the message does (not at its timeout) while `/healthz` keeps answering; a stderr line of many
MiB is cut and counted; non-JSON lines on stdout are dropped with a bounded warning; a run
started while its server reconnects offers the tools the server listed before, whose calls the
model reads as error results, and records on the run that the server was down."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import get_run
from tests.support.wait import eventually

BIG = 50 * 1024 * 1024


def _mapping(rule_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": rule_id, "match": {"path": rule_id}, "messageTemplate": "{{text}}", **extra}


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [_mapping("hostile", tools=["t.*"])],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "tools": {
            "mcpServers": {"t": stdio_command()},
            "callTimeoutSeconds": 120,
            "maxResultBytes": 1000,
        },
    }
    return start_module_gateway(config, name="tools-hostile")


def _run(gw: GatewayProcess, text: str) -> dict[str, Any]:
    r = gw.hook("hostile", {"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    return eventually(
        lambda: (run := get_run(gw, run_id))["state"] not in ("queued", "running") and run,
        timeout=180,
        what=f"run {run_id} to end",
    )


def _metrics(gw: GatewayProcess) -> str:
    assert gw.client is not None
    r = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200
    return r.text


def test_a_50_mib_result_is_cut_at_max_result_bytes_and_the_gateway_keeps_answering(
    gw: GatewayProcess,
) -> None:
    answered: list[int] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=gw.url, timeout=30) as client:
            while not stop.is_set():
                answered.append(client.get("/healthz").status_code)
                stop.wait(0.05)

    prober = threading.Thread(target=probe, daemon=True)
    prober.start()
    try:
        run = _run(gw, f'call t.big {{"size": {BIG}}}')
    finally:
        stop.set()
        prober.join(60)
    assert run["state"] == "succeeded", run
    [call] = run["toolCalls"]
    # ended by the message's end, cut: not a timeout, not an error
    assert (call["tool"], call["outcome"], call["truncated"]) == ("big", "ok", True)
    assert call["resultBytes"] >= BIG
    shown = re.search(r"\[hookwise: result truncated: (\d+) of (\d+) bytes shown\]", run["reply"])
    assert shown is not None, run["reply"][-300:]
    assert int(shown.group(1)) == 1000 and int(shown.group(2)) >= BIG
    assert "x" * 1000 in run["reply"]
    assert answered and set(answered) == {200}
    assert "over the limit of" in gw.stderr()
    assert 'what="stdout_bytes"' in _metrics(gw)


def test_a_huge_stderr_line_is_cut_dropped_and_counted(gw: GatewayProcess) -> None:
    size = 20 * 1024 * 1024
    run = _run(gw, f'call t.shout {{"size": {size}}}')
    assert [(c["tool"], c["outcome"]) for c in run["toolCalls"]] == [("shout", "ok")]

    def logged() -> str | None:
        text = gw.stderr()
        return text if "stderr: shout done" in text else None

    log = eventually(logged, what="the line after the long one in the log")
    cut = re.search(r"\[hookwise: line cut, (\d+) more bytes dropped\]", log)
    assert cut is not None and int(cut.group(1)) >= size - 10_000
    assert max(len(line) for line in log.splitlines()) < 20_000
    assert re.search(r'hookwise_tool_output_dropped_total\{server="t",what="stderr_bytes"\} (\S+)',
                     _metrics(gw))  # fmt: skip


def test_non_json_lines_on_stdout_are_dropped_with_one_bounded_warning(gw: GatewayProcess) -> None:
    run = _run(gw, 'call t.noise {"lines": 50}')
    assert [(c["tool"], c["outcome"]) for c in run["toolCalls"]] == [("noise", "ok")]
    assert "noise 50" in run["reply"]
    log = gw.stderr()
    warnings = [line for line in log.splitlines() if "non-JSON-RPC line" in line]
    assert 1 <= len(warnings) <= 2, warnings
    assert "\\x1b[31m" in warnings[0] and "\x1b" not in warnings[0]  # escaped
    assert "Traceback" not in log and "Failed to parse JSONRPC" not in log
    counted = re.search(
        r'hookwise_tool_output_dropped_total\{server="t",what="stdout_noise"\} (\S+)',
        _metrics(gw),
    )
    assert counted is not None and float(counted.group(1)) >= 50


def test_a_run_started_while_its_server_reconnects_is_told_and_records_it(
    gw: GatewayProcess,
) -> None:
    crashed = _run(gw, "call t.crash {}")
    assert [c["outcome"] for c in crashed["toolCalls"]] == ["error"]
    # at once: the supervisor waits a second before it starts the server again
    run = _run(gw, 'call t.echo {"text": "during"}')
    assert run["state"] == "succeeded", run
    down = [c for c in run["toolCalls"] if c["outcome"] == "unavailable"]
    assert [(c["seq"], c["server"], c["tool"]) for c in down] == [(-1, "t", "*")]
    assert "not connected" in down[0]["result"]
    # the tools it listed before were offered: the call is the model's error result
    [echo] = [c for c in run["toolCalls"] if c["tool"] == "echo"]
    assert echo["outcome"] == "error" and echo["seq"] == 1
    assert "error: MCP server 't' is not connected" in run["reply"]
    assert "granted MCP servers were down when it started" in gw.stderr()
    # once it is back, runs use it again (a run started just before it came back records the
    # outage at its start, then calls it: asked again until a run starts with it up)
    again = eventually(
        lambda: (
            (r := _run(gw, 'call t.echo {"text": "after"}'))["reply"] == "echo: after"
            and all(c["outcome"] != "unavailable" for c in r["toolCalls"])
            and r
        ),
        timeout=60,
        what="the server to be back",
    )
    assert [c["outcome"] for c in again["toolCalls"]] == ["ok"]
