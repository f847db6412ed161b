"""The Mattermost channel for hookwise, loaded through the `hookwise.channels` entry point.

Speaks Mattermost REST API v4: `POST {baseUrl}/api/v4/posts` with a bot token. `to` is a channel
id (`channel:<id>` or the bare 26-character id), or a user for a direct message: `user:<id>` or
`@username` (also `user:@username`). For a user, the bot's own id (`GET /api/v4/users/me`), the
user's id (`GET /api/v4/users/username/{name}`) and the DM channel (`POST /api/v4/channels/direct`
with both ids) are looked up once and remembered. Mattermost renders markdown, so text goes as is,
split under the server's default post limit of 16383 characters. Errors carry `message` (and an
`id` such as `api.context.session_expired.app_error`). Depends only on `hookwise.channels`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from hookwise.channels import (
    ChannelBase,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_mattermost,
    parse_config,
    request,
    send_parts,
    split_for,
)

_CHANNEL = re.compile(r"(?:channel:)?(?P<id>[a-z0-9]{26})")
_USER_ID = re.compile(r"user:(?P<id>[a-z0-9]{26})")
_USERNAME = re.compile(r"(?:user:)?@(?P<name>[a-z0-9][a-z0-9._-]{0,63})")


@attrs.frozen
class MattermostConfig:
    """`channels.mattermost`: the server's address is required (it is self-hosted)."""

    bot_token: str
    base_url: str
    default_to: str | None = None


@attrs.define
class MattermostChannel(ChannelBase):
    """A Mattermost bot account."""

    id = "mattermost"
    max_chars = 16383
    recipient_hint = (
        "a Mattermost recipient is a channel id: 26 lowercase letters and digits, optionally "
        "written channel:<id>; or a user for a direct message, written user:<id> or @username"
    )

    config: MattermostConfig
    _dm_channels: dict[str, str] = attrs.field(factory=dict, init=False)
    _user_ids: dict[str, str] = attrs.field(factory=dict, init=False)

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> MattermostChannel:
        channel = cls(parse_config(config, MattermostConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> tuple[str, str] | None:
        if m := _CHANNEL.fullmatch(to):
            return "channel", m["id"]
        if m := _USER_ID.fullmatch(to):
            return "user", m["id"]
        if m := _USERNAME.fullmatch(to):
            return "username", m["name"]
        return None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        kind, target = self._recipient(to)
        parts = split_for(self, text, markdown_to_mattermost)
        channel_id = target if kind == "channel" else await self._dm_channel(client, kind, target)

        async def send_one(part: str) -> str:
            body = {"channel_id": channel_id, "message": part}
            data = await self._call(client, "POST", "/api/v4/posts", body)
            return str(data["id"])

        return await send_parts(parts, skip_parts, send_one)

    async def _dm_channel(self, client: httpx.AsyncClient, kind: str, target: str) -> str:
        user_id = target
        if kind == "username":
            if target not in self._user_ids:
                data = await self._call(client, "GET", f"/api/v4/users/username/{target}")
                self._user_ids[target] = str(data["id"])
            user_id = self._user_ids[target]
        if user_id not in self._dm_channels:
            if "me" not in self._user_ids:
                me = await self._call(client, "GET", "/api/v4/users/me")
                self._user_ids["me"] = str(me["id"])
            pair = [self._user_ids["me"], user_id]
            data = await self._call(client, "POST", "/api/v4/channels/direct", pair)
            self._dm_channels[user_id] = str(data["id"])
        return self._dm_channels[user_id]

    async def _call(
        self, client: httpx.AsyncClient, method: str, path: str, body: Any = None
    ) -> dict[str, Any]:
        url = f"{self.config.base_url}{path}"
        kwargs: dict[str, Any] = {"headers": {"Authorization": f"Bearer {self.config.bot_token}"}}
        if body is not None:
            kwargs["json"] = body
        response = await request(client, self.id, method, url, **kwargs)
        data = json_body(response)
        if response.is_success and isinstance(data, dict) and isinstance(data.get("id"), str):
            return data
        message = data.get("message") if isinstance(data, dict) else None
        if message is None and response.text and len(response.text) < 200:
            message = response.text  # the rate limiter answers in plain text
        raise error_for_response(self.id, response, message, retry_after=_reset_after(response))


def _reset_after(response: httpx.Response) -> float | None:
    """Mattermost's limiter says when to come back in `X-Ratelimit-Reset` (seconds)."""
    if "retry-after" in response.headers:
        return None  # the standard header wins, read by error_for_response
    try:
        return float(response.headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None


__all__ = ["MattermostChannel", "MattermostConfig"]
