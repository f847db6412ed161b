"""The stdio transport of a tool server, bounded: what a child process writes cannot stall or
grow the gateway.

The SDK's `stdio_client` joins every read to the unfinished line before splitting it (quadratic
in a message's size: a 50 MiB result held the event loop for a minute), holds a message of any
size, and logs each non-JSON stdout line as an ERROR with a traceback. This transport is the
SDK's (the same spawn, minimal environment, own process group and shutdown sequence, imported
from `mcp.client.stdio`) with another stdout reader:

- linear: each read is scanned once for newlines; the pieces of an unfinished line are kept in a
  list and joined once, when the line ends;
- bounded: a message longer than `max_message` bytes is not kept. Its first `max_message`
  bytes are, and the rest is read and dropped; its request is answered with a JSON-RPC error
  (`CUT_CODE`) whose data holds the message's full size and, for a tool result, the start of its
  first text block (read from the kept prefix), which the host gives the model cut at
  `maxResultBytes` and marked truncated (the SDK would refuse a rebuilt result of a tool with an
  output schema). Either way the call ends when the message does, never by its timeout;
- off the loop: a message over `THREAD_PARSE` bytes is parsed in a worker thread;
- quiet: a stdout line that is not JSON-RPC is dropped with one WARNING (the line's first
  `NOISE_SHOWN` characters, escaped), at most one per `NOISE_EVERY` seconds per server, the rest
  counted (`hookwise_tool_output_dropped{what="stdout_noise"}`).

The stderr side is `hookwise.server.tools.stderr` (a thread; no MCP SDK there). This module
imports the SDK, so it is imported only when tool servers are configured: a gateway without tool
servers never loads the SDK (about half a second of start-up).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.stdio import (
    StdioServerParameters,
    _aclose_all,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _stop_server_process,
    get_default_environment,
)
from mcp.shared.message import SessionMessage

from .. import metrics
from ..logs import escape_control
from .results import CUT_CODE, CUT_KEY

log = logging.getLogger("hookwise.tools")

#: the most read from the server's stdout at once
READ_BYTES = 1024 * 1024
#: messages above this are parsed in a worker thread, not on the event loop
THREAD_PARSE = 256 * 1024
#: a non-JSON stdout line is logged with this many characters of it
NOISE_SHOWN = 200
#: at most one warning about stdout noise per server this often (seconds)
NOISE_EVERY = 10.0

_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
_TEXT = re.compile(rb'"content"\s*:\s*\[\s*\{(?:\s*"type"\s*:\s*"text"\s*,)?\s*"text"\s*:\s*"')


class _StdoutReader:
    """Splits the server's stdout into messages (see the module docstring)."""

    def __init__(self, server: str, max_message: int) -> None:
        self.server = server
        self.max_message = max_message
        self._parts: list[bytes] = []
        self._size = 0
        self._kept = 0
        self._noise_logged = -NOISE_EVERY
        self._noise_unlogged = 0

    def feed(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """The lines `chunk` ends: (what was kept of each, its full size)."""
        out: list[tuple[bytes, int]] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            room = self.max_message - self._kept
            if room > 0 and piece:
                part = piece[:room]
                self._parts.append(part)
                self._kept += len(part)
            self._size += len(piece)
            if end < 0:
                return out
            out.append((b"".join(self._parts), self._size))
            self._parts, self._size, self._kept = [], 0, 0
            start = end + 1

    def noise(self, line: bytes) -> None:
        now = time.monotonic()
        metrics.tool_output_dropped(self.server, "stdout_noise", 1)
        if now - self._noise_logged < NOISE_EVERY:
            self._noise_unlogged += 1
            return
        more = f" ({self._noise_unlogged} more not logged)" if self._noise_unlogged else ""
        self._noise_logged, self._noise_unlogged = now, 0
        shown = escape_control(line[:NOISE_SHOWN].decode("utf-8", errors="replace"))
        log.warning(
            "MCP server %s wrote a non-JSON-RPC line to stdout%s: %s", self.server, more, shown
        )


def parse(line: bytes) -> SessionMessage | None:
    """A JSON-RPC message, or None for a line that is not one."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError:
        return None


def oversized(kept: bytes, size: int, limit: int) -> SessionMessage | None:
    """What answers a message of `size` bytes of which `kept` were kept: a cut tool result, or
    an error for its request; None when no request id can be read from it."""
    found = _ID.search(kept, 0, 512)
    if found is None or b'"method"' in kept[: found.start()]:
        return None  # a notification or a request from the server: dropped
    request_id: Any = json.loads(found.group(1))
    error: dict[str, Any] = {
        "code": CUT_CODE,
        "message": f"the MCP server's message was {size} bytes, over the limit of {limit};"
        " the rest was dropped",
        "data": {CUT_KEY: size},
    }
    text = _TEXT.search(kept)
    if text is not None and b'"result"' in kept[: text.start()]:
        # the host shows at most maxResultBytes, an eighth of the cap (`message_limit`)
        start = text.end()
        error["data"]["text"] = _json_string_prefix(kept[start : start + limit // 8])
    message = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False))


def _json_string_prefix(data: bytes) -> str:
    """The decoded start of a JSON string whose closing quote may be missing."""
    end = data.find(b'"')
    while end > 0 and data[end - 1 : end] == b"\\":  # an escaped quote: look further
        backslashes = len(data[:end]) - len(data[:end].rstrip(b"\\"))
        if backslashes % 2 == 0:
            break
        end = data.find(b'"', end + 1)
    body = data if end < 0 else data[:end]
    for trim in range(0, 12):  # a cut escape (`\u12`) or character: shorten until it parses
        try:
            decoded = json.loads(b'"' + body[: len(body) - trim] + b'"')
            return decoded if isinstance(decoded, str) else ""
        except ValueError:
            continue
    return ""


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    *,
    name: str,
    max_message: int,
    errlog: Any,
) -> AsyncGenerator[TransportStreams, None]:
    """The SDK's `stdio_client` with the bounded stdout reader (see the module docstring)."""
    command = await _get_executable_command(server.command)
    process = await _create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    reader = _StdoutReader(name, max_message)

    async def deliver(kept: bytes, size: int) -> None:
        if not kept.strip() and size == len(kept):
            return
        message: SessionMessage | None
        if size > len(kept):
            message = await anyio.to_thread.run_sync(oversized, kept, size, max_message)
            log.warning(
                "MCP server %s sent a %d-byte message, over the limit of %d bytes: %s",
                name,
                size,
                max_message,
                "answered cut" if message is not None else "dropped",
            )
            metrics.tool_output_dropped(name, "stdout_bytes", size - len(kept))
        elif size > THREAD_PARSE:
            message = await anyio.to_thread.run_sync(parse, kept)
        else:
            message = parse(kept)
        if message is None:
            if size <= len(kept):
                reader.noise(kept)
            return
        await read_stream_writer.send(message)

    async def stdout_reader() -> None:
        assert process.stdout
        try:
            async with read_stream_writer:
                try:
                    while True:
                        try:
                            chunk = await process.stdout.receive(READ_BYTES)
                        except anyio.EndOfStream:
                            break
                        for kept, size in reader.feed(chunk):
                            try:
                                await deliver(kept, size)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    await _drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass

    async def stdin_writer() -> None:
        assert process.stdin
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    data = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send((data + "\n").encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(0.5):
            await writer_done.wait()
        await _stop_server_process(process)
        await _aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
