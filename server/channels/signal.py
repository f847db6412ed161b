"""Signal: the signal-cli REST API (`bbernhard/signal-cli-rest-api`), `POST /v2/send`.

The gateway sends from `account`, a number registered with signal-cli. `to` is an E.164 phone
number or a group id as that API names it (`group.<base64>`). Markdown goes as the API's styled
text (`text_mode: styled`: bold, italic, strikethrough, monospace), except a text holding a
literal `*`, `|`, `~` or backtick, which that mode would take for markup and drop: it goes as
plain text (markup removed). signal-cli has no authentication of its own; keep it on a private
network.
Success is `201 {"timestamp": "..."}`, the message's Signal timestamp, used as its id; the
API's current development line answers `201` with a JSON array (one result per recipient), which
is a success too (the first timestamp found is the id).

Errors: the API answers every send failure except rate limits with 400 and the error text of
signal-cli, so a 400 is classified by that text: network trouble between signal-cli and Signal's
servers (timeouts, connection failures, "Failed to send message" caused by an I/O error, a 5xx
from Signal) is retried, anything else (unregistered user, unknown group, untrusted identity, a
captcha challenge) is permanent. Its 429 carries no `Retry-After`: the delivery worker's backoff
decides the wait.
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
    markdown_to_plain,
    parse_config,
    request,
    send_parts,
    split_for,
)
from .format import markdown_to_signal, signal_styled

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

        styled = signal_styled(text)

        async def send_one(part: str) -> str:
            body: dict[str, Any] = {
                "message": part,
                "number": self.config.account,
                "recipients": [recipient],
            }
            if styled:
                body["text_mode"] = "styled"
            response = await request(client, self.id, "POST", url, json=body)
            data = json_body(response)
            if response.is_success:
                return _message_id(data)
            error = data.get("error") if isinstance(data, dict) else None
            error = error if isinstance(error, str) else None
            raise error_for_response(
                self.id, response, error, retryable=_retryable(response, error)
            )

        render = markdown_to_signal if styled else markdown_to_plain
        return await send_parts(split_for(self, text, render), skip_parts, send_one)


_PERMANENT = re.compile(
    r"unregistered|not registered|invalid (?:group|phone|number|recipient)|group not found|"
    r"not a member|untrusted|unknown group|proof required|captcha|no such|does not exist|"
    r"couldn't process request|please provide|not found",
    re.I,
)
_TRANSIENT = re.compile(
    r"time(?:d)? ?out|timeout|connect|network|unreachable|unavailable|i/o|ioexception|socket|"
    r"eof|broken pipe|reset by peer|temporar|try again|deadline exceeded|\[5\d\d\]|"
    r"status code 5\d\d|server error|rate ?limit",
    re.I,
)


def _retryable(response: httpx.Response, error: str | None) -> bool | None:
    """For a 400, whether signal-cli's error text says the failure is transient."""
    if response.status_code != 400:
        return None  # 429 and 5xx retried, other 4xx not, by status
    text = error or ""
    return not _PERMANENT.search(text) and bool(_TRANSIENT.search(text))


def _message_id(data: Any) -> str:
    """The Signal timestamp of a sent message, from either answer form ("" when absent)."""
    items = data if isinstance(data, list) else [data]
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("timestamp"), str | int):
            return str(item["timestamp"])
    return ""
