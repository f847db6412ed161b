"""A loopback fake of GitLab's notes API, as its documentation describes it
(`/work/shared/reference/api-specs/gitlab.json`: doc/api/notes.md, authentication, rate limits).

`POST /projects/:id/issues/:issue_iid/notes` and `/projects/:id/merge_requests/:iid/notes`, the
project's path URL-encoded as `:id`; `PRIVATE-TOKEN` checked (`401 {"message": "401
Unauthorized"}`); `body` required (400) and at most 1,000,000 characters; `201` with a note
shaped like the documentation's example. `server.missing` holds `group/project#iid` or
`group/project!iid` that do not exist (`404 {"message": "404 Not found"}`). A rate limit is a 429
with a plain-text `Retry later` body, `Retry-After` and `RateLimit-Reset`.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from tests.fakes.fake_http import FakeServer, Recorded, Reply, json_of

_NOTES = re.compile(r"^/api/v4/projects/([^/]+)/(issues|merge_requests)/(\d+)/notes$")


class GitLabFake(FakeServer):
    name = "gitlab"

    def __init__(self, token: str = "glpat-FakeGitLabToken0123456789") -> None:
        super().__init__()
        self.token = token

    def config(self) -> dict[str, Any]:
        return {"token": self.token, "baseUrl": f"{self.url}/api/v4"}

    def is_send(self, req: Recorded) -> bool:
        return req.method == "POST" and _NOTES.match(req.raw_path.split("?")[0]) is not None

    def rate_limited_reply(self, retry_after: float) -> Reply:
        reset = str(int(time.time() + retry_after))
        headers = {"Retry-After": str(int(retry_after)), "RateLimit-Reset": reset}
        return Reply(429, "Retry later", headers)

    def server_error_reply(self) -> Reply:
        return Reply(500, {"message": "500 Internal Server Error"})

    def handle(self, req: Recorded) -> Reply:
        m = _NOTES.match(req.raw_path.split("?")[0])
        if req.method != "POST" or m is None:
            return Reply(404, {"error": "404 Not Found"})
        if req.headers.get("private-token") != self.token:
            return Reply(401, {"message": "401 Unauthorized"})
        project, kind, iid = unquote(m.group(1)), m.group(2), int(m.group(3))
        if "/" in m.group(1):  # the project's path must come URL-encoded, as one segment
            return Reply(404, {"error": "404 Not Found"})
        ref = f"{project}{'#' if kind == 'issues' else '!'}{iid}"
        if ref in self.missing:
            return Reply(404, {"message": "404 Not found"})
        body = json_of(req)
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            return Reply(400, {"error": "body is missing"})
        if len(text) > 1_000_000:
            return Reply(
                400, {"message": {"note": ["is too long (maximum is 1000000 characters)"]}}
            )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        note = {
            "id": self._next_id(),
            "body": text,
            "attachment": None,
            "author": {"id": 1, "username": "hookwise-bot", "name": "hookwise", "state": "active"},
            "created_at": now,
            "updated_at": now,
            "system": False,
            "noteable_id": 1000 + iid,
            "noteable_type": "Issue" if kind == "issues" else "MergeRequest",
            "project_id": 5,
            "noteable_iid": iid,
            "resolvable": False,
            "confidential": False,
            "internal": False,
        }
        return Reply(201, note)
