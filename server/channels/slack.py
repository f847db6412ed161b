"""Slack: the Web API's `chat.postMessage` with a bot token.

`to` is a conversation id (`channel:<id>` or a bare `C…`/`G…`/`D…` id), a channel name
(`#general`, passed to chat.postMessage as is), or `user:<id>` (a bare `U…`/`W…` id too), for
which the DM is opened with `conversations.open` (and remembered).
Markdown becomes mrkdwn. Slack answers most errors with HTTP 200 and `{"ok": false, "error":
"<code>"}`: those are permanent except its transient codes; rate limits are HTTP 429 with
`Retry-After`.

Length: Slack truncates `text` past 40,000 characters and advises at most 4,000 for readable
messages, so messages are split at 4,000 characters counted after mrkdwn escaping. Requests are
JSON with `Content-Type: application/json; charset=utf-8` (without the charset Slack warns
`missing_charset`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from .base import (
    ChannelBase,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_slack,
    parse_config,
    request,
    send_parts,
    split_for,
)

# Conversation ids (`defs_channel`: C, G or D and 8+ more) and user ids (`defs_user_id`: U or W)
# as the Web API's description defines them; `#name` is a channel name, which chat.postMessage
# accepts in place of an id.
_CONVERSATION = re.compile(r"[CGD][A-Z0-9]{8,}")
_USER = re.compile(r"[UW][A-Z0-9]{8,}")
_NAME = re.compile(r"#[a-z0-9][a-z0-9._-]{0,79}")
_MAX_ID = 32
_TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


@attrs.frozen
class SlackConfig:
    """`channels.slack`."""

    bot_token: str
    base_url: str = "https://slack.com/api"
    default_to: str | None = None
    #: the app's signing secret: interactivity requests (approval buttons) are verified with it
    signing_secret: str | None = attrs.field(default=None, repr=False)


@attrs.define
class SlackChannel(ChannelBase):
    """A Slack app's bot user."""

    id = "slack"
    max_chars = 4000
    recipient_hint = (
        "a Slack recipient is a conversation id starting C, G or D written channel:<id> (or just "
        "the id, such as C0123456789), a channel name such as #general, or a user id starting U "
        "or W written user:<id> (such as user:U0123456789) for a direct message"
    )

    config: SlackConfig
    _dm_channels: dict[str, str] = attrs.field(factory=dict, init=False)

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> SlackChannel:
        channel = cls(parse_config(config, SlackConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> tuple[str, str] | None:
        kind, sep, target = to.partition(":")
        if not sep:
            kind, target = "", to
        if len(target) > _MAX_ID and not _NAME.fullmatch(target):
            return None
        if kind in ("", "channel") and (_CONVERSATION.fullmatch(target) or _NAME.fullmatch(target)):
            return "channel", target
        if kind in ("", "user") and _USER.fullmatch(target):
            return "user", target
        return None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        kind, target = self._recipient(to)
        parts = split_for(self, text, markdown_to_slack)
        channel = await self._dm_channel(client, target) if kind == "user" else target

        async def send_one(part: str) -> str:
            body = {"channel": channel, "text": part, "mrkdwn": True}
            data = await self._call(client, "chat.postMessage", body)
            return str(data["ts"])

        return await send_parts(parts, skip_parts, send_one)

    async def _dm_channel(self, client: httpx.AsyncClient, user_id: str) -> str:
        if user_id not in self._dm_channels:
            data = await self._call(client, "conversations.open", {"users": user_id})
            self._dm_channels[user_id] = str(data["channel"]["id"])
        return self._dm_channels[user_id]

    async def _call(self, client: httpx.AsyncClient, method: str, body: Any) -> dict[str, Any]:
        url = f"{self.config.base_url}/{method}"
        headers = {
            "Authorization": f"Bearer {self.config.bot_token}",
            "Content-Type": "application/json; charset=utf-8",
        }
        content = json.dumps(body, ensure_ascii=False).encode()
        response = await request(client, self.id, "POST", url, content=content, headers=headers)
        data = json_body(response)
        if response.is_success and isinstance(data, dict) and data.get("ok") is True:
            return data
        error = data.get("error") if isinstance(data, dict) else None
        raise error_for_response(
            self.id,
            response,
            error if isinstance(error, str) else None,
            retryable=True if error in _TRANSIENT else None,
        )
