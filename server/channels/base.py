"""The contract between hookwise and a messaging channel, and the helpers every adapter shares.

This module is the whole surface a channel plugin may depend on: the `Channel` protocol the
delivery worker calls, the `SendResult` and `DeliveryError` it gets back, config parsing with key
paths (`parse_config`), and the HTTP helpers that turn transport failures and error answers into
`DeliveryError`s classified as retryable or permanent. It also re-exports the text splitter and
markdown converters from `hookwise.server.channels.format`, so plugins need import nothing else.

Error messages never contain credentials: they are built from the channel's id, the HTTP status
and the API's own error text, never from a URL or a request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit

import attrs
import httpx

from ...engine.config.convert import data_key, structure
from ...engine.errors import ConfigError, ConfigIssue
from ..retry import retry_after_seconds
from .format import (
    markdown_to_discord,
    markdown_to_mattermost,
    markdown_to_plain,
    markdown_to_slack,
    markdown_to_telegram_html,
    markdown_to_whatsapp,
    render_parts,
    split_text,
)

T = TypeVar("T")


@attrs.frozen
class SendResult:
    """What a successful send produced: the channel's id of every message sent, in order."""

    message_ids: tuple[str, ...]


@attrs.frozen
class DeliveryError(Exception):
    """A send that failed.

    `retryable` is true for rate limits (429), server errors (5xx), timeouts and connection
    failures; `retry_after` is the delay in seconds the channel asked for, when it said.
    `status` is the HTTP status of the answer (None for transport failures). When a long message
    was split and some parts went out before the failure, `sent_ids` holds their message ids;
    calling `send` again with `skip_parts=len(sent_ids)` (plus any earlier skip) resumes after them.
    """

    message: str
    retryable: bool = False
    retry_after: float | None = None
    status: int | None = None
    sent_ids: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.message


@runtime_checkable
class Channel(Protocol):
    """A configured messaging channel that can send text to a recipient.

    `id` is the canonical channel id (`telegram`, `msteams`, ...); `max_chars` the length at
    which `send` splits a message; `default_to` the configured `defaultTo` recipient, if any.
    """

    @property
    def id(self) -> str: ...

    @property
    def max_chars(self) -> int: ...

    @property
    def default_to(self) -> str | None: ...

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> Channel:
        """Build the channel from its `channels.<id>` mapping; raise `ConfigError` naming keys."""
        ...

    def validate_recipient(self, to: str) -> str | None:
        """None when `to` is a recipient this channel can address, else a sentence saying why."""
        ...

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        """Send `text` (split under `max_chars`) to `to`; raise `DeliveryError` on failure.

        `skip_parts` skips the first parts of the split text (already sent by an earlier
        attempt that failed half-way, see `DeliveryError.sent_ids`).
        """
        ...


# --- configuration ---------------------------------------------------------------------------


def parse_config(config: Mapping[str, Any], cls: type[T], path: str) -> T:
    """Structure a `channels.<id>` mapping into the frozen attrs class `cls`.

    Besides `hookwise.engine.config.convert.structure`'s checks (required and unknown keys, strict types), every
    string must be non-blank and every field whose name ends in `url` must be an absolute http(s)
    URL; its trailing slash is removed. Raises `ConfigError` listing each problem with its key path.
    """
    if not isinstance(config, Mapping):
        raise ConfigError([ConfigIssue(path, "must be a mapping of settings")])
    parsed = structure(dict(config), cls, path)
    issues: list[ConfigIssue] = []
    changes: dict[str, str] = {}
    for field in attrs.fields(cls):  # type: ignore[arg-type]
        value = getattr(parsed, field.name)
        if not isinstance(value, str):
            continue
        key = f"{path}.{data_key(field)}"
        if not value.strip():
            issues.append(ConfigIssue(key, "must not be empty"))
        elif field.name.endswith("url"):
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                issues.append(ConfigIssue(key, "must be an absolute http:// or https:// URL"))
            else:
                changes[field.name] = value.rstrip("/")
    if issues:
        raise ConfigError(issues)
    return attrs.evolve(parsed, **changes) if changes else parsed  # type: ignore[misc]


def check_default_to(channel: Channel, path: str) -> None:
    """Raise `ConfigError` at `<path>.defaultTo` when the default recipient is invalid."""
    if channel.default_to is not None:
        problem = channel.validate_recipient(channel.default_to)
        if problem:
            raise ConfigError([ConfigIssue(f"{path}.defaultTo", problem)])


# --- HTTP ------------------------------------------------------------------------------------


async def request(
    client: httpx.AsyncClient, channel_id: str, method: str, url: str, **kwargs: Any
) -> httpx.Response:
    """Send one HTTP request; timeouts and connection failures become retryable errors.

    The message names the channel and the kind of failure, never the URL (which may hold a
    token, as Telegram's does).
    """
    try:
        return await client.request(method, url, **kwargs)
    except httpx.TimeoutException:
        raise DeliveryError(f"{channel_id}: the request timed out", retryable=True) from None
    except httpx.TransportError as exc:
        raise DeliveryError(
            f"{channel_id}: could not reach the API ({type(exc).__name__})", retryable=True
        ) from None


def json_body(response: httpx.Response) -> Any:
    """The response's JSON body, or None when it has none or it is not JSON."""
    try:
        return response.json()
    except ValueError:
        return None


def retry_after_header(
    response: httpx.Response, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or HTTP-date), or None."""
    return retry_after_seconds(response.headers.get("retry-after"), now=now())


def error_for_response(
    channel_id: str,
    response: httpx.Response,
    detail: str | None,
    *,
    retry_after: float | None = None,
    retryable: bool | None = None,
) -> DeliveryError:
    """A `DeliveryError` for an error answer: 429, 408 and 5xx are retryable, other 4xx not.

    `detail` is the API's own error text; `retry_after` overrides the `Retry-After` header (for
    APIs that say it in the body); `retryable` overrides the status-based classification.
    """
    status = response.status_code
    if retryable is None:
        retryable = status in (408, 429) or status >= 500
    if retry_after is None:
        retry_after = retry_after_header(response)
    text = (detail or response.reason_phrase or "error").strip()
    return DeliveryError(
        f"{channel_id} answered {status}: {text}",
        retryable=retryable,
        retry_after=retry_after if retryable else None,
        status=status,
    )


async def send_parts(
    parts: Sequence[str], skip_parts: int, send_one: Callable[[str], Awaitable[str]]
) -> SendResult:
    """Send `parts[skip_parts:]` in order through `send_one`, which returns a message id.

    A failure part-way raises the `DeliveryError` with `sent_ids` set to the ids already sent.
    """
    ids: list[str] = []
    for part in parts[skip_parts:]:
        try:
            ids.append(await send_one(part))
        except DeliveryError as exc:
            raise attrs.evolve(exc, sent_ids=tuple(ids)) from None
    return SendResult(tuple(ids))


def split_for(
    channel: Channel,
    text: str,
    render: Callable[[str], str] | None = None,
    measure: Callable[[str], int] = len,
) -> list[str]:
    """`text` rendered by `render` (markdown to the channel's dialect) and split so that every
    part `measure`s at most the channel's `max_chars` after rendering and escaping.

    Without `render` the text is split as it is. An empty message is a permanent error.
    """
    if render is None:
        parts = split_text(text, channel.max_chars)
    else:
        parts = render_parts(text, channel.max_chars, render, measure)
    if not parts:
        raise DeliveryError(f"{channel.id}: the message is empty", retryable=False)
    return parts


class ChannelBase:
    """Optional base for adapters: `validate_recipient` via `_normalize`, the invalid-`to` error.

    Subclasses define `id`, `max_chars`, `default_to` and `_normalize(to) -> str | None`, which
    returns the API form of the recipient or None when `to` is invalid, with `recipient_hint`
    the sentence explaining what `to` should look like.
    """

    id: ClassVar[str]
    max_chars: ClassVar[int]
    recipient_hint: ClassVar[str]

    def _normalize(self, to: str) -> Any:
        raise NotImplementedError

    def validate_recipient(self, to: str) -> str | None:
        if not isinstance(to, str) or self._normalize(to.strip()) is None:
            return self.recipient_hint
        return None

    def _recipient(self, to: str) -> Any:
        target = self._normalize(to.strip()) if isinstance(to, str) else None
        if target is None:
            raise DeliveryError(f"{self.id}: invalid recipient: {self.recipient_hint}")
        return target


__all__ = [
    "Channel",
    "ChannelBase",
    "ConfigError",
    "ConfigIssue",
    "DeliveryError",
    "SendResult",
    "check_default_to",
    "error_for_response",
    "json_body",
    "markdown_to_discord",
    "markdown_to_mattermost",
    "markdown_to_plain",
    "markdown_to_slack",
    "markdown_to_telegram_html",
    "markdown_to_whatsapp",
    "parse_config",
    "render_parts",
    "request",
    "retry_after_header",
    "send_parts",
    "split_for",
    "split_text",
]
