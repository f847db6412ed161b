"""`hookwise tools list`: every configured MCP server's tools, one `server.tool` per line with its
description, or, for a server that cannot be reached, why; and the server lines `config check`
prints. Connects to the servers the way the gateway does (stdio servers are started, then
stopped), without starting the gateway."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any
from urllib.parse import urlsplit

from ...engine.config.load import load_config
from ...engine.config.models import ToolsConfig
from ..logs import escape_control
from .args import add_common_options


def server_lines(tools: ToolsConfig) -> list[str]:
    """One line per configured server: its name and how it is reached (no secrets)."""
    lines = []
    for name, server in tools.mcp_servers.items():
        if server.url:
            parts = urlsplit(server.url)
            where = f"Streamable HTTP {parts.scheme}://{parts.hostname}" + (
                f":{parts.port}" if parts.port else ""
            )
        else:
            where = f"stdio {server.command}"
        lines.append(f"MCP server {name}: {where}")
    return lines


def cmd_tools_list(args: argparse.Namespace) -> int:
    from ..tools.host import ToolHost

    loaded = load_config(args.config)
    if not loaded.config.tools.mcp_servers:
        print("hookwise: no MCP servers configured (tools.mcpServers)", file=sys.stderr)
        return 0

    async def describe() -> dict[str, Any]:
        host = ToolHost(loaded.config.tools, base_dir=loaded.base_dir)
        try:
            return await host.describe()
        finally:
            await host.aclose()

    failed = 0
    for name, found in asyncio.run(describe()).items():
        if isinstance(found, str):
            failed += 1
            print(f"{name}: cannot connect: {escape_control(found)}")
            continue
        for tool in found:
            summary = " ".join(tool.description.split())
            print(f"{tool.qualified}\t{escape_control(summary)}")
    return 1 if failed else 0


def add_cli(sub: Any) -> None:
    tools = sub.add_parser("tools", help="MCP tools", description="The MCP tools runs may use.")
    tools_sub = tools.add_subparsers(dest="tools_command", metavar="COMMAND", required=True)
    listing = tools_sub.add_parser(
        "list",
        help="list every configured server's tools",
        description="Connect to every server of tools.mcpServers and print one server.tool per"
        " line with its description (or why a server could not be reached). Exit 1 if one"
        " could not.",
    )
    add_common_options(listing)
    listing.set_defaults(func=cmd_tools_list)
