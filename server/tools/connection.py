"""One MCP server's session in this process: connected on first use, supervised, its tools cached.

A supervisor task owns the session (the SDK's `Client`, entered and left in that one task): it
connects, then keeps a `subscriptions/listen` stream open (2026-07-28 servers) so that it learns
when the tool list changes and when the server goes away; handshake-era servers announce list
changes with `notifications/tools/list_changed`, which the message handler catches. When the
session ends (a stdio server crashed or exited, an HTTP server stopped answering) the supervisor
reconnects after a back-off (1 s, doubling, at most 30 s); calls meanwhile fail at once with the
reason, which the model sees as an error result.

A stdio server gets the SDK's minimal environment (HOME, PATH, USER, ... , not the gateway's
secrets) plus its `env`; its stdout is read by `stdio.bounded_stdio_client` (linear, a message
capped at `message_limit(maxResultBytes)` bytes, big ones parsed off the event loop) and its stderr
goes to the log, line by line, each line capped and control characters escaped. When a stdio
server's session fails or ends, `error` ends with the last lines it wrote to stderr (why it died:
`ModuleNotFoundError: No module named 'mcp'`), which `hookwise tools list` shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ...engine.config.models import McpServerConfig
from ..retry import Backoff, Retries
from .stderr import StderrTail, start_stderr_thread

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger("hookwise.tools")

#: waits between reconnects: 1 s, doubling, at most 30 s
RECONNECT = Backoff(base=1.0, cap=30.0, jitter=0.0)
CONNECT_TIMEOUT = 10.0
MAX_PAGES = 100
#: the smallest cap on one stdout message of a stdio server (a tool list may be large)
MIN_MESSAGE_BYTES = 4 * 1024 * 1024
#: how long a failed session waits for the rest of the server's stderr before saying why
STDERR_GRACE = 1.0


def load_sdk() -> None:
    """Import the MCP SDK and the transports (about half a second of CPU). A connection does it
    when it is made, with the configuration (at start-up, or a reload), so that its first call
    does not hold the event loop that long; a gateway without tool servers never loads them."""
    import mcp.client.streamable_http
    import mcp.shared._httpx_utils  # noqa: F401

    from . import stdio  # noqa: F401


def message_limit(max_result_bytes: int) -> int:
    """The cap on one stdout message of a stdio server: room for a result of `maxResultBytes`
    written as JSON (escapes can double its size, and more), and never below 4 MiB."""
    return max(MIN_MESSAGE_BYTES, 8 * max_result_bytes)


@attrs.frozen
class ToolInfo:
    """One tool of one server, as the server lists it."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.name}"


class ServerDown(Exception):
    """The server is not connected; the message says why (never a secret)."""


class McpConnection:
    """The session with one configured MCP server."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        base_dir: Path,
        max_message: int = MIN_MESSAGE_BYTES,
    ) -> None:
        load_sdk()
        self.name = name
        self._config = config
        self._base_dir = base_dir
        self._max_message = max_message
        #: what a stdio server wrote last to stderr (and how much was dropped)
        self.stderr = StderrTail()
        self._client: Client | None = None
        self._tools: tuple[ToolInfo, ...] | None = None
        #: the tools the server listed last, kept while it reconnects
        self.known: tuple[ToolInfo, ...] = ()
        self._lost = asyncio.Event()
        self._attempted = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._listing = asyncio.Lock()
        #: why the last connection attempt failed or the session ended (None while connected)
        self.error: str | None = None
        #: how many times the session was (re)established
        self.connects = 0

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def client(self, timeout: float = CONNECT_TIMEOUT) -> Client:
        """The live session, connecting first if this is the first use; `ServerDown` if not."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"hookwise-mcp-{self.name}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._attempted.wait(), timeout)
        if self._client is None:
            raise ServerDown(
                f"MCP server {self.name!r} is not connected: {self.error or 'still connecting'}"
            )
        return self._client

    async def tools(self) -> tuple[ToolInfo, ...]:
        """The server's tools, listed once and again after it said the list changed."""
        client = await self.client()
        async with self._listing:
            if self._tools is None:
                self._tools = self.known = await self._list(client)
            return self._tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """`tools/call`; the caller bounds it in time. A lost session is noticed here too."""
        client = await self.client()
        try:
            return await client.call_tool(tool, arguments)
        except (OSError, EOFError, asyncio.IncompleteReadError, ConnectionError):
            self._lost.set()
            raise
        except Exception as e:
            if "closed" in str(e).lower():
                self._lost.set()
            raise

    async def aclose(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    # the supervisor ----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        retries = Retries(RECONNECT)
        while not self._closing:
            try:
                async with self._session() as client:
                    self._client, self._tools, self.error = client, None, None
                    self.connects += 1
                    self._attempted.set()
                    retries.reset()
                    log.info("MCP server %s connected (%s)", self.name, client.protocol_version)
                    await self._watch(client)
                    self.error = "the session ended"
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # an ExceptionGroup from the SDK's task groups, too
                self.error = _describe(e)
            finally:
                self._client = None
            self.error = await self._with_stderr(self.error)
            self._attempted.set()
            if self._closing:
                break
            delay = retries.next()
            log.warning("MCP server %s: %s; reconnecting in %.0f s", self.name, self.error, delay)
            await asyncio.sleep(delay)

    async def _with_stderr(self, error: str | None) -> str | None:
        """`error` with the last stderr lines of a stdio server, once it closed its stderr."""
        if self._config.url is not None or error is None:
            return error
        deadline = time.monotonic() + STDERR_GRACE
        while not self.stderr.closed.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        lines = self.stderr.lines()
        if not lines:
            return error
        return f"{error}; its stderr ended with: " + " | ".join(lines[-3:])[-600:]

    async def _watch(self, client: Client) -> None:
        """Until the session ends: list changes mark the cached list stale."""
        self._lost.clear()
        lost = asyncio.create_task(self._lost.wait())
        listening = asyncio.create_task(self._listen(client))
        try:
            await asyncio.wait({lost, listening}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (lost, listening):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _listen(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as sub:
                async for _event in sub:
                    self._tools = None
        except Exception as e:
            if type(e).__name__ != "ListenNotSupportedError":
                return  # the stream ended: the session is gone
            await asyncio.Event().wait()  # a handshake-era server: notifications only

    async def _on_message(self, message: Any) -> None:
        import mcp_types

        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools = None

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[Client]:
        # (imported by `load_sdk` when this connection was made)
        from mcp import StdioServerParameters
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        from .stdio import bounded_stdio_client

        config = self._config
        if config.url is not None:
            http = create_mcp_http_client(headers=dict(config.headers) or None)
            async with http:
                transport = streamable_http_client(config.url, http_client=http)
                async with self._client_for(transport) as client:
                    yield client
            return
        assert config.command is not None
        cwd = Path(config.cwd) if config.cwd else None
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=str(cwd if cwd is None or cwd.is_absolute() else self._base_dir / cwd)
            if cwd
            else str(self._base_dir),
        )
        errlog, close = start_stderr_thread(self.name, self.stderr)
        try:
            transport = bounded_stdio_client(
                params, name=self.name, max_message=self._max_message, errlog=errlog
            )
            async with self._client_for(transport) as client:
                close()  # the child holds its own copy: EOF when it exits
                yield client
        finally:
            close()

    def _client_for(self, transport: Any) -> Client:
        import mcp_types
        from mcp import Client

        return Client(
            transport,
            message_handler=self._on_message,
            cache=None,
            read_timeout_seconds=None,
            client_info=mcp_types.Implementation(name="hookwise", version="1"),
        )

    async def _list(self, client: Client) -> tuple[ToolInfo, ...]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await asyncio.wait_for(client.list_tools(cursor=cursor), CONNECT_TIMEOUT)
            tools.extend(
                ToolInfo(self.name, t.name, t.description or "", dict(t.input_schema or {}))
                for t in page.tools
            )
            cursor = page.next_cursor
            if cursor is None:
                break
        return tuple(tools)


def _describe(e: BaseException) -> str:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__
