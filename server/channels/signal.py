"""Signal: the signal-cli REST API (`bbernhard/signal-cli-rest-api`), `POST /v2/send`.

The gateway sends from `account`, a number registered with signal-cli. `to` is an E.164 phone
number or a group id as that API names it (`group.<base64>`). Text goes as plain text (markdown
markup removed). signal-cli has no authentication of its own; keep it on a private network.
Success is `201 {"timestamp": "..."}`, the message's Signal timestamp, used as its id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from hookwise.server.channels.base import (
    ChannelBase,
    ConfigError,
    ConfigIssue,
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
_GROUP = re.compile(r"group\.[A-Za-z0-9+/=_-]{8,}")


@attrs.frozen
class SignalConfig:
    """`channels.signal`: the signal-cli REST API's address is required (it is self-hosted)."""

    account: str
    base_url: str
    default_to: str | None = None


@attrs.define
class SignalChannel(ChannelBase):
    """A Signal account served by signal-cli's REST API."""

    id = "signal"
    max_chars = 4000
    recipient_hint = (
        "a Signal recipient is a phone number in E.164 form, such as +15551234567, "
        "or a group id written group.<id>"
    )

    config: SignalConfig

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> SignalChannel:
        parsed = parse_config(config, SignalConfig, path)
        if not _E164.fullmatch(parsed.account):
            problem = "must be the sending phone number in E.164 form, such as +15551234567"
            raise ConfigError([ConfigIssue(f"{path}.account", problem)])
        channel = cls(parsed)
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> str | None:
        return to if _E164.fullmatch(to) or _GROUP.fullmatch(to) else None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        recipient = self._recipient(to)
        url = f"{self.config.base_url}/v2/send"

        async def send_one(part: str) -> str:
            body = {
                "message": markdown_to_plain(part),
                "number": self.config.account,
                "recipients": [recipient],
            }
            response = await request(client, self.id, "POST", url, json=body)
            data = json_body(response)
            if response.is_success and isinstance(data, dict) and "timestamp" in data:
                return str(data["timestamp"])
            error = data.get("error") if isinstance(data, dict) else None
            raise error_for_response(self.id, response, error if isinstance(error, str) else None)

        return await send_parts(split_for(self, text), skip_parts, send_one)
