"""The frames between the gateway and SQLite's writer process (see `writer_process`): a 4-byte
big-endian length, then a pickle, over the process's stdin and stdout.

Gateway to writer: a list of jobs `(id, rows, call, one_statement)`, sent once per turn of the
event loop: `id` 0 for a job nobody awaits, `rows` as `(sink key, row)` pairs (`inserts.SINKS`),
or `call`, a pickled function of the cursor (`writes`: module-level functions, never closures);
a `Late` argument is worked out as the job leaves. Writer to gateway: `("ready", None)` once the
connection is open and migrated (or `("failed", error)`), `("done", [(id, ok, value or
error)])` after each commit, and `("log", (level, logger, message))` for its log lines, which
the gateway writes as its own.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
from collections.abc import Callable
from typing import Any

from ..base import StoreUnavailable
from .writer import Late

LENGTH = struct.Struct(">I")


#: what `take_frame` returns when no whole frame is there yet
NO_FRAME = object()


def frame(obj: Any) -> bytes:
    """`obj` as one frame."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return LENGTH.pack(len(data)) + data


def take_frame(buf: bytearray) -> Any:
    """The first whole frame in `buf`, unpickled and taken out of it; `NO_FRAME` if there is
    none yet."""
    if len(buf) < LENGTH.size:
        return NO_FRAME
    (size,) = LENGTH.unpack_from(buf)
    end = LENGTH.size + size
    if len(buf) < end:
        return NO_FRAME
    obj = pickle.loads(memoryview(buf)[LENGTH.size : end])
    del buf[:end]
    return obj


class WriterGone(StoreUnavailable):
    """The writer process exited before it answered for a write."""


class _Pickler(pickle.Pickler):
    """Pickles a job's call, working out its `Late` arguments."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, Late):
            return ("late", obj())
        return None


def pickle_call(fn: Callable[[Any], Any]) -> bytes:
    """A job's function of the cursor, pickled (by reference: module-level functions and
    partials of them), its `Late` arguments taken now."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(fn)
    return buf.getvalue()


def read_exactly(fd: int, size: int) -> bytes:
    """`size` bytes from `fd`, waiting for them; EOFError if the stream ends first."""
    out = bytearray()
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            raise EOFError("the writer process ended its output")
        out += chunk
    return bytes(out)


def round_trips(value: Any) -> bool:
    """`value` pickles, and unpickles (an exception whose `__init__` takes more than its
    message pickles, then fails to load)."""
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:
        return False
    return True


def unpickle_call(data: bytes) -> Callable[[Any], Any]:
    """The writer process's side of `pickle_call` (a `Late` argument arrives as its value)."""
    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = lambda pid: pid[1]  # type: ignore[method-assign]
    return unpickler.load()  # type: ignore[no-any-return]
