"""Microsoft Teams: the Bot Framework connector, with a client-credentials token.

The bot's token comes from `authUrl` (Microsoft Entra's v2.0 token endpoint for `tenantId` by
default) with scope `https://api.botframework.com/.default`; it is cached until a minute before
it expires, and fetched again once when the connector answers 401. Messages go to
`POST {serviceUrl}/v3/conversations/{id}/activities` as markdown message activities. `to` is a
conversation id (`conversation:<id>` or the bare id, such as `19:...@thread.tacv2`). Concurrent
sends that find the token expired wait for one refresh (single-flight), not one each.

`serviceUrl` is this channel's `baseUrl`; either key may be given, not both. A conversation whose
activities carry another `serviceUrl` (Teams gives each region its own, such as
`https://smba.trafficmanager.net/emea/`) gets it from `conversations`, a map of conversation id to
service URL. The URL comes from configuration only, never from a recipient, so hook content can
never send the bot's token elsewhere.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

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
    markdown_to_discord,
    parse_config,
    request,
    send_parts,
    split_for,
)

SCOPE = "https://api.botframework.com/.default"
DEFAULT_SERVICE_URL = "https://smba.trafficmanager.net/teams"
_CONVERSATION = re.compile(r"(?:conversation:)?(?P<id>[^\s/?#]{3,})")
_EXPIRY_MARGIN = 60.0


@attrs.frozen
class MSTeamsConfig:
    """`channels.msteams`."""

    app_id: str
    app_password: str
    tenant_id: str
    service_url: str | None = None
    base_url: str | None = None
    auth_url: str | None = None
    default_to: str | None = None
    conversations: dict[str, str] = attrs.field(factory=dict)

    @property
    def connector_url(self) -> str:
        return self.service_url or self.base_url or DEFAULT_SERVICE_URL

    def connector_for(self, conversation: str) -> str:
        """The conversation's own `serviceUrl` when configured, else the channel's."""
        return self.conversations.get(conversation, self.connector_url)

    @property
    def token_url(self) -> str:
        tenant = quote(self.tenant_id, safe="")
        return self.auth_url or f"https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"


@attrs.frozen
class _Token:
    value: str
    expires_at: float


@attrs.define
class MSTeamsChannel(ChannelBase):
    """A Bot Framework bot installed in Microsoft Teams.

    `clock` (monotonic seconds) decides token expiry; tests pass their own.
    """

    id = "msteams"
    max_chars = 4000
    recipient_hint = (
        "a Microsoft Teams recipient is a conversation id, such as "
        "19:abc123@thread.tacv2 (optionally written conversation:<id>)"
    )

    config: MSTeamsConfig
    clock: Callable[[], float] = time.monotonic
    _token: _Token | None = attrs.field(default=None, init=False)
    _token_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> MSTeamsChannel:
        parsed = parse_config(config, MSTeamsConfig, path)
        if parsed.service_url and parsed.base_url:
            problem = "give either serviceUrl or baseUrl (the same setting), not both"
            raise ConfigError([ConfigIssue(f"{path}.baseUrl", problem)])
        parsed = attrs.evolve(parsed, conversations=_service_urls(parsed, path))
        channel = cls(parsed)
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> str | None:
        m = _CONVERSATION.fullmatch(to)
        return m["id"] if m else None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        conversation_id = self._recipient(to)
        service_url = self.config.connector_for(conversation_id)
        url = f"{service_url}/v3/conversations/{quote(conversation_id, safe='')}/activities"

        async def send_one(part: str) -> str:
            body = {"type": "message", "text": part, "textFormat": "markdown"}
            response = await self._post_activity(client, url, body)
            if response.status_code == 401:  # token revoked or expired early: fetch a new one once
                self._forget(response.request.headers.get("authorization", ""))
                response = await self._post_activity(client, url, body)
            data = json_body(response)
            if response.is_success:
                return str(data.get("id", "")) if isinstance(data, dict) else ""
            raise error_for_response(self.id, response, _describe(data))

        parts = split_for(self, text, markdown_to_discord)
        return await send_parts(parts, skip_parts, send_one)

    async def _post_activity(
        self, client: httpx.AsyncClient, url: str, body: dict[str, Any]
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {await self._access_token(client)}"}
        return await request(client, self.id, "POST", url, json=body, headers=headers)

    def _forget(self, authorization: str) -> None:
        """Drop the cached token the connector refused (unless a newer one replaced it)."""
        if self._token is not None and authorization == f"Bearer {self._token.value}":
            self._token = None

    async def _access_token(self, client: httpx.AsyncClient) -> str:
        """The cached token, or a new one; concurrent callers share one refresh (single-flight)."""
        if self._token is not None and self.clock() < self._token.expires_at:
            return self._token.value
        async with self._token_lock:
            if self._token is not None and self.clock() < self._token.expires_at:
                return self._token.value  # another sender refreshed it while we waited
            return await self._fetch_token(client)

    async def _fetch_token(self, client: httpx.AsyncClient) -> str:
        now = self.clock()
        form = {
            "grant_type": "client_credentials",
            "client_id": self.config.app_id,
            "client_secret": self.config.app_password,
            "scope": SCOPE,
        }
        response = await request(client, self.id, "POST", self.config.token_url, data=form)
        data = json_body(response)
        if response.is_success and isinstance(data, dict) and data.get("access_token"):
            lifetime = float(data.get("expires_in", 3600))
            self._token = _Token(str(data["access_token"]), now + lifetime - _EXPIRY_MARGIN)
            return self._token.value
        error = _describe(data)
        exc = error_for_response(self.id, response, error)
        raise attrs.evolve(exc, message=f"{self.id}: getting a bot token failed: {exc.message}")


def _service_urls(config: MSTeamsConfig, path: str) -> dict[str, str]:
    """`conversations` checked: non-blank ids, absolute http(s) URLs (trailing slash removed)."""
    issues: list[ConfigIssue] = []
    urls: dict[str, str] = {}
    for conversation, url in config.conversations.items():
        key = f"{path}.conversations.{conversation}"
        parts = urlsplit(url)
        if not conversation.strip() or not _CONVERSATION.fullmatch(conversation):
            issues.append(ConfigIssue(key, "is not a conversation id"))
        elif parts.scheme not in ("http", "https") or not parts.netloc:
            issues.append(ConfigIssue(key, "must be an absolute http:// or https:// URL"))
        else:
            urls[conversation] = url.rstrip("/")
    if issues:
        raise ConfigError(issues)
    return urls


def _describe(data: Any) -> str | None:
    """The connector's `error.message`, or the token endpoint's `error_description`."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        return " ".join(str(error[k]) for k in ("code", "message") if error.get(k)) or None
    if isinstance(data.get("error_description"), str):
        return f"{error}: {data['error_description'].splitlines()[0]}"
    if isinstance(error, str):
        return error
    message = data.get("message")
    return message if isinstance(message, str) else None
