"""A run parked for approval, as `runs.parked` keeps it: the conversation so far (system prompt,
history, the hook's message, the model's answers and the results already made), the results of
the ungated calls of the answer that asked for approval, and what the run had done (its tool
calls recorded, its usage). JSON, so that any process resumes it after any restart.

`Parked` is what the tool loop raises when an answer asks for gated calls: the runtime turns it
into approvals rows and this state (`hookwise.server.runtime.approvals`). `Resume` is what the
loop receives back: the state and the decisions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from ..store.approvals import ApprovalRecord
from .providers.base import ChatMessage, ToolCall, ToolResult, Usage

VERSION = 1


@attrs.frozen
class GatedCall:
    """One call of the answer that waits for approval: the model's call and the tool it names."""

    call: ToolCall
    server: str
    tool: str


class Parked(Exception):
    """The model asked for calls that need approval: the run must wait (not an error)."""

    def __init__(
        self,
        conversation: Sequence[ChatMessage],
        results: Sequence[ToolResult],
        gated: Sequence[GatedCall],
        recorded: int,
        usage: Usage | None,
    ) -> None:
        super().__init__(f"{len(gated)} call(s) wait for approval")
        #: up to and including the assistant message that asked for the calls
        self.conversation = tuple(conversation)
        #: the results of the same answer's calls that needed no approval (made already)
        self.results = tuple(results)
        self.gated = tuple(gated)
        #: the run's tool calls recorded in the store when it parked (all attempts)
        self.recorded = recorded
        self.usage = usage


@attrs.frozen
class ParkedState:
    """What `runs.parked` holds."""

    conversation: tuple[ChatMessage, ...]
    results: tuple[ToolResult, ...]
    #: the hook's message as the model saw it (the session turn written at the run's end)
    content: str
    recorded: int
    input_tokens: int | None = None
    output_tokens: int | None = None

    def dumps(self) -> str:
        return json.dumps(
            {
                "v": VERSION,
                "conversation": [_message(m) for m in self.conversation],
                "results": [_result(r) for r in self.results],
                "content": self.content,
                "recorded": self.recorded,
                "usage": [self.input_tokens, self.output_tokens],
            },
            separators=(",", ":"),
        )

    @classmethod
    def loads(cls, text: str) -> ParkedState:
        data = json.loads(text)
        if data.get("v") != VERSION:
            raise ValueError(f"parked state version {data.get('v')!r} is not {VERSION}")
        usage = data.get("usage") or [None, None]
        return cls(
            conversation=tuple(_message_of(m) for m in data["conversation"]),
            results=tuple(_result_of(r) for r in data["results"]),
            content=data["content"],
            recorded=int(data["recorded"]),
            input_tokens=usage[0],
            output_tokens=usage[1],
        )

    @property
    def usage(self) -> Usage | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return Usage(self.input_tokens, self.output_tokens)


@attrs.frozen
class Resume:
    """A parked run coming back: its state and the decisions of its approvals."""

    state: ParkedState
    approvals: tuple[ApprovalRecord, ...]


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _message(m: ChatMessage) -> dict[str, Any]:
    return {
        "role": m.role,
        "content": m.content,
        "calls": [
            {"id": c.id, "name": c.name, "arguments": c.arguments, "raw": c.raw_arguments}
            for c in m.tool_calls
        ],
        "results": [_result(r) for r in m.tool_results],
        "raw": _jsonable(m.raw),
    }


def _message_of(d: dict[str, Any]) -> ChatMessage:
    return ChatMessage(
        d["role"],
        d["content"],
        tool_calls=tuple(
            ToolCall(c["id"], c["name"], c["arguments"], c["raw"]) for c in d["calls"]
        ),
        tool_results=tuple(_result_of(r) for r in d["results"]),
        raw=d.get("raw"),
    )


def _result(r: ToolResult) -> dict[str, Any]:
    return {"id": r.call_id, "content": r.content, "error": r.is_error}


def _result_of(d: dict[str, Any]) -> ToolResult:
    return ToolResult(d["id"], d["content"], bool(d["error"]))
