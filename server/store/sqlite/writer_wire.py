"""The frames between the gateway and SQLite's writer process (see `writer_process`): pickles in
the child processes' one framing (`engine/frames.py`), over the process's stdin and stdout.

Gateway to writer: a list of jobs `(id, rows, call, one_statement)`, sent once per turn of the
event loop: `id` 0 for a job nobody awaits, `rows` as `(sink key, row)` pairs (`inserts.SINKS`),
or `call`, a pickled function of the cursor (`writes`: module-level functions, never closures);
a `Late` argument is worked out as the job leaves. Writer to gateway: `("ready", None)` once the
connection is open and migrated (or `("failed", error)`), `("done", [(id, ok, value or
error)])` after each commit, each batch's results led by its mark `(0, True, (start_ns, end_ns,
size))` (`GroupCommitWriter.run_batch`; a batch that failed as a whole has none), and `("log",
(level, logger, message))` for its log lines, which the gateway writes as its own.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable
from typing import Any

from ....engine import frames
from ....engine.frames import NO_FRAME
from ..base import StoreUnavailable
from .writer import Late

__all__ = ["NO_FRAME", "WriterGone", "frame", "pickle_call", "read_frame", "take_frame"]


def frame(obj: Any) -> bytes:
    """`obj` as one frame."""
    return frames.frame(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def take_frame(buf: bytearray) -> Any:
    """The first whole frame in `buf`, unpickled and taken out of it; `NO_FRAME` if there is
    none yet."""
    return frames.take_frame(buf, pickle.loads)


def read_frame(fd: int) -> Any:
    """The next frame from the blocking file descriptor `fd`, unpickled; `EOFError`
    (`frames.Closed`) if the stream ends first."""
    return pickle.loads(frames.read_frame(fd))


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
    return unpickler.load()
