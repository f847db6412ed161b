"""GitHub: a reply becomes a comment on the issue or pull request the hook named.

`to` is `owner/repo#number` (`"{{ repository.full_name }}#{{ issue.number }}"`, or the pull
request's number: every pull request is an issue, and its conversation comments are issue
comments): `POST /repos/{owner}/{repo}/issues/{issue_number}/comments` with `{"body": text}`,
answered `201` with the comment (its `id` is the message id). Comments are split at 65,536
characters, GitHub's limit for a comment body.

Authentication is a token (`token`: a personal access token or any installation token), or a
GitHub App (`appId`, `privateKey` (or `privateKeyFile`, read at load), `installationId`): a JWT signed RS256
(`iat` 60 s in the past, `exp` 9 minutes ahead, `iss` the app id) is exchanged at `POST
/app/installations/{installation_id}/access_tokens` for an installation token, which is kept
until a minute before its `expires_at` (an hour) and fetched again on a 401.

Rate limits: GitHub answers 403 or 429. With `Retry-After`, that many seconds; with
`x-ratelimit-remaining: 0`, until `x-ratelimit-reset` (UTC epoch seconds); both are retried
with the delivery worker's back-off, at least that long. Any other 403 is permanent (a missing
permission), as are 404 (no such issue, or no access) and 422.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import attrs
import httpx

from .base import (
    ChannelBase,
    ConfigError,
    ConfigIssue,
    DeliveryError,
    SendResult,
    check_default_to,
    error_for_response,
    json_body,
    parse_config,
    request,
    retry_after_header,
    send_parts,
    split_for,
)

_TARGET = re.compile(r"^([A-Za-z0-9_.-]{1,100})/([A-Za-z0-9_.-]{1,100})#([1-9][0-9]{0,9})$")
_API_VERSION = "2022-11-28"
#: an installation token is renewed this long before it expires
_RENEW_BEFORE = 60.0


@attrs.frozen
class GitHubConfig:
    """`channels.github`: a token, or a GitHub App's id, private key and installation."""

    token: str | None = attrs.field(default=None, repr=False)
    app_id: str | None = None
    private_key: str | None = attrs.field(default=None, repr=False)  # or privateKeyFile
    installation_id: str | None = None
    base_url: str = "https://api.github.com"
    default_to: str | None = None


@attrs.define
class _InstallationToken:
    token: str
    expires: float


@attrs.define
class GitHubChannel(ChannelBase):
    """Comments on GitHub issues and pull requests."""

    id = "github"
    max_chars = 65536
    recipient_hint = (
        "a GitHub recipient is owner/repo#number: the issue or pull request to comment on, such"
        " as octo-org/gateway#42"
    )

    config: GitHubConfig
    clock: Callable[[], float] = time.time
    _installation: _InstallationToken | None = attrs.field(default=None, init=False)
    _lock: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> GitHubChannel:
        parsed = parse_config(config, GitHubConfig, path)
        app = (parsed.app_id, parsed.private_key, parsed.installation_id)
        if parsed.token is None and None in app:
            problem = "give token, or appId, privateKey (or privateKeyFile) and installationId"
            raise ConfigError([ConfigIssue(path, problem)])
        if parsed.token is not None and any(v is not None for v in app):
            raise ConfigError([ConfigIssue(path, "give token or a GitHub App, not both")])
        channel = cls(parsed)
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> tuple[str, str, str] | None:
        m = _TARGET.match(to)
        return (m.group(1), m.group(2), m.group(3)) if m else None

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        owner, repo, number = self._recipient(to)
        url = f"{self.config.base_url}/repos/{owner}/{repo}/issues/{number}/comments"

        async def one(part: str) -> str:
            response = await self._post(client, url, {"body": part})
            body = json_body(response)
            if not isinstance(body, dict) or not isinstance(body.get("id"), int):
                raise DeliveryError("github: the comment's answer has no id", retryable=False)
            return str(body["id"])

        return await send_parts(split_for(self, text), skip_parts, one)

    async def _post(
        self, client: httpx.AsyncClient, url: str, payload: dict[str, Any]
    ) -> httpx.Response:
        for fresh in (False, True):
            token = await self._token(client, fresh=fresh)
            response = await request(
                client, self.id, "POST", url, json=payload, headers=_headers(token)
            )
            if response.status_code == 401 and self.config.token is None and not fresh:
                continue  # the installation token expired early or was revoked: once more
            if response.is_success:
                return response
            raise self._error(response)
        raise self._error(response)

    def _error(self, response: httpx.Response) -> DeliveryError:
        body = json_body(response)
        detail = body.get("message") if isinstance(body, dict) else None
        status = response.status_code
        limited = retry_after_header(response, self.clock)
        if limited is None and response.headers.get("x-ratelimit-remaining") == "0":
            reset = response.headers.get("x-ratelimit-reset", "")
            if reset.isdigit():
                limited = max(0.0, float(reset) - self.clock())
        if status in (403, 429) and limited is not None:
            return error_for_response(
                self.id, response, detail, retry_after=limited, retryable=True
            )
        return error_for_response(self.id, response, detail)

    async def _token(self, client: httpx.AsyncClient, *, fresh: bool = False) -> str:
        if self.config.token is not None:
            return self.config.token
        async with self._lock:
            held = self._installation
            if held is not None and not fresh and held.expires - _RENEW_BEFORE > self.clock():
                return held.token
            self._installation = await self._exchange(client)
            return self._installation.token

    async def _exchange(self, client: httpx.AsyncClient) -> _InstallationToken:
        """A new installation token for the App's JWT."""
        import jwt  # PyJWT (and `cryptography`): loaded when a GitHub App token is made

        now = int(self.clock())
        claims = {"iat": now - 60, "exp": now + 540, "iss": str(self.config.app_id)}
        signed = jwt.encode(claims, self.config.private_key or "", algorithm="RS256")
        url = (
            f"{self.config.base_url}/app/installations/{self.config.installation_id}/access_tokens"
        )
        response = await request(client, self.id, "POST", url, headers=_headers(signed))
        if not response.is_success:
            error = self._error(response)
            raise attrs.evolve(error, message=f"{error.message} (installation token)")
        body = json_body(response)
        token = body.get("token") if isinstance(body, dict) else None
        expires = _epoch(body.get("expires_at")) if isinstance(body, dict) else None
        if not isinstance(token, str) or expires is None:
            raise DeliveryError(
                "github: the installation token answer has no token", retryable=True
            )
        return _InstallationToken(token, expires)


def _headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": _API_VERSION,
    }


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
