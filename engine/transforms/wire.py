"""The framing between the gateway and its sandbox workers: length-prefixed messages.

Each message is a 4-byte big-endian length and a body. Requests (gateway to worker) are pickled
(the worker trusts the gateway; pickle carries any payload, big integers included); replies
(worker to gateway) are msgpack, so a worker that V8 code took over still cannot make the
gateway run anything by what it sends back (values msgpack cannot carry are sent as their
`str()`). Requests:
`["load", tid, spec]`, `["call", tid, input, timeout_ms]`. Replies (worker to gateway), one per
request and in order: `["ok", value]` or `["err", kind, reason, detail]` where kind is `failed`,
`timeout` or `load`. A call that asks when it ran (`["call", tid, input, timeout_ms, 1]`: see
`executions`) has `[start_ns, end_ns, pid]` added at the end of its reply. A worker handles one
request at a time, so replies need no ids.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgspec

from ..frames import NO_FRAME, Closed, frame, read_frame, take_frame, write_all

MAX_FRAME = 64 * 1024 * 1024

_encode = msgspec.msgpack.Encoder(enc_hook=str).encode
_decode = msgspec.msgpack.Decoder().decode

#: the other side closed its end (a worker that died, or a gateway that went away), or sent
#: something that is not a frame we take
WireClosed = Closed


def request_frame(message: Any) -> bytes:
    return frame(pickle.dumps(message, protocol=5))


def write_reply(fd: int, message: Any) -> None:
    """Send a reply (worker side). Raises `OverflowError`/`TypeError` for a value msgpack cannot
    carry (an integer beyond 64 bits)."""
    write_all(fd, frame(_encode(message)))


def read_request(fd: int) -> Any:
    """The next request (worker side)."""
    return pickle.loads(read_frame(fd, limit=MAX_FRAME))


def _reply(body: memoryview | bytes) -> Any:
    try:
        return _decode(body)
    except msgspec.DecodeError as exc:
        raise WireClosed(f"unreadable reply: {exc}") from None


def take_reply(buffer: bytearray) -> Any:
    """The first complete reply in `buffer` (removed from it), or None when there is none yet;
    `WireClosed` when the buffer holds something that is not a reply."""
    reply = take_frame(buffer, _reply, limit=MAX_FRAME)
    return None if reply is NO_FRAME else reply


def read_reply(fd: int) -> Any:
    """The next reply (gateway side); `WireClosed` when the worker is gone or sent garbage."""
    return _reply(read_frame(fd, limit=MAX_FRAME))
