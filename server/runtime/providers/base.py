"""The provider interface: the chat values going in and out, and the one error type.

A provider turns a list of chat messages into a completion. `deadline` is a `time.monotonic()`
instant that the call must not outlive: past it, the call raises `ProviderTimeout`. Every other
failure is a `ProviderError` whose message is a sentence fit for a run record: it names the
provider and what went wrong, and never contains the API key or the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import attrs

Role = Literal["system", "user", "assistant", "tool"]

THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high")
"""The `thinking` values a provider accepts; `off` (or None) means no reasoning parameter."""


@attrs.frozen
class ToolSpec:
    """A tool offered to the model: `name` is the wire name (`^[a-zA-Z0-9_-]{1,64}$`, as both
    APIs require), `title` the operator's `server.tool`, `parameters` its JSON Schema."""

    name: str
    title: str
    description: str
    parameters: dict[str, Any]


@attrs.frozen
class ToolCall:
    """A call the model asked for. `arguments` is None when the model's arguments were not a
    JSON object (the call is then answered with an error, not made); `raw_arguments` is the text
    as the model wrote it (sent back unchanged to an OpenAI-compatible API)."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""


@attrs.frozen
class ToolResult:
    """The answer to one `ToolCall`, as the model will read it."""

    call_id: str
    content: str
    is_error: bool = False


@attrs.frozen
class ChatMessage:
    """One message of a conversation. An assistant message may carry the tool calls it made
    (`raw`: the provider's own form of it, sent back unchanged where the API wants that); a
    `tool` message carries the results of those calls."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    raw: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Usage:
    """Token counts as the provider reports them; None where it reports nothing.
    `input_tokens` are the uncached input tokens; `cache_read`/`cache_write` the input tokens
    read from or written to the provider's prompt cache (where it reports them)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read: int | None = None
    cache_write: int | None = None


@attrs.frozen
class Completion:
    """A provider's answer: the reply text, the model that produced it, and its usage."""

    text: str
    model: str
    usage: Usage | None
    #: the tools the model asked to call (none: `text` is the final reply)
    tool_calls: tuple[ToolCall, ...] = ()
    #: the provider's own form of the assistant message, to send back with the results
    raw: Any = attrs.field(default=None, eq=False, repr=False)


#: error classes of a model that is unavailable now: a fallback chain moves on to its next model
#: and the model's circuit breaker counts the failure
UNAVAILABLE = frozenset(
    {"connection", "timeout", "rate_limited", "quota", "overloaded", "server_error"}
)
#: every error class a call may end with (`unavailable` ones above; the others are the caller's
#: fault or the answer's, and end the run where they happen)
ERROR_CLASSES = (
    *sorted(UNAVAILABLE),
    "bad_request",
    "auth",
    "forbidden",
    "not_found",
    "too_large",
    "refusal",
    "malformed",
    "deadline",
    "other",
)


class ProviderError(Exception):
    """A provider call that failed.

    `status` is the HTTP status when there was one; `retryable` says whether trying again may
    succeed (429, 5xx, connection failures); `retry_after` is the wait in seconds the provider
    asked for, if any. `error_class` is one of `ERROR_CLASSES`, mapped per provider from its
    API's description; `unavailable` says whether a fallback chain moves on because of it.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        error_class: str = "other",
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.error_class = error_class

    @property
    def unavailable(self) -> bool:
        return self.error_class in UNAVAILABLE

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, "
            f"retryable={self.retryable!r})"
        )


class ProviderTimeout(ProviderError):
    """The call's deadline passed before the provider answered. Never retryable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, retryable=False, error_class="deadline")


class Provider(Protocol):
    """What the runtime needs from a model provider. A provider that can offer tools also has
    `supports_tools = True` and takes `tools` (and `tool_choice`: `auto`, or `none` once the run
    may make no more calls) as keyword arguments of `complete`."""

    async def complete(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        thinking: str | None,
        deadline: float,
    ) -> Completion: ...

    async def aclose(self) -> None: ...


def check_thinking(provider_id: str, thinking: str | None) -> str | None:
    """Return the thinking level, or None for no reasoning; reject an unknown level."""
    if thinking is None or thinking == "off":
        return None
    if thinking not in THINKING_LEVELS:
        raise ProviderError(
            f"Provider {provider_id!r} got an unknown thinking level {thinking!r}; "
            f"use one of {', '.join(THINKING_LEVELS)}."
        )
    return thinking
