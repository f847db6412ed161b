"""GitLab: a reply becomes a note on the issue or merge request the hook named.

`to` is GitLab's own reference: `group/project#iid` for an issue, `group/project!iid` for a merge
request (`"{{ project.path_with_namespace }}!{{ object_attributes.iid }}"`). The note is `POST
/projects/:id/issues/:issue_iid/notes` or `/projects/:id/merge_requests/:merge_request_iid/notes`
with `{"body": text}`, the project's path URL-encoded as its `:id` (as GitLab's notes API
documents), answered `201` with the note (its `id` is the message id). A note holds at most
1,000,000 characters. `token` (a personal, project or group access token) goes in the
`PRIVATE-TOKEN` header; `baseUrl` is the instance's API (default `https://gitlab.com/api/v4`).

Rate limits: a 429 (its body is plain text, `Retry later` by default) with `Retry-After`, or
else `RateLimit-Reset` (Unix time), is retried with the delivery worker's back-off, at least
that long. 401, 403, 404 and 400 are permanent, with GitLab's `message` or `error`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import attrs
import httpx

from .base import (
    ChannelBase,
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

_TARGET = re.compile(r"^([A-Za-z0-9_.][A-Za-z0-9_./-]{0,254})([#!])([1-9][0-9]{0,9})$")


@attrs.frozen
class GitLabConfig:
    """`channels.gitlab`."""

    token: str = attrs.field(repr=False)
    base_url: str = "https://gitlab.com/api/v4"
    default_to: str | None = None


@attrs.define
class GitLabChannel(ChannelBase):
    """Notes on GitLab issues and merge requests."""

    id = "gitlab"
    max_chars = 1_000_000
    recipient_hint = (
        "a GitLab recipient is group/project#iid for an issue or group/project!iid for a merge"
        " request, such as acme/gateway!7"
    )

    config: GitLabConfig
    clock: Callable[[], float] = time.time

    @property
    def default_to(self) -> str | None:
        return self.config.default_to

    @classmethod
    def from_config(cls, config: Mapping[str, Any], path: str) -> GitLabChannel:
        channel = cls(parse_config(config, GitLabConfig, path))
        check_default_to(channel, path)
        return channel

    def _normalize(self, to: str) -> tuple[str, str, str] | None:
        m = _TARGET.match(to)
        if m is None or "//" in m.group(1) or m.group(1).endswith("/") or "/" not in m.group(1):
            return None
        kind = "issues" if m.group(2) == "#" else "merge_requests"
        return m.group(1), kind, m.group(3)

    async def send(
        self, client: httpx.AsyncClient, to: str, text: str, *, skip_parts: int = 0
    ) -> SendResult:
        project, kind, iid = self._recipient(to)
        url = f"{self.config.base_url}/projects/{quote(project, safe='')}/{kind}/{iid}/notes"
        headers = {"PRIVATE-TOKEN": self.config.token}

        async def one(part: str) -> str:
            response = await request(
                client, self.id, "POST", url, json={"body": part}, headers=headers
            )
            if not response.is_success:
                raise self._error(response)
            body = json_body(response)
            if not isinstance(body, dict) or not isinstance(body.get("id"), int):
                raise DeliveryError("gitlab: the note's answer has no id", retryable=False)
            return str(body["id"])

        return await send_parts(split_for(self, text), skip_parts, one)

    def _error(self, response: httpx.Response) -> DeliveryError:
        body = json_body(response)
        detail = None
        if isinstance(body, dict):
            found = body.get("message") or body.get("error")
            detail = found if isinstance(found, str) else None
        elif response.text.strip():
            detail = response.text.strip()[:200]
        limited = retry_after_header(response, self.clock)
        reset = response.headers.get("ratelimit-reset", "")
        if limited is None and response.status_code == 429 and reset.isdigit():
            limited = max(0.0, float(reset) - self.clock())
        return error_for_response(self.id, response, detail, retry_after=limited)
