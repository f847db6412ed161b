"""A run's tool calls as stored: one row per call (`run_tool_calls`), keyed by run and order.

A heartbeat's calls are rows of the same table, under the heartbeat's id in `run_id` (ids are
unique across runs and heartbeats): one record, one recovery rule, one set of metrics.

A row is written `started` before the call is made and rewritten with its outcome (`ok`,
`error`, `timeout`) after, so a run interrupted between the two leaves a trace. Arguments and
results are kept only where the operator keeps payloads (`hooks.retainPayloads`); their size and
SHA-256 digest always.
"""

from __future__ import annotations

from typing import Any

import attrs

COLUMNS = (
    "run_id, seq, server, tool, outcome, started_at, duration_ms, arguments, arguments_bytes,"
    " arguments_digest, result, result_bytes, result_digest, truncated"
)
WIDTH = COLUMNS.count(",") + 1


@attrs.frozen
class ToolCallRecord:
    """One tool call of a run."""

    run_id: str
    seq: int
    server: str
    tool: str
    outcome: str
    started_at: float
    duration_ms: float | None = None
    arguments: str | None = None
    arguments_bytes: int = 0
    arguments_digest: str = ""
    result: str | None = None
    result_bytes: int | None = None
    result_digest: str | None = None
    truncated: bool = False

    def row(self) -> tuple[Any, ...]:
        return (
            self.run_id,
            self.seq,
            self.server,
            self.tool,
            self.outcome,
            self.started_at,
            self.duration_ms,
            self.arguments,
            self.arguments_bytes,
            self.arguments_digest,
            self.result,
            self.result_bytes,
            self.result_digest,
            bool(self.truncated),
        )

    @classmethod
    def from_row(cls, row: Any) -> ToolCallRecord:
        values = list(row)
        values[13] = bool(values[13])
        return cls(*values)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "server": self.server,
            "tool": self.tool,
            "outcome": self.outcome,
            "startedAt": self.started_at,
            "durationMs": self.duration_ms,
            "resultBytes": self.result_bytes,
            "truncated": self.truncated,
            "argumentsBytes": self.arguments_bytes,
            "argumentsDigest": self.arguments_digest,
            "resultDigest": self.result_digest,
        }
        if self.arguments is not None:
            out["arguments"] = self.arguments
        if self.result is not None:
            out["result"] = self.result
        return out
