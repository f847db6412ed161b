"""Small ASGI helpers for the hook endpoint: JSON responses, the error shape, reading the body.

The hook endpoint is a plain ASGI application mounted into Litestar, because it must
authenticate before it reads the body, refuse an oversized body as soon as it crosses the limit,
and time out a slow one; these helpers do that with no per-request allocation beyond the body.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Coroutine, Generator, Iterable
from typing import Any

import msgspec
from litestar.types import Receive, Send

from ...engine.errors import RequestError
from .http import write_whole

_JSON = (b"content-type", b"application/json")
encode_json = msgspec.json.Encoder().encode


async def send_json(
    send: Send,
    status: int,
    body: bytes | None,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> int:
    """Send a complete response; `body=None` sends no body and no content type (204). Returns
    `status`, for the caller to record. A JSON body with no other headers is written in one
    step into the server's cycle when it can be (`http.write_whole`)."""
    if body is not None and not headers and write_whole(send, status, body):
        return status
    hdrs: list[tuple[bytes, bytes]] = list(headers)
    if body is not None:
        hdrs.append(_JSON)
        hdrs.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body or b"", "more_body": False})
    return status


async def send_error(
    send: Send, error: RequestError, headers: Iterable[tuple[bytes, bytes]] = ()
) -> int:
    return await send_json(send, error.status, encode_json(error.to_body()), headers)


def content_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                raise RequestError(
                    400, "invalid_content_length", "Content-Length is not a number"
                ) from None
    return None


def _poll(receive: Receive) -> tuple[Any, Awaitable[Any] | None]:
    """Start `receive()`: (the message, None) when it is there without waiting (a small body has
    usually arrived with the headers), else (None, an awaitable that finishes the call)."""
    pending = receive()
    if not isinstance(pending, Coroutine):
        return None, pending
    try:
        yielded = pending.send(None)
    except StopIteration as done:
        return done.value, None
    return None, _resume(pending, yielded)


@types.coroutine
def _resume(pending: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Finish a coroutine that `_poll` started, as `await` would have (send and throw pass
    through, so a timeout's cancellation reaches it)."""
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:
            try:
                yielded = pending.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = pending.send(sent)
            except StopIteration as done:
                return done.value


async def read_body(receive: Receive, *, declared: int | None, limit: int, timeout: float) -> bytes:
    """Read the whole body, refusing it (413) as soon as it crosses `limit` bytes and (408) when
    it has not arrived within `timeout` seconds. A body that is all there at once is returned
    without arming a timer (a timer per request costs more than the rest of the read)."""
    if declared is not None and declared > limit:
        raise RequestError(413, "payload_too_large", f"the payload is larger than {limit} bytes")
    message, rest = _poll(receive)
    if (
        message is not None
        and message["type"] == "http.request"
        and not message.get("more_body", False)
    ):
        body: bytes = message.get("body", b"")
        if len(body) > limit:
            raise RequestError(
                413, "payload_too_large", f"the payload is larger than {limit} bytes"
            )
        return body
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                if message is None:
                    message = await (rest if rest is not None else receive())
                    rest = None
                if message["type"] == "http.disconnect":
                    raise RequestError(400, "client_disconnected", "the client went away")
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > limit:
                        raise RequestError(
                            413, "payload_too_large", f"the payload is larger than {limit} bytes"
                        )
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
                message = None
    except TimeoutError:
        raise RequestError(
            408, "body_timeout", f"the request body did not arrive within {timeout:g} seconds"
        ) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
