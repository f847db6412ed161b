"""The tool host: the tools a grant offers a run, and one call with the run loop's limits.

One `McpConnection` per configured server, shared by every run of the process. `offered(grant)`
lists only the servers the grant names (connecting them on first use) and keeps only the tools
it allows; a server that cannot be reached offers nothing (logged, and said by `describe`).
`call` bounds one call by `callTimeoutSeconds`, caps the result at `maxResultBytes`, and turns
every failure into an outcome (`ok`, `error`, `timeout`) with a text the model can read.

A server that is down when a run starts (reconnecting after a crash) is named in the offer's
`down`, with why; the tools it listed before stay offered, so a call of one is answered with the
error result the model reads ("MCP server 'x' is not connected: ..."), as any call made while a
server is down is. A server that never listed its tools offers none.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any, Literal

import attrs

from ...engine.config.grants import Grant
from ...engine.config.models import ToolsConfig
from .. import metrics
from .connection import McpConnection, ServerDown, ToolInfo, message_limit
from .results import CUT_CODE, CUT_KEY, cap, result_text

log = logging.getLogger("hookwise.tools")

Outcome = Literal["ok", "error", "timeout"]


@attrs.frozen
class ToolOutcome:
    """The end of one call: what the model sees (`text`, capped) and what the record keeps."""

    outcome: Outcome
    text: str
    result_bytes: int
    duration: float
    truncated: bool = False


@attrs.frozen
class Offer:
    """What a grant offers a run now: the tools, and the servers that are down (name: why)."""

    tools: list[ToolInfo]
    down: dict[str, str] = attrs.field(factory=dict)


class ToolHost:
    """The configured MCP servers of this process."""

    def __init__(self, config: ToolsConfig, *, base_dir: Path) -> None:
        self.config = config
        self.connections = {
            name: McpConnection(
                name,
                server,
                base_dir=base_dir,
                max_message=message_limit(config.max_result_bytes),
            )
            for name, server in config.mcp_servers.items()
        }

    @property
    def limits(self) -> ToolsConfig:
        return self.config

    async def offered(self, grant: Grant) -> Offer:
        """The granted tools of every server the grant names, in the servers' order, and the
        servers that are down (see the module docstring)."""
        names = [n for n in self.connections if n in grant.server_names]
        listed = await asyncio.gather(*(self._tools_of(n) for n in names))
        tools = [t for found, _ in listed for t in found if grant.allows(t.server, t.name)]
        down = {n: why for n, (_, why) in zip(names, listed, strict=True) if why is not None}
        return Offer(tools, down)

    async def _tools_of(self, name: str) -> tuple[tuple[ToolInfo, ...], str | None]:
        connection = self.connections[name]
        try:
            return await connection.tools(), None
        except Exception as e:
            why = _short(e)
            log.warning(
                "MCP server %s is down (%s); offering the %d tools it listed before",
                name,
                why,
                len(connection.known),
            )
            return connection.known, why

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call `server.tool`; never raises (bar cancellation)."""
        from mcp.shared.exceptions import MCPError  # the SDK: loaded once a server is used

        start = time.monotonic()
        outcome: Outcome = "ok"
        cut: int | None = None
        try:
            connection = self.connections.get(server)
            if connection is None:
                raise ServerDown(f"there is no MCP server {server!r}")
            await connection.client()  # connecting is not the call's time
            start = time.monotonic()
            result = await asyncio.wait_for(
                connection.call(tool, arguments), self.config.call_timeout_seconds
            )
            text = result_text(result)
            if getattr(result, "is_error", False):
                outcome = "error"
        except TimeoutError:
            outcome = "timeout"
            text = (
                f"the tool {server}.{tool} did not answer within "
                f"{self.config.call_timeout_seconds:g} s and was cancelled"
            )
        except ServerDown as e:
            outcome, text = "error", str(e)
        except MCPError as e:
            data = e.error.data if e.error.code == CUT_CODE else None
            if isinstance(data, dict) and isinstance(data.get(CUT_KEY), int):
                cut = data[CUT_KEY]  # the transport cut an oversized message
                text = str(data.get("text", ""))
                if not text:
                    outcome, text = "error", f"the call failed: {e.error.message}"
            else:
                outcome, text = "error", f"the call failed: {_short(e)}"
        except Exception as e:
            outcome, text = "error", f"the call failed: {_short(e)}"
        duration = time.monotonic() - start
        shown, size, truncated = cap(text, self.config.max_result_bytes, cut)
        metrics.tool_call(server, tool, outcome, duration)
        return ToolOutcome(outcome, shown, size, duration, truncated)

    async def describe(self) -> dict[str, list[ToolInfo] | str]:
        """Every server's tools, or why it could not be reached (for `hookwise tools list`)."""

        async def one(name: str) -> list[ToolInfo] | str:
            try:
                return list(await self.connections[name].tools())
            except Exception as e:
                return _short(e)

        results = await asyncio.gather(*(one(n) for n in self.connections))
        return dict(zip(self.connections, results, strict=True))

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.connections.values()))


def _short(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return text[:300]


def arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
