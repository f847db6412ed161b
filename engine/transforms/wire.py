"""The framing between the gateway and its sandbox workers: length-prefixed messages.

Each message is a 4-byte big-endian length and a body. Requests (gateway to worker) are pickled
(the worker trusts the gateway; pickle carries any payload, big integers included); replies
(worker to gateway) are msgpack, so a worker that V8 code took over still cannot make the
gateway run anything by what it sends back (values msgpack cannot carry are sent as their
`str()`). Requests:
`["load", tid, spec]`, `["call", tid, input]`. Replies (worker to gateway), one per request and in
order: `["ok", value]` or `["err", kind, reason, detail]` where kind is `failed`, `timeout` or
`load`. A worker handles one request at a time, so replies need no ids.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

import msgspec

_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024

_encode = msgspec.msgpack.Encoder(enc_hook=str).encode
_decode = msgspec.msgpack.Decoder().decode


class WireClosed(EOFError):
    """The other side closed its end (a worker that died, or a gateway that went away)."""


def _frame(body: bytes) -> bytes:
    return _HEADER.pack(len(body)) + body


def request_frame(message: Any) -> bytes:
    return _frame(pickle.dumps(message, protocol=5))


def write_reply(fd: int, message: Any) -> None:
    """Send a reply (worker side). Raises `OverflowError`/`TypeError` for a value msgpack cannot
    carry (an integer beyond 64 bits)."""
    write_all(fd, _frame(_encode(message)))


def write_all(fd: int, frame: bytes) -> None:
    data = memoryview(frame)
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise WireClosed("the other side closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _read_frame(fd: int) -> bytes:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > MAX_FRAME:
        raise WireClosed(f"a message of {size} bytes is larger than the {MAX_FRAME} byte limit")
    return _read_exact(fd, size)


def read_request(fd: int) -> Any:
    """The next request (worker side)."""
    return pickle.loads(_read_frame(fd))


def take_reply(buffer: bytearray) -> Any:
    """The first complete reply in `buffer` (removed from it), or None when there is none yet;
    `WireClosed` when the buffer holds something that is not a reply."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if size > MAX_FRAME:
        raise WireClosed(f"a message of {size} bytes is larger than the {MAX_FRAME} byte limit")
    end = _HEADER.size + size
    if len(buffer) < end:
        return None
    body = bytes(buffer[_HEADER.size : end])
    del buffer[:end]
    try:
        return _decode(body)
    except msgspec.DecodeError as exc:
        raise WireClosed(f"unreadable reply: {exc}") from None


def read_reply(fd: int) -> Any:
    """The next reply (gateway side); `WireClosed` when the worker is gone or sent garbage."""
    try:
        return _decode(_read_frame(fd))
    except msgspec.DecodeError as exc:
        raise WireClosed(f"unreadable reply: {exc}") from None
