"""WhatsApp: the WhatsApp Business Cloud API, `POST /{version}/{phone-number-id}/messages`.

The Graph API version is `apiVersion`, by default v23.0 (the
version of the API description the requests were checked against). `to` is an E.164 phone number (`+15551234567`); the API gets the digits. Markdown becomes
WhatsApp's own formatting. Graph API errors carry `error.message` and a numeric `error.code`;
the throttling codes (4, 80007, 130429, 131056) are retryable whatever the HTTP status.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from .base import (
    ChannelBase,
    ConfigError,
    ConfigIssue,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    markdown_to_whatsapp,
    parse_config,
    request,
    send_parts,
    split_for,
)

_E164 = re.compile(r"\+?([1-9]\d{6,14})")
_THROTTLED = frozenset({4, 80007, 130429, 131056})
_VERSION = re.compile(r"v\d{1,3}\.\d{1,2}")
DEFAULT_API_VERSION = "v23.0"
"""The Graph API version used unless `apiVersion` says otherwise (v21.0 retires 2027-01-21)."""


@attrs.frozen
class WhatsAppConfig:
    """`channels.whatsapp`."""

    access_token: str
    phone_number_id: str
    api_version: str = DEFAULT_API_VERSION
    base_url: str = "https://graph.facebook.com"
    default_to: str | None = None


@attrs.define
class WhatsAppChannel(ChannelBase):
    """A WhatsApp Business phone number."""

    id = "whatsapp"
    max_chars = 4096
    recipient_hint = "a WhatsApp recipient is a phone number in E.164 form, such as +15551234567"

    config: WhatsAppConfig

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> WhatsAppChannel:
        parsed = parse_config(config, WhatsAppConfig, path)
        if not _VERSION.fullmatch(parsed.api_version):
            problem = f"must be a Graph API version such as {DEFAULT_API_VERSION}"
            raise ConfigError([ConfigIssue(f"{path}.apiVersion", problem)])
        if not parsed.phone_number_id.isdigit():
            problem = "must be the numeric id of the WhatsApp Business phone number"
            raise ConfigError([ConfigIssue(f"{path}.phoneNumberId", problem)])
        channel = cls(parsed)
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> str | None:
        m = _E164.fullmatch(to)
        return m[1] if m else None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        number = self._recipient(to)
        c = self.config
        url = f"{c.base_url}/{c.api_version}/{c.phone_number_id}/messages"
        headers = {"Authorization": f"Bearer {c.access_token}"}

        async def send_one(part: str) -> str:
            body = {
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": number,
                "type": "text",
                "text": {"preview_url": False, "body": part},
            }
            response = await request(client, self.id, "POST", url, json=body, headers=headers)
            data = json_body(response)
            if response.is_success and isinstance(data, dict) and data.get("messages"):
                return str(data["messages"][0]["id"])
            error = data.get("error") if isinstance(data, dict) else None
            error = error if isinstance(error, dict) else {}
            throttled = error.get("code") in _THROTTLED
            raise error_for_response(
                self.id, response, error.get("message"), retryable=True if throttled else None
            )

        parts = split_for(self, text, markdown_to_whatsapp)
        return await send_parts(parts, skip_parts, send_one)
