"""Signed webhooks out: the generic `webhook` channel and a mapping's run callbacks, one code.

Every POST is signed as Standard Webhooks (https://www.standardwebhooks.com/) signs it:
`webhook-id` (the delivery's id, the same on every attempt, so a receiver drops a repeat),
`webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature` (`v1,` + base64 of
HMAC-SHA256 over `<id>.<timestamp>.<body>` under the base64 key after `whsec_`). The body is
JSON: `{"type", "timestamp", "data"}`.

A 2xx answer is delivered; 408, 429 (honouring `Retry-After`) and 5xx are tried again with the
delivery worker's back-off; any other answer is permanent, and so is a redirect, which is never
followed (a 3xx could lead a signed body anywhere). The delivery worker does the retries, the
dead letters and the records; this module only sends once.

`channels.webhook: {url, secret}` delivers agent replies (`channel: webhook`), its `to` being its
`url`. A mapping's `callback` is the same sender under the name `callback:<rule id>` (the
delivery worker asks the live rules for it), whose `to` is the run's callback URL: the URL the
configuration gave, or one taken from the payload and judged at the door
(`hookwise.engine.callbacks`). For such a URL, the host is resolved before each attempt and
refused when any address is loopback, private or link-local, unless the host is allowed by
name (`allowHosts`).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import attrs
import httpx

from ...engine.callbacks import not_global
from ...engine.config.mapping import CallbackConfig
from ...engine.config.models import SubscriberConfig
from .base import (
    DeliveryError,
    SendResult,
    error_for_response,
    parse_config,
    request,
)

#: the prefix of a mapping's callback sender's name (`callback:<rule id>`)
CALLBACK_PREFIX = "callback:"
#: the prefix of a lifecycle subscriber's sender (`event:<index in events.subscribers>`)
EVENT_PREFIX = "event:"
MAX_CHARS = 1_000_000


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value for one message."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def envelope(kind: str, data: Mapping[str, Any], *, now: float | None = None) -> str:
    """A Standard Webhooks payload: `{"type", "timestamp", "data"}` as JSON text."""
    at = datetime.fromtimestamp(time.time() if now is None else now, UTC)
    stamp = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps({"type": kind, "timestamp": stamp, "data": dict(data)}, ensure_ascii=False)


async def _addresses(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@attrs.define
class SignedSender:
    """POSTs signed bodies to URLs for one channel name (`webhook`, `callback:<rule>`)."""

    name: str
    secret: str = attrs.field(repr=False)
    #: hosts that may resolve to non-global addresses; None: no address check (a configured URL)
    allow_hosts: tuple[str, ...] | None = None
    resolve: Callable[[str], Any] = _addresses

    async def post(
        self, client: httpx.AsyncClient, url: str, body: str, *, msg_id: str
    ) -> SendResult:
        await self._check_address(url)
        data = body.encode()
        stamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature(self.secret, msg_id, stamp, data),
        }
        response = await request(
            client, self.name, "POST", url, content=data, headers=headers, follow_redirects=False
        )
        if response.is_redirect or 300 <= response.status_code < 400:
            raise DeliveryError(
                f"{self.name} answered {response.status_code}: a redirect, not followed",
                status=response.status_code,
            )
        if not response.is_success:
            raise error_for_response(self.name, response, _detail(response))
        return SendResult((msg_id,))

    async def _check_address(self, url: str) -> None:
        if self.allow_hosts is None:
            return
        host = urlsplit(url).hostname or ""
        if host in self.allow_hosts:
            return
        try:
            addresses = await self.resolve(host)
        except OSError as exc:
            raise DeliveryError(
                f"{self.name}: the callback host does not resolve ({exc.strerror or exc})",
                retryable=True,
            ) from None
        if not addresses or any(not_global(a) for a in addresses):
            raise DeliveryError(
                f"{self.name}: the callback host resolves to a loopback, private or link-local"
                " address (allow it by name in callback.allowHosts)"
            )


def _detail(response: httpx.Response) -> str | None:
    text = response.text.strip()
    return text[:200] if text else None


class _SignedOnly:
    """What every signed sender shares: long bodies unsplit, no last route (a webhook is no
    conversation), and sent only through `send_signed`, with the delivery's id."""

    id: str
    max_chars = MAX_CHARS
    keeps_route = False

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        raise DeliveryError(f"{self.id}: sent only with a delivery id (send_signed)")


@attrs.frozen
class WebhookConfig:
    """`channels.webhook`."""

    url: str
    secret: str = attrs.field(repr=False)


@attrs.define
class WebhookChannel(_SignedOnly):
    """Replies as signed webhooks to the configured URL (`channel: webhook`)."""

    id = "webhook"

    config: WebhookConfig
    _sender: SignedSender = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._sender = SignedSender("webhook", self.config.secret)

    @property
    def default_to(self) -> str | None:
        return self.config.url

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> WebhookChannel:
        parsed = parse_config(config, WebhookConfig, path)
        problem = _secret_problem(parsed.secret)
        if problem:
            from .base import ConfigError, ConfigIssue

            raise ConfigError([ConfigIssue(f"{path}.secret", problem)])
        return cls(parsed)

    def validate_recipient(self, to: str) -> str | None:
        if to.rstrip("/") != self.config.url:
            return "the webhook channel posts to its configured url only"
        return None

    async def send_signed(
        self, client: httpx.AsyncClient, to: str, text: str, *, msg_id: str
    ) -> SendResult:
        body = envelope("message.reply", {"text": text})
        return await self._sender.post(client, self.config.url, body, msg_id=msg_id)


@attrs.define
class CallbackChannel(_SignedOnly):
    """A mapping's run callback: its outcome (the delivery's text, already JSON) to the run's
    callback URL, signed with the mapping's secret."""

    id: str
    config: CallbackConfig
    default_to: str | None = None
    _sender: SignedSender = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        from_payload = self.config.url_from is not None
        hosts = self.config.allow_hosts if from_payload else None
        self._sender = SignedSender(self.id, self.config.secret, hosts)

    def validate_recipient(self, to: str) -> str | None:
        parts = urlsplit(to)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "a callback goes to an absolute http:// or https:// URL"
        return None

    async def send_signed(
        self, client: httpx.AsyncClient, to: str, text: str, *, msg_id: str
    ) -> SendResult:
        return await self._sender.post(client, to, text, msg_id=msg_id)


class CallbackSenders:
    """The delivery worker's senders beyond the configured channels: `callback:<rule id>`, made
    from the live rules' `callback` (remade when a reload changes it), and `event:<i>`, the
    lifecycle subscriber `events.subscribers[i]`."""

    def __init__(
        self, rules: Callable[[], Any], subscribers: tuple[SubscriberConfig, ...] = ()
    ) -> None:
        self._rules = rules
        self._made: dict[str, CallbackChannel] = {}
        self._events = {
            f"{EVENT_PREFIX}{i}": EventChannel(f"{EVENT_PREFIX}{i}", sub)
            for i, sub in enumerate(subscribers)
        }

    def __call__(self, name: str) -> Any:
        if name.startswith(EVENT_PREFIX):
            return self._events.get(name)
        if not name.startswith(CALLBACK_PREFIX):
            return None
        rules = self._rules()
        config = rules.callback_of(name[len(CALLBACK_PREFIX) :]) if rules is not None else None
        if config is None:
            return None  # the rule is gone: the delivery fails, saying so
        made = self._made.get(name)
        if made is None or made.config != config:
            made = self._made[name] = CallbackChannel(name, config)
        return made


@attrs.define
class EventChannel(_SignedOnly):
    """A lifecycle subscriber: the event (the delivery's text, already JSON) to its URL."""

    id: str
    config: SubscriberConfig
    default_to: str | None = None

    def validate_recipient(self, to: str) -> str | None:
        return None if to == self.config.url else "a subscriber's events go to its url"

    async def send_signed(
        self, client: httpx.AsyncClient, to: str, text: str, *, msg_id: str
    ) -> SendResult:
        sender = SignedSender(self.id, self.config.secret)  # configured: no address check
        return await sender.post(client, self.config.url, text, msg_id=msg_id)


def _secret_problem(secret: str) -> str | None:
    try:
        ok = secret.startswith("whsec_") and bool(base64.b64decode(secret[6:], validate=True))
    except ValueError:
        ok = False
    return None if ok else "must be whsec_ followed by base64 (a Standard Webhooks secret)"
