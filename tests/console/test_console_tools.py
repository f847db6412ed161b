"""The run page in a real browser shows a run's tool calls in its timeline and as a table:
a hook from a mapping with a grant, the echo model, a real MCP server over stdio; and the quick
start's own tool demo (its mapping and `examples/mcp_tools.py`), step by step."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.mcp_server import stdio_command
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config
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


def _tool_steps(page: Any, gw: GatewayProcess, run_id: str) -> list[str]:
    """Log in to the run's page; its timeline is queued, running, two tool calls, succeeded:
    the texts of the two calls."""
    page.goto(gw.url + f"/ui/runs/{run_id}")
    page.fill("input[name=token]", ADMIN_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(gw.url + f"/ui/runs/{run_id}") + "$"))
    timeline = page.locator("ol.timeline li").all_inner_texts()
    assert [t.split()[0] for t in timeline] == ["queued", "running", "tool", "tool", "succeeded"]
    return list(page.locator("ol.timeline li.tool-call").all_inner_texts())


def test_the_run_page_shows_the_tool_calls_in_the_timeline(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    text = 'call t.echo {"text": "disk at 91%"}\ncall t.fail {"reason": "no pager"}'
    r = gw.hook("triage", {"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded", timeout=60)
    calls = _tool_steps(page, gw, run_id)
    assert "tool call 1: t.echo ok" in calls[0]
    assert "tool call 2: t.fail error" in calls[1]
    rows = page.locator("table.tool-calls tbody tr").all_inner_texts()
    assert len(rows) == 2 and "t.echo" in rows[0] and "sha256:" in rows[0]
    assert "disk at 91%" in page.locator("main").inner_text()  # the reply carries the result
    shoot(page, "run-tools")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_quick_starts_tool_demo_shows_each_step_on_the_run_page(
    page: Any, start_module_gateway: Any, shoot: Callable[[Any, str], Any]
) -> None:
    config = yaml.safe_load((EXAMPLES / "quickstart.yaml").read_text(encoding="utf-8"))
    config["hooks"]["token"], config["gateway"]["auth"]["token"] = HOOK_TOKEN, ADMIN_TOKEN
    # as written, run where the config file is (examples/), `python` from PATH as once activated
    config["tools"]["mcpServers"]["demo"]["cwd"] = str(EXAMPLES)
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    gw = start_module_gateway(config, name="quickstart-tools", env={"PATH": path})
    text = 'call demo.echo {"text": "hello from a tool"}\ncall demo.now {}'
    r = gw.hook("tools-demo", {"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    run = eventually(
        lambda: (x := gw.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and x,
        timeout=60,
    )
    assert [(c["server"], c["tool"], c["outcome"]) for c in run["toolCalls"]] == [
        ("demo", "echo", "ok"),
        ("demo", "now", "ok"),
    ]
    assert re.fullmatch(r"echo: hello from a tool\n\d{4}-\d\d-\d\dT\S+\+00:00", run["reply"])
    calls = _tool_steps(page, gw, run_id)
    assert "tool call 1: demo.echo ok" in calls[0] and "17 bytes" in calls[0]
    assert "tool call 2: demo.now ok" in calls[1]
    assert "hello from a tool" in page.locator("main").inner_text()
    shoot(page, "run-quickstart-tools")
