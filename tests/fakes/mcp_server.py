"""A real MCP server, written with the official SDK (`mcp`), for the tool tests and the bench.

Run as a program: `python -m tests.fakes.mcp_server stdio` speaks MCP over stdin/stdout;
`python -m tests.fakes.mcp_server http PORT` serves Streamable HTTP on 127.0.0.1:PORT at `/mcp`.
Tools: `echo` (returns its text), `fail` (a tool error, isError), `sleep` (sleeps `seconds`),
`big` (returns `size` bytes of text), `shout` (writes `size` bytes to stderr in one line, then
answers), `noise` (writes `lines` lines that are not JSON-RPC to stdout, then answers), `grow` (adds a tool named `extra` and tells the client the
list changed), `crash` (the process exits; stdio only makes sense), `count` (how many calls this
process served, to prove a call was not repeated). It writes a line to stderr on start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("hookwise-test-tools", log_level="WARNING")
_calls = {"n": 0}
#: the protocol's stdout, kept before the SDK diverts fd 1 to stderr (so `noise` can misbehave
#: as a server without that protection does)
_wire = {"fd": 1}


@server.tool(description="Return the text it was given.")
def echo(text: str) -> str:
    _calls["n"] += 1
    return text


@server.tool(description="Always fails with a tool error.")
def fail(reason: str = "it failed") -> str:
    _calls["n"] += 1
    raise ToolError(reason)


@server.tool(description="Sleep for some seconds, then answer.")
async def sleep(seconds: float) -> str:
    _calls["n"] += 1
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool(description="Return a text of the given size in bytes.")
def big(size: int) -> str:
    _calls["n"] += 1
    return "x" * size


@server.tool(description="Write one stderr line of the given size in bytes, then answer.")
def shout(size: int) -> str:
    _calls["n"] += 1
    chunk = b"e" * 65536
    left = size
    while left > 0:
        os.write(2, chunk[: min(left, len(chunk))])
        left -= len(chunk)
    os.write(2, b"\nshout done\n")
    return f"shouted {size}"


@server.tool(description="Write lines that are not JSON-RPC to stdout, then answer.")
def noise(lines: int) -> str:
    _calls["n"] += 1
    for i in range(lines):
        os.write(_wire["fd"], f"debug: not a message {i} \x1b[31m\n".encode())
    return f"noise {lines}"


@server.tool(description="Add the tool 'extra' and announce that the list changed.")
async def grow(ctx: Context) -> str:
    _calls["n"] += 1

    def extra() -> str:
        return "extra here"

    server.add_tool(extra, name="extra", description="Added at run time.")
    await ctx.notify_tools_changed()
    with contextlib.suppress(Exception):  # a 2026-07-28 connection has no legacy notification
        await ctx.request_context.session.send_tool_list_changed()
    return "grown"


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    sys.stderr.write("crashing on request\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(description="How many tool calls this process has served.")
def count() -> str:
    return str(_calls["n"])


def main(argv: list[str]) -> None:
    sys.stderr.write(f"test tools server starting ({argv[0] if argv else 'stdio'})\x1b[31m\n")
    sys.stderr.flush()
    if not argv or argv[0] == "stdio":
        _wire["fd"] = os.dup(1)
        asyncio.run(server.run_stdio_async())
    else:
        port = int(argv[1])
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=port))


class HttpServer:
    """The server above over Streamable HTTP, in a child process on a free loopback port."""

    def __init__(self) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.proc: Any = None

    def __enter__(self) -> HttpServer:
        import socket
        import subprocess
        import time
        from pathlib import Path

        repo = Path(__file__).resolve().parents[2]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.mcp_server", "http", str(self.port)],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError("the MCP test server did not start")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def stdio_command() -> dict[str, Any]:
    """The `tools.mcpServers` entry that runs the server above over stdio."""
    from pathlib import Path

    return {
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", "stdio"],
        "cwd": str(Path(__file__).resolve().parents[2]),
    }


if __name__ == "__main__":
    main(sys.argv[1:])
