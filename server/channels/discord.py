"""Discord: REST API v10, `POST /channels/{id}/messages` with a bot token.

`to` is a channel id (`channel:<id>` or a bare snowflake) or `user:<id>`, for which a DM channel
is opened first with `POST /users/@me/channels` (and remembered). Markdown is re-rendered in Discord's
dialect (backtick fences, tables as code blocks); `allowed_mentions` is empty, so hook content cannot ping `@everyone` or
anyone else. Errors carry `message` (and, for invalid bodies, nested `errors`); rate limits carry
`retry_after` in the body as well as the `Retry-After` header.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from ..version import VERSION
from .base import (
    ChannelBase,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_discord,
    parse_config,
    request,
    send_parts,
    split_for,
)

# A snowflake (the API's `SnowflakeType`, pattern ^(0|[1-9][0-9]*)$) is an unsigned 64-bit id.
_TARGET = re.compile(r"(?:(?P<kind>channel|user):)?(?P<id>[1-9][0-9]{0,19})")
_MAX_SNOWFLAKE = 2**64 - 1
_USER_AGENT = f"DiscordBot (https://github.com/hookwise/hookwise, {VERSION})"  # Discord's format


@attrs.frozen
class DiscordConfig:
    """`channels.discord`."""

    token: str
    base_url: str = "https://discord.com/api/v10"
    default_to: str | None = None


@attrs.define
class DiscordChannel(ChannelBase):
    """A Discord bot."""

    id = "discord"
    max_chars = 2000
    recipient_hint = (
        "a Discord recipient is a channel id (a snowflake such as 1234567890123456789) written "
        "channel:<id> or just the id, or a user written user:<id> for a direct message"
    )

    config: DiscordConfig
    _dm_channels: dict[str, str] = attrs.field(factory=dict, init=False)

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> DiscordChannel:
        channel = cls(parse_config(config, DiscordConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> tuple[str, str] | None:
        m = _TARGET.fullmatch(to)
        if not m or int(m["id"]) > _MAX_SNOWFLAKE:
            return None
        return m["kind"] or "channel", m["id"]

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        kind, target = self._recipient(to)
        parts = split_for(self, text, markdown_to_discord)
        channel_id = await self._dm_channel(client, target) if kind == "user" else target
        url = f"{self.config.base_url}/channels/{channel_id}/messages"

        async def send_one(part: str) -> str:
            body = {"content": part, "allowed_mentions": {"parse": []}}
            data = await self._call(client, url, body)
            return str(data["id"])

        return await send_parts(parts, skip_parts, send_one)

    async def _dm_channel(self, client: httpx.AsyncClient, user_id: str) -> str:
        if user_id not in self._dm_channels:
            url = f"{self.config.base_url}/users/@me/channels"
            data = await self._call(client, url, {"recipient_id": user_id})
            self._dm_channels[user_id] = str(data["id"])
        return self._dm_channels[user_id]

    async def _call(self, client: httpx.AsyncClient, url: str, body: Any) -> dict[str, Any]:
        headers = {"Authorization": f"Bot {self.config.token}", "User-Agent": _USER_AGENT}
        response = await request(client, self.id, "POST", url, json=body, headers=headers)
        data = json_body(response)
        if response.is_success and isinstance(data, dict) and "id" in data:
            return data
        data = data if isinstance(data, dict) else {}
        retry_after = data.get("retry_after")
        raise error_for_response(
            self.id,
            response,
            _describe(data),
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
        )


def _describe(data: dict[str, Any]) -> str | None:
    """Discord's `message`, with the first nested field error of an invalid form body."""
    message = data.get("message")
    errors = data.get("errors")
    path: list[str] = []
    while isinstance(errors, dict):
        found = errors.get("_errors")
        if isinstance(found, list) and found and isinstance(found[0], dict):
            return f"{message} ({'.'.join(path) or 'body'}: {found[0].get('message')})"
        key = next(iter(errors), None)
        if key is None:
            break
        path.append(str(key))
        errors = errors[key]
    return message if isinstance(message, str) else None
