"""The provider interface: the chat values going in and out, and the one error type.

A provider turns a list of chat messages into a completion. `deadline` is a `time.monotonic()`
instant that the call must not outlive: past it, the call raises `ProviderTimeout`. Every other
failure is a `ProviderError` whose message is a sentence fit for a run record: it names the
provider and what went wrong, and never contains the API key or the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import attrs

Role = Literal["system", "user", "assistant"]

THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high")
"""The `thinking` values a provider accepts; `off` (or None) means no reasoning parameter."""


@attrs.frozen
class ChatMessage:
    """One message of a conversation."""

    role: Role
    content: str


@attrs.frozen
class Usage:
    """Token counts as the provider reports them; None where it reports nothing."""

    input_tokens: int | None
    output_tokens: int | None


@attrs.frozen
class Completion:
    """A provider's answer: the reply text, the model that produced it, and its usage."""

    text: str
    model: str
    usage: Usage | None


class ProviderError(Exception):
    """A provider call that failed.

    `status` is the HTTP status when there was one; `retryable` says whether trying again may
    succeed (429, 5xx, connection failures); `retry_after` is the wait in seconds the provider
    asked for, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status!r}, "
            f"retryable={self.retryable!r})"
        )


class ProviderTimeout(ProviderError):
    """The call's deadline passed before the provider answered. Never retryable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=None, retryable=False)


class Provider(Protocol):
    """What the runtime needs from a model provider."""

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
