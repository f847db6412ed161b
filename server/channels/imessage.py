"""iMessage: a BlueBubbles server's REST API, `POST /api/v1/message/text?password=...`.

`to` is a phone number (E.164), an email handle, or a chat guid (`iMessage;-;+15551234567`,
`iMessage;+;chat123456` for a group, `SMS;-;...`); a handle becomes the direct chat guid
`iMessage;-;<handle>`. Each part gets a fresh `tempGuid`, which stands as the message id when the
server does not answer with the sent message's `guid`. Text goes as plain text. The server
password travels in the query string (BlueBubbles' way), so URLs never go into messages.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import httpx

from .base import (
    ChannelBase,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_plain,
    parse_config,
    request,
    send_parts,
    split_for,
)

_E164 = re.compile(r"\+[1-9]\d{6,14}")
_EMAIL = re.compile(r"[^@\s;]+@[^@\s;]+\.[^@\s;]+")
_GUID = re.compile(r"(?:iMessage|SMS|RCS|any);[-+];[^\s;]+")


@attrs.frozen
class IMessageConfig:
    """`channels.imessage`: the BlueBubbles server's address is required (it is self-hosted).

    `method` chooses how BlueBubbles sends (`apple-script` or `private-api`); by default the
    server decides.
    """

    password: str
    base_url: str
    default_to: str | None = None
    method: Literal["apple-script", "private-api"] | None = None


@attrs.define
class IMessageChannel(ChannelBase):
    """A Mac running BlueBubbles server."""

    id = "imessage"
    max_chars = 4000
    recipient_hint = (
        "an iMessage recipient is a phone number in E.164 form (+15551234567), an email "
        "address, or a chat guid such as iMessage;-;+15551234567"
    )

    config: IMessageConfig

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> IMessageChannel:
        channel = cls(parse_config(config, IMessageConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> str | None:
        if _GUID.fullmatch(to):
            return to
        if _E164.fullmatch(to) or _EMAIL.fullmatch(to):
            return f"iMessage;-;{to}"
        return None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        chat_guid = self._recipient(to)
        url = f"{self.config.base_url}/api/v1/message/text"
        params = {"password": self.config.password}

        async def send_one(part: str) -> str:
            temp_guid = str(uuid.uuid4())
            body: dict[str, Any] = {
                "chatGuid": chat_guid,
                "tempGuid": temp_guid,
                "message": part,
            }
            if self.config.method:
                body["method"] = self.config.method
            response = await request(client, self.id, "POST", url, params=params, json=body)
            data = json_body(response)
            payload = data.get("data") if isinstance(data, dict) else None
            if response.is_success:  # sent; older servers may not echo the message back
                guid = payload.get("guid") if isinstance(payload, dict) else None
                return str(guid or temp_guid)
            raise error_for_response(self.id, response, _describe(data))

        return await send_parts(split_for(self, text, markdown_to_plain), skip_parts, send_one)


def _describe(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    message = data.get("message")
    return message if isinstance(message, str) else None
