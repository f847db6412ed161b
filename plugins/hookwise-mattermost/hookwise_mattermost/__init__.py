"""The Mattermost channel for hookwise, loaded through the `hookwise.channels` entry point.

Speaks Mattermost REST API v4: `POST {baseUrl}/api/v4/posts` with a bot token. `to` is a channel
id (`channel:<id>` or the bare 26-character id). Mattermost renders markdown, so text goes as is,
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
        "a Mattermost recipient is a channel id: 26 lowercase letters and digits, "
        "optionally written channel:<id>"
    )

    config: MattermostConfig

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> MattermostChannel:
        channel = cls(parse_config(config, MattermostConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> str | None:
        m = _CHANNEL.fullmatch(to)
        return m["id"] if m else None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        channel_id = self._recipient(to)
        url = f"{self.config.base_url}/api/v4/posts"
        headers = {"Authorization": f"Bearer {self.config.bot_token}"}

        async def send_one(part: str) -> str:
            body = {"channel_id": channel_id, "message": part}
            response = await request(client, self.id, "POST", url, json=body, headers=headers)
            data = json_body(response)
            if response.is_success and isinstance(data, dict) and "id" in data:
                return str(data["id"])
            message = data.get("message") if isinstance(data, dict) else None
            if message is None and response.text and len(response.text) < 200:
                message = response.text  # the rate limiter answers in plain text
            raise error_for_response(self.id, response, message, retry_after=_reset_after(response))

        parts = split_for(self, text, markdown_to_mattermost)
        return await send_parts(parts, skip_parts, send_one)


def _reset_after(response: httpx.Response) -> float | None:
    """Mattermost's limiter says when to come back in `X-Ratelimit-Reset` (seconds)."""
    if "retry-after" in response.headers:
        return None  # the standard header wins, read by error_for_response
    try:
        return float(response.headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None


__all__ = ["MattermostChannel", "MattermostConfig"]
