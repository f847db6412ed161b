"""The hook request's spans measured in other processes: `transform.execute` (a sandbox worker
running the request's transform) and `store.commit` (the SQLite writer process's batch, or the
PostgreSQL accept lane's group statement, that committed the request).

Neither process knows the trace: the worker reports when it ran a call and its pid with its
reply, when asked (`engine.transforms.executions`); the writer reports each batch's start and
end with its answer (`store.commits`). These context managers ask, around the stage that
awaits them, and record what came back on the request's span (`RequestSpan.child`), written at
its end: `transform.execute` under `hook.transform` (under the request's span when that stage is
no span of its own: one span per call, which costs a few µs beside a transform's hundreds);
`store.commit` under `hook.accept` only when that stage is a span (slow, failed, or `stages:
true`): a commit shared by a whole batch says little on a fast request. Used only while a
request is traced: tracing off or unsampled, nothing here runs.
"""

from __future__ import annotations

from contextvars import Token
from typing import Any

from ...engine.transforms.executions import Execution, executions
from ..store.commits import Commit, commits
from .request import RequestSpan, Stage, error_type


class Executions:
    """Around a traced request's transform calls: each one a `transform.execute` span."""

    __slots__ = ("_request", "_reset", "_rule", "_runtime", "_sink")

    def __init__(self, request: RequestSpan, rule_id: str, runtime: str) -> None:
        self._request, self._rule, self._runtime = request, rule_id, runtime
        self._sink: list[Execution] = []
        self._reset: Token[list[Execution] | None] | None = None

    def __enter__(self) -> None:
        self._reset = executions.set(self._sink)

    def __exit__(self, *exc_info: object) -> None:
        assert self._reset is not None
        executions.reset(self._reset)
        # the last call ended the stage when it failed: a JS transform's exception is the
        # worker's success (its outcome, read here), a refusal of what it returned is the
        # gateway's; either is the call's `error.type` (the refusal's stable code)
        failed = error_type(exc_info[1]) if self._sink else None
        last = len(self._sink) - 1
        for i, call in enumerate(self._sink):
            attributes = {
                "hookwise.transform.runtime": self._runtime,
                "hookwise.worker.pid": call.pid,
                "hookwise.rule": self._rule,
            }
            self._request.child(
                "transform.execute",
                call.start_ns,
                call.end_ns,
                attributes,
                "hook.transform",
                error=call.error or (failed if i == last else None),
            )


class Accept:
    """The accept stage (`hook.accept`) of a traced request, with the commit of its write
    (`store.commit`, kept under the stage when the stage is a span)."""

    __slots__ = ("_request", "_reset", "_sink", "_stage")

    def __init__(self, request: RequestSpan, rule_id: str | None) -> None:
        self._request = request
        self._stage = Stage(request, "hook.accept", {"hookwise.rule": rule_id})
        self._sink: list[Commit] = []
        self._reset: Token[list[Commit] | None] | None = None

    def __enter__(self) -> None:
        self._reset = commits.set(self._sink)
        self._stage.__enter__()

    def __exit__(self, *exc_info: Any) -> None:
        self._stage.__exit__(*exc_info)
        assert self._reset is not None
        commits.reset(self._reset)
        if not self._sink or not self._request.last_stage_is_span():
            return  # a fast accept: its commit is not written (and not kept meanwhile)
        for commit in self._sink:
            attributes: dict[str, Any] = {"hookwise.store.batch_size": commit.batch_size}
            if commit.pid is not None:
                attributes["hookwise.writer.pid"] = commit.pid
            self._request.child(
                "store.commit",
                commit.start_ns,
                commit.end_ns,
                attributes,
                "hook.accept",
                alone=False,
            )
