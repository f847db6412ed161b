"""The HTTP/1.1 protocol the gateway serves with: uvicorn's httptools protocol, JSON everywhere.

uvicorn answers malformed requests itself (a bad `Content-Length`, `Transfer-Encoding` beside
`Content-Length`, a bad chunk size, control characters in a header, a lowercase method) with a
`text/plain` 400. `JsonHttpProtocol` overrides that to send the gateway's error shape, and adds
what the parser lacks:

- a limit on the request line and headers together (`max_head_bytes`): beyond it the request is
  answered `431 headers_too_large` before anything else (authentication included) sees it, and
  the parser never holds more than the limit plus one read;
- a header read timeout (`head_timeout`): a request whose line and headers have not all arrived
  within it (counted from its first byte, or from the connection's start) is answered
  `408 header_timeout` and the connection is closed, so dribbling clients cannot hold sockets.
  One timer per connection checks it (re-armed only when it fires), not one per request;
- one `send()` per response: uvicorn writes the status line and headers, then the body, as two
  writes (two system calls, often two packets); each request's cycle writes through
  `_OneWrite`, which holds the head back and sends it with the first body part;
- `write_whole`: a complete JSON response written straight into the cycle, its state set as
  uvicorn's `send` sets it, without two ASGI messages through uvicorn's generic `send` (which
  checks every header with two regular expressions, lower-cases and re-joins them): the hook
  endpoint answers every request so (`asgi.send_json`), falling back to `send` for anything
  else (a paused transport, a client gone, extra headers, `HEAD`, an access log).

Every one of these answers carries `Connection: close` and the connection is closed after it:
after a framing error nothing later on the connection can be trusted. What cannot be JSON: a
connection closed before any byte of a request arrived (nothing to answer), a TLS handshake or
other non-HTTP bytes (answered with the JSON 400 all the same, which such a client cannot read),
an idle keep-alive connection that uvicorn closes after its keep-alive timeout (no request), and
uvicorn's own `text/plain` 500 for an application that raises or never answers (the gateway's
app catches every exception and answers JSON itself, so that one is not reached).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httptools
import msgspec
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

_encode = msgspec.json.Encoder().encode
log = logging.getLogger("hookwise.http")


def error_response(status: int, code: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response in the gateway's JSON shape, closing the connection."""
    body = _encode({"ok": False, "error": message, "code": code})
    return b"".join(
        [
            STATUS_LINE[status],
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
    )


_JSON_HEAD = b"content-type: application/json\r\ncontent-length: "
_CLOSE_HEAD = b"connection: close\r\n"


def write_whole(send: Any, status: int, body: bytes) -> bool:
    """Write a complete `application/json` response with `body` through the uvicorn cycle that
    `send` belongs to, in one write, exactly as its `send` would for the two ASGI messages
    (start with content type and length, then the whole body); False, having written nothing,
    when `send` is not a plain cycle's or the cycle is not in a state this path handles (the
    caller then sends the messages)."""
    cycle = getattr(send, "__self__", None)
    if (
        type(cycle) is not RequestResponseCycle
        or cycle.response_started
        or cycle.disconnected
        or cycle.flow.write_paused
        or cycle.access_log
        or cycle.scope["method"] == "HEAD"
        or status not in STATUS_LINE
    ):
        return False
    parts = [STATUS_LINE[status]]
    for name, value in cycle.default_headers:  # made by uvicorn from its config (server, date)
        parts += (name, b": ", value, b"\r\n")
    parts += (_JSON_HEAD, str(len(body)).encode(), b"\r\n")
    keep_alive = cycle.keep_alive
    if not keep_alive:
        parts.append(_CLOSE_HEAD)
    parts += (b"\r\n", body)
    cycle.response_started = True
    cycle.waiting_for_100_continue = False
    cycle.chunked_encoding = False
    cycle.expected_content_length = 0
    transport: Any = cycle.transport  # ours (`_OneWrite`) once the headers were read
    if type(transport) is _OneWrite:
        transport.write_now(b"".join(parts))
    else:
        transport.write(b"".join(parts))
    cycle.response_complete = True
    cycle.message_event.set()
    if not keep_alive:
        transport.close()
    cycle.on_response()
    return True


class JsonHttpProtocol(HttpToolsProtocol):
    """See the module docstring; subclass with `configured()` to set the limits."""

    max_head_bytes = 32768
    head_timeout = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # from the connection's start, or a request's end, to headers' end
        self._pending = 0  # bytes received while in the head (bounds what the parser holds)
        self._head_size = 0  # the request line and headers of this request, as parsed
        self._head_timer: asyncio.TimerHandle | None = None
        #: loop time at which the head being read began; None between heads
        self._head_since: float | None = None

    @classmethod
    def configured(cls, *, max_head_bytes: int, head_timeout: float) -> type[JsonHttpProtocol]:
        return type(
            "JsonHttpProtocol",
            (cls,),
            {"max_head_bytes": max_head_bytes, "head_timeout": head_timeout},
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_since = self.loop.time()
        self._arm_head_timer(self.head_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _arm_head_timer(self, delay: float) -> None:
        self._head_timer = self.loop.call_later(delay, self._check_head)

    def _stop_head_timer(self) -> None:
        self._head_since = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _check_head(self) -> None:
        """The connection's head timer: 408 if the head being read is too old, else wait for
        the rest of its time (or, between heads, for the next head to arm it again)."""
        self._head_timer = None
        since = self._head_since
        if since is None:
            return
        left = since + self.head_timeout - self.loop.time()
        if left > 0:
            self._arm_head_timer(left)
        else:
            self._head_timed_out()

    def _head_timed_out(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # a response is still being written: just stop reading
            return
        seconds = f"{self.head_timeout:g}"
        self._refuse(
            408, "header_timeout", f"the request headers did not arrive within {seconds} seconds"
        )

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._stop_head_timer()
        if not self.transport.is_closing():
            peer = self.client[0] if self.client else "?"
            log.info("%d %s from %s (connection closed)", status, code, peer)
            self.transport.write(error_response(status, code, message))
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self._in_head:
            self._pending += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._head_size > self.max_head_bytes:
                self._too_large()
            else:
                self._refuse(400, "malformed_request", "the HTTP request is malformed")
            return
        if self._in_head and self._pending > self.max_head_bytes:
            self._too_large()  # a line or header that never ends: the parser holds it so far

    def _too_large(self) -> None:
        self._refuse(
            431,
            "headers_too_large",
            f"the request line and headers are larger than {self.max_head_bytes} bytes",
        )

    def _count(self, size: int) -> None:
        self._head_size += size
        if self._head_size > self.max_head_bytes:
            raise _HeadTooLarge  # the parser reports it as an error; data_received answers 431

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "malformed_request", "the HTTP request is malformed")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_size = 0
        self._head_since = self.loop.time()
        if self._head_timer is None:
            self._arm_head_timer(self.head_timeout)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        size = self._head_size + len(name) + len(value) + 4
        self._head_size = size
        if size > self.max_head_bytes:
            raise _HeadTooLarge  # the parser reports it as an error; data_received answers 431
        # uvicorn's own `on_header`, inlined: it runs for every header of every request
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_since = None  # the timer stays armed: it stops when it next fires
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = _OneWrite(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._pending = 0


class _HeadTooLarge(Exception):
    pass


class _OneWrite:
    """The transport as one request's cycle sees it: the cycle's first write (the response's
    status line and headers) is held and sent with the next write (the body), so a complete
    response leaves in one `send()`. A head with no write after it (a streamed body that is
    not ready yet) goes out at the loop's next turn, and before the connection is closed."""

    __slots__ = ("_held", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._started = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + data)
        elif not self._started and not data.startswith(b"HTTP/1.1 100 "):
            self._started = True
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)  # "100 Continue", or a streamed body's later parts

    def write_now(self, data: bytes) -> None:
        """Write a whole response at once (after any head still held)."""
        self._started = True
        held = self._held
        if held is not None:
            self._held = None
            data = held + data
        self._transport.write(data)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
