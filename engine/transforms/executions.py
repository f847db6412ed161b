"""Where and when a transform call ran in its sandbox worker, for a caller that asks.

A caller that wants to know (the gateway, while it traces a request: its `transform.execute`
spans) sets `executions` to a list around the calls it makes. Each call the worker pool sends
then asks its worker to report, with the reply, when it started and ended executing the call
(`time.time_ns()` in the worker) and the worker's pid, and the pool appends an `Execution` to
the list. Unset (the default), a call's request and reply are what they always were: nothing is
measured or sent. A call that gets no reply (its worker killed at the time limit, or dead)
reports nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import NamedTuple


class Execution(NamedTuple):
    """One call as its worker saw it."""

    #: when the worker started and ended executing it (`time.time_ns()` in the worker)
    start_ns: int
    end_ns: int
    #: the worker process's id
    pid: int
    #: the stable code of the call's failure (`transform_failed`, `transform_timeout`); None:
    #: it returned a value
    error: str | None


#: the list the calls made here report to (None: nobody asks; see the module's docstring)
executions: ContextVar[list[Execution] | None] = ContextVar(
    "hookwise_transform_executions", default=None
)

#: a worker's failure kind (`wire`) -> the stable code the request is refused with
ERROR_CODES = {"failed": "transform_failed", "timeout": "transform_timeout"}


def report(sink: list[Execution], reply: list[object]) -> None:
    """Append what a worker reported with `reply` to `sink`: `["ok", value, timing]` or
    `["err", kind, reason, detail, timing]`, `timing` being `[start, end, pid]`; a reply
    without it adds nothing."""
    if len(reply) != (3 if reply[0] == "ok" else 5):
        return
    timing = reply[-1]
    if not isinstance(timing, list) or len(timing) != 3:
        return
    start, end, pid = timing
    if not (isinstance(start, int) and isinstance(end, int) and isinstance(pid, int)):
        return  # the worker runs untrusted code: what it sends is checked, not believed
    error = None if reply[0] == "ok" else ERROR_CODES.get(str(reply[1]), "transform_failed")
    sink.append(Execution(start, end, pid, error))
