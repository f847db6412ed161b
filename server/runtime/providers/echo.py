"""The built-in `echo` provider: deterministic replies, no configuration, no network.

It makes the service work offline (the quick start's default model is `echo/echo`) and gives
tests a predictable model. The reply depends only on the last user message:

- If it contains `HEARTBEAT_OK` (every heartbeat prompt asks the model to answer that token when
  nothing needs attention), it is treated as a heartbeat. Lines of that message starting with
  `System:` are pending events. With none, the reply is `HEARTBEAT_OK`; with some, it is
  `echo: ` followed by the event texts (prefix removed) joined by `; `.
- Otherwise the reply is `echo: <last user message>` (stripped; content wrapped as external
  untrusted content is echoed without its wrapper); with no user message at all, `echo:`.

With tools offered (`tools`), each line of the last user message that reads
`call <server>.<tool> <JSON arguments>` (a JSON object; `{}` may be left out) becomes a call of
that tool, in order, all in one answer, if and only if that tool was offered; a line naming a
tool that was not offered stays text. When the conversation ends with the results, the reply is
`echo: ` followed by the results' texts (unwrapped), one per line. With `tool_choice: none`
(no more calls allowed), it calls nothing and replies with what it has.

Usage counts whitespace-separated words: all message contents in, the reply out. The model name
and `thinking` do not change the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ..external import unwrap_external
from .base import ChatMessage, Completion, ToolCall, ToolSpec, Usage

_CALL = re.compile(r"^\s*call\s+(\S+?\.\S+?)(?:\s+(\{.*\}))?\s*$")

HEARTBEAT_TOKEN = "HEARTBEAT_OK"
EVENT_PREFIX = "System:"


def echo_reply(messages: Sequence[ChatMessage]) -> str:
    """The reply the echo provider gives to these messages."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    if HEARTBEAT_TOKEN in last:
        events = [
            line.strip()[len(EVENT_PREFIX) :].strip()
            for line in last.splitlines()
            if line.strip().startswith(EVENT_PREFIX)
        ]
        if not events:
            return HEARTBEAT_TOKEN
        return "echo: " + "; ".join(events)
    return f"echo: {unwrap_external(last).strip()}".rstrip()


def echo_tool_calls(
    messages: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> tuple[ToolCall, ...]:
    """The calls the echo model makes: `call server.tool {...}` lines of the last user message,
    for offered tools only."""
    if not tools or not messages or messages[-1].role != "user":
        return ()
    offered = {t.title: t.name for t in tools}
    calls: list[ToolCall] = []
    for line in unwrap_external(messages[-1].content).splitlines():
        m = _CALL.match(line)
        if m is None or m.group(1) not in offered:
            continue
        raw = m.group(2) or "{}"
        try:
            args = json.loads(raw)
        except ValueError:
            args = None
        calls.append(
            ToolCall(
                id=f"echo_{len(calls) + 1}",
                name=offered[m.group(1)],
                arguments=args if isinstance(args, dict) else None,
                raw_arguments=raw,
            )
        )
    return tuple(calls)


def _results_reply(messages: Sequence[ChatMessage]) -> str | None:
    """After tool results: `echo: ` and the results since the last user message."""
    if not messages or messages[-1].role != "tool":
        return None
    texts: list[str] = []
    for m in reversed(messages):
        if m.role == "user":
            break
        if m.role == "tool":
            texts[:0] = [unwrap_external(r.content).strip() for r in m.tool_results]
    return ("echo: " + "\n".join(texts)).rstrip()


class EchoProvider:
    """Replies with `echo_reply`; never fails."""

    provider_id = "echo"
    supports_tools = True

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
        tools: Sequence[ToolSpec] = (),
        tool_choice: str = "auto",
    ) -> Completion:
        words_in = sum(len(m.content.split()) for m in messages)
        calls = echo_tool_calls(messages, tools) if tool_choice != "none" else ()
        if calls:
            usage = Usage(input_tokens=words_in, output_tokens=len(calls))
            return Completion(text="", model=model, usage=usage, tool_calls=calls)
        text = _results_reply(messages)
        if text is None:
            text = echo_reply(messages)
        words_in = sum(len(m.content.split()) for m in messages)
        return Completion(
            text=text,
            model=model,
            usage=Usage(input_tokens=words_in, output_tokens=len(text.split())),
        )

    async def aclose(self) -> None:
        return None
