"""The run page in a real browser shows a run's tool calls in its timeline and as a table:
a hook from a mapping with a grant, the echo model, a real MCP server over stdio."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually


@pytest.fixture(scope="module")
def store_kind() -> str:
    return "sqlite"


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any) -> GatewayProcess:
    config = base_config(
        mappings=[
            {
                "id": "triage",
                "match": {"path": "triage"},
                "messageTemplate": "{{text}}",
                "tools": ["t.echo", "t.fail"],
            }
        ]
    )
    config["tools"] = {"mcpServers": {"t": stdio_command()}}
    return start_module_gateway(config)


def test_the_run_page_shows_the_tool_calls_in_the_timeline(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    text = 'call t.echo {"text": "disk at 91%"}\ncall t.fail {"reason": "no pager"}'
    r = gw.hook("triage", {"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded", timeout=60)
    page.goto(gw.url + f"/ui/runs/{run_id}")
    page.fill("input[name=token]", ADMIN_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(gw.url + f"/ui/runs/{run_id}") + "$"))
    timeline = page.locator("ol.timeline li").all_inner_texts()
    assert [t.split()[0] for t in timeline] == ["queued", "running", "tool", "tool", "succeeded"]
    calls = page.locator("ol.timeline li.tool-call").all_inner_texts()
    assert "tool call 1: t.echo ok" in calls[0]
    assert "tool call 2: t.fail error" in calls[1]
    rows = page.locator("table.tool-calls tbody tr").all_inner_texts()
    assert len(rows) == 2 and "t.echo" in rows[0] and "sha256:" in rows[0]
    assert "disk at 91%" in page.locator("main").inner_text()  # the reply carries the result
    shoot(page, "run-tools")
