"""When a write was committed, for a caller that asks: a traced request's `store.commit` span.

A caller (the hook path's accept stage, while its request is traced: `server.telemetry`) sets
`commits` to a list around the write it awaits. The store then appends a `Commit` for each
awaited write made meanwhile: when the batch that carried it started and ended (measured where
it ran: in SQLite's writer process, around the batch's transaction; on PostgreSQL, around the
accept lane's group statement on the gateway's own connection), how many writes that batch
held, and the writer process's pid (None: the gateway's own connection). Unset (the default)
nothing is kept; the SQLite writer process measures every batch anyway (two clock reads and
three integers in its answer, per batch, not per request). The in-process SQLite writer
(`store.writer: thread`) reports nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import NamedTuple


class Commit(NamedTuple):
    """The batch (or group statement) that committed a write."""

    #: when it started and ended (`time.time_ns()` where it ran)
    start_ns: int
    end_ns: int
    #: the writes it held (requests and other jobs alike)
    batch_size: int
    #: the writer process's id; None: the gateway's own connection (PostgreSQL)
    pid: int | None


#: the list the awaited writes made here report to (None: nobody asks)
commits: ContextVar[list[Commit] | None] = ContextVar("hookwise_store_commits", default=None)
