"""A small local MCP server for the quick start: two harmless tools, spoken over stdio.

`examples/quickstart.yaml` names it `demo` under `tools.mcpServers` (`python mcp_tools.py`, run
in this folder), so its tools are `demo.now` and `demo.echo`; hookwise starts it the first time
a run granted one of them needs it. It is written with the official MCP Python SDK (`mcp`), which
hookwise installs, and makes no network access and no file access:

- `now`: the current date and time in UTC (ISO 8601), or in the UTC offset it is given;
- `echo`: returns the text it was given.

Try it alone: `hookwise tools list -c examples/quickstart.yaml` lists both tools.
"""

from __future__ import annotations

import asyncio
import datetime as dt

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("hookwise-demo-tools", log_level="WARNING")


@server.tool(
    description="The current date and time, ISO 8601. `utc_offset_hours` (default 0) picks the"
    " time zone by its offset from UTC, e.g. 2 or -5.5."
)
def now(utc_offset_hours: float = 0) -> str:
    if not -14 <= utc_offset_hours <= 14:
        raise ToolError("utc_offset_hours must be between -14 and 14")
    zone = dt.timezone(dt.timedelta(hours=utc_offset_hours))
    return dt.datetime.now(zone).isoformat(timespec="seconds")


@server.tool(description="Return the text it was given, unchanged.")
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    asyncio.run(server.run_stdio_async())
