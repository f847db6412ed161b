"""The built-in `echo` provider: deterministic replies, no configuration, no network.

It makes the service work offline (the quick start's default model is `echo/echo`) and gives
tests a predictable model. The reply depends only on the last user message:

- If it contains `HEARTBEAT_OK` (every heartbeat prompt asks the model to answer that token when
  nothing needs attention), it is treated as a heartbeat. Lines of that message starting with
  `System:` are pending events. With none, the reply is `HEARTBEAT_OK`; with some, it is
  `echo: ` followed by the event texts (prefix removed) joined by `; `.
- Otherwise the reply is `echo: <last user message>` (stripped; content wrapped as external
  untrusted content is echoed without its wrapper); with no user message at all, `echo:`.

Usage counts whitespace-separated words: all message contents in, the reply out. The model name
and `thinking` do not change the reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..external import unwrap_external
from .base import ChatMessage, Completion, Usage

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


class EchoProvider:
    """Replies with `echo_reply`; never fails."""

    provider_id = "echo"

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
    ) -> Completion:
        text = echo_reply(messages)
        words_in = sum(len(m.content.split()) for m in messages)
        return Completion(
            text=text,
            model=model,
            usage=Usage(input_tokens=words_in, output_tokens=len(text.split())),
        )

    async def aclose(self) -> None:
        return None
