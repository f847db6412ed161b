"""Length-prefixed frames over pipes: the one framing of the gateway's child processes.

A frame is a 4-byte big-endian length and a body. The sandbox workers (`engine.transforms.wire`)
and SQLite's writer process (`server/store/sqlite/writer_wire.py`) both speak it; what a body
holds (pickle one way, msgpack the other) is theirs. A reader may cap a frame's size (`limit`): a
frame announced larger than that closes the stream rather than making the reader wait for, and
hold, that much.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any, Final

HEADER: Final = struct.Struct(">I")

#: what `take_frame` returns when no whole frame is there yet
NO_FRAME: Final = object()


class Closed(EOFError):
    """The stream ended (the other side exited or closed its end), or it holds no frame we take."""


def frame(body: bytes) -> bytes:
    """`body` as one frame."""
    return HEADER.pack(len(body)) + body


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to the blocking file descriptor `fd`."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exactly(fd: int, size: int) -> bytes:
    """`size` bytes from the blocking file descriptor `fd`; `Closed` if the stream ends first."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise Closed("the other side closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _check(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise Closed(f"a message of {size} bytes is larger than the {limit} byte limit")


def read_frame(fd: int, *, limit: int | None = None) -> bytes:
    """The next frame's body from the blocking file descriptor `fd`."""
    (size,) = HEADER.unpack(read_exactly(fd, HEADER.size))
    _check(size, limit)
    return read_exactly(fd, size)


def take_frame(
    buffer: bytearray, decode: Callable[[memoryview], Any], *, limit: int | None = None
) -> Any:
    """The first whole frame in `buffer`, decoded by `decode` (which reads it in place, without a
    copy) and taken out of the buffer; `NO_FRAME` when there is none yet."""
    if len(buffer) < HEADER.size:
        return NO_FRAME
    (size,) = HEADER.unpack_from(buffer)
    _check(size, limit)
    end = HEADER.size + size
    if len(buffer) < end:
        return NO_FRAME
    with memoryview(buffer) as view:
        body = view[HEADER.size : end]
        try:
            value = decode(body)
        finally:
            body.release()
    del buffer[:end]
    return value
