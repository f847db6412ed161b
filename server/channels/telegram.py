"""Telegram: the Bot API's `sendMessage`, with forum topics and HTML formatting.

`to` is a chat id (`123456`, `-100...` for groups and channels), a public `@username`, or a forum
topic `<chat id>:topic:<N>`, sent as `message_thread_id`. Markdown is rendered as `parse_mode=HTML`
within Telegram's nesting rules, split so each part is at most 4,096 characters after entity
parsing; when Telegram cannot parse the entities of a part, that part is sent again as the plain
text it would have shown. The bot
token is part of every URL (`/bot<token>/sendMessage`), so URLs never go into messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from .base import (
    ChannelBase,
    DeliveryError,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_telegram_html,
    parse_config,
    request,
    send_parts,
    split_for,
)
from .format import telegram_length
from .markdown import telegram_plain_text

_CHAT = re.compile(r"(?:-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{3,31})")
_TOPIC = re.compile(r"(?P<chat>-?\d{1,20}):topic:(?P<topic>\d{1,12})")


@attrs.frozen
class TelegramConfig:
    """`channels.telegram`."""

    bot_token: str
    base_url: str = "https://api.telegram.org"
    default_to: str | None = None
    #: the `secret_token` given to `setWebhook`: Telegram sends it in
    #: `X-Telegram-Bot-Api-Secret-Token` with every update (approval buttons' callbacks)
    webhook_secret: str | None = attrs.field(default=None, repr=False)


@attrs.frozen
class TelegramTarget:
    chat_id: str
    thread_id: int | None = None


@attrs.define
class TelegramChannel(ChannelBase):
    """A Telegram bot."""

    id = "telegram"
    max_chars = 4096
    recipient_hint = (
        "a Telegram recipient is a chat id such as 123456789 or -1001234567890, a public "
        "@username, or a forum topic written -1001234567890:topic:42"
    )

    config: TelegramConfig

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> TelegramChannel:
        channel = cls(parse_config(config, TelegramConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> TelegramTarget | None:
        if m := _TOPIC.fullmatch(to):
            return TelegramTarget(m["chat"], int(m["topic"]))
        if _CHAT.fullmatch(to):
            return TelegramTarget(to)
        return None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        target = self._recipient(to)
        url = f"{self.config.base_url}/bot{self.config.bot_token}/sendMessage"

        async def send_one(part: str) -> str:
            body: dict[str, Any] = {"chat_id": target.chat_id}
            if target.thread_id is not None:
                body["message_thread_id"] = target.thread_id
            try:
                return await self._post(client, url, body | {"text": part, "parse_mode": "HTML"})
            except DeliveryError as exc:
                if exc.status == 400 and "can't parse entities" in exc.message:
                    plain = {"text": telegram_plain_text(part)}
                    return await self._post(client, url, body | plain)
                raise

        parts = split_for(self, text, markdown_to_telegram_html, telegram_length)
        return await send_parts(parts, skip_parts, send_one)

    async def _post(self, client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> str:
        response = await request(client, self.id, "POST", url, json=body)
        data = json_body(response)
        if response.is_success and isinstance(data, dict) and data.get("ok"):
            return str(data["result"]["message_id"])
        data = data if isinstance(data, dict) else {}
        params = data.get("parameters")
        params = params if isinstance(params, dict) else {}
        detail = data.get("description")
        if "migrate_to_chat_id" in params:
            detail = f"{detail} (the group is now chat {params['migrate_to_chat_id']})"
        retry_after = params.get("retry_after")
        raise error_for_response(
            self.id,
            response,
            detail,
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
        )
