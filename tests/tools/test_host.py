"""The tool host against a real MCP server (the official SDK's), over stdio and Streamable HTTP:
grants filter the offered tools; calls end ok, error or timeout; results are capped with a marker;
a changed tool list is seen; a crashed stdio server is restarted; its stderr reaches the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookwise.engine.config.grants import Grant
from hookwise.engine.config.models import McpServerConfig, ToolsConfig
from hookwise.server.tools.host import ToolHost
from tests.fakes.mcp_server import HttpServer, stdio_command

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    with HttpServer() as server:
        yield server


@pytest.fixture(params=["stdio", "http"])
def server_config(request: pytest.FixtureRequest) -> McpServerConfig:
    if request.param == "stdio":
        c = stdio_command()
        return McpServerConfig(command=c["command"], args=tuple(c["args"]), cwd=c["cwd"])
    return McpServerConfig(url=request.getfixturevalue("http_server").url)


def _host(server: McpServerConfig, **limits: object) -> ToolHost:
    return ToolHost(ToolsConfig(mcp_servers={"t": server}, **limits), base_dir=REPO)  # type: ignore[arg-type]


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_only_granted_tools_are_offered(server_config: McpServerConfig) -> None:
    async def go() -> tuple[list[str], list[str], list[str]]:
        host = _host(server_config)
        try:
            one = [t.qualified for t in (await host.offered(Grant.parse(["t.echo"]))).tools]
            every = [t.qualified for t in (await host.offered(Grant.parse(["t.*"]))).tools]
            none = [t.qualified for t in (await host.offered(Grant.parse([]))).tools]
            return one, every, none
        finally:
            await host.aclose()

    one, every, none = run(go())
    assert one == ["t.echo"]
    assert {"t.echo", "t.fail", "t.sleep", "t.big"} <= set(every)
    assert none == []


def test_calls_end_ok_error_or_timeout_and_results_are_capped(
    server_config: McpServerConfig,
) -> None:
    async def go():  # type: ignore[no-untyped-def]
        host = _host(server_config, call_timeout_seconds=1.0, max_result_bytes=100)
        try:
            return (
                await host.call("t", "echo", {"text": "hello"}),
                await host.call("t", "fail", {"reason": "broken"}),
                await host.call("t", "sleep", {"seconds": 5}),
                await host.call("t", "big", {"size": 1000}),
                await host.call("t", "nope", {}),
                await host.call("elsewhere", "echo", {}),
            )
        finally:
            await host.aclose()

    ok, error, timeout, big, unknown, no_server = run(go())
    assert (ok.outcome, ok.text, ok.result_bytes) == ("ok", "hello", 5)
    assert error.outcome == "error" and "broken" in error.text
    assert timeout.outcome == "timeout" and "did not answer within 1 s" in timeout.text
    assert big.outcome == "ok" and big.truncated and big.result_bytes == 1000
    assert big.text.startswith("x" * 100)
    assert big.text.endswith("[hookwise: result truncated: 100 of 1000 bytes shown]")
    assert unknown.outcome == "error"
    assert no_server.outcome == "error" and "no MCP server 'elsewhere'" in no_server.text


def test_a_changed_tool_list_is_seen(server_config: McpServerConfig) -> None:
    async def go() -> list[str]:
        host = _host(server_config)
        try:
            await host.offered(Grant.parse(["t.*"]))
            assert (await host.call("t", "grow", {})).outcome == "ok"
            for _ in range(100):
                names = [t.name for t in (await host.offered(Grant.parse(["t.*"]))).tools]
                if "extra" in names:
                    return names
                await asyncio.sleep(0.1)
            return names
        finally:
            await host.aclose()

    assert "extra" in run(go())


def test_a_crashed_stdio_server_is_restarted_and_its_stderr_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = stdio_command()
    config = McpServerConfig(command=c["command"], args=tuple(c["args"]), cwd=c["cwd"])

    async def go():  # type: ignore[no-untyped-def]
        host = _host(config)
        try:
            first = await host.call("t", "echo", {"text": "before"})
            crashed = await host.call("t", "crash", {})
            for _ in range(300):
                after = await host.call("t", "echo", {"text": "after"})
                if after.outcome == "ok":
                    break
                await asyncio.sleep(0.1)
            return first, crashed, after, host.connections["t"].connects
        finally:
            await host.aclose()

    with caplog.at_level(logging.INFO, logger="hookwise.tools"):
        first, crashed, after, connects = run(go())
    assert first.outcome == "ok"
    assert crashed.outcome == "error"
    assert (after.outcome, after.text) == ("ok", "after")
    assert connects == 2
    lines = [r.getMessage() for r in caplog.records]
    assert any("stderr: crashing on request" in m for m in lines)
    # the server's start line carries a terminal colour code: it is logged escaped
    assert any("starting (stdio)\\x1b[31m" in m for m in lines)
    assert any("reconnecting in" in m for m in lines)


def test_a_server_that_cannot_start_offers_nothing_and_says_why() -> None:
    async def go():  # type: ignore[no-untyped-def]
        host = _host(McpServerConfig(command="/nonexistent/mcp-server"))
        try:
            return await host.offered(Grant.parse(["t.*"])), await host.describe()
        finally:
            await host.aclose()

    offered, described = run(go())
    assert offered.tools == [] and "not connected" in offered.down["t"]
    assert isinstance(described["t"], str) and "not connected" in described["t"]
