"""A loopback fake of GitHub's REST API: issue comments and GitHub App installation tokens.

As `github/rest-api-description` (`tests/fakes/api_specs/github.json`) describes them:

- `POST /repos/{owner}/{repo}/issues/{issue_number}/comments` with `{"body": ...}` (the request
  body checked against the operation's schema: 422 otherwise), answered `201` with an issue
  comment shaped like the description's example; `401 Bad credentials` for an unknown token,
  `404 Not Found` for an issue in `server.missing` (`owner/repo#n`);
- `POST /app/installations/{installation_id}/access_tokens` with `Authorization: Bearer <JWT>`:
  the JWT is verified as GitHub does (RS256 under the App's public key, `iss` the App id, `exp`
  at most 10 minutes after `iat`, not expired), answered `201` with an installation token that
  expires in an hour (`expires_in` changes that) and is accepted from then on.

Rate limits are GitHub's two kinds: `rate_limit()` answers the secondary limit (429 with
`Retry-After`), `primary_limit(reset_in)` the primary one (403, `x-ratelimit-remaining: 0`,
`x-ratelimit-reset` in epoch seconds).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import jwt

from tests.fakes.fake_http import FakeServer, Recorded, Reply, bearer, json_of
from tests.fakes.specs import problems, spec

_COMMENTS = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_TOKENS = re.compile(r"^/app/installations/(\d+)/access_tokens$")
_DOCS = "https://docs.github.com/rest"
_OPERATION = "#/paths/~1repos~1{owner}~1{repo}~1issues~1{issue_number}~1comments/post"


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class GitHubFake(FakeServer):
    name = "github"

    def __init__(self, token: str = "ghp_FakeGitHubPersonalAccessToken0123") -> None:
        super().__init__()
        self.tokens = {token}
        self.token = token
        #: the GitHub App: id, public key (PEM) and installation; None until `app()` is called
        self.app_id: str | None = None
        self.public_key: str | None = None
        self.installation_id = "4242"
        self.expires_in = 3600.0
        self.exchanges: list[dict[str, Any]] = []  # the JWT claims of each token exchange

    def app(self, app_id: str, public_key: str) -> None:
        self.app_id, self.public_key = app_id, public_key

    def config(self) -> dict[str, Any]:
        return {"token": self.token, "baseUrl": self.url}

    def is_send(self, req: Recorded) -> bool:
        return req.method == "POST" and _COMMENTS.match(req.path) is not None

    def rate_limited_reply(self, retry_after: float) -> Reply:
        message = "You have exceeded a secondary rate limit. Please wait a few minutes."
        return Reply(429, self._error(message), {"Retry-After": str(int(retry_after))})

    def primary_limit(self, reset_in: float, times: int = 1) -> None:
        reset = str(int(time.time() + reset_in))
        headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0"}
        headers |= {"x-ratelimit-used": "5000", "x-ratelimit-reset": reset}
        message = "API rate limit exceeded for installation ID 4242."
        self.script(Reply(403, self._error(message), headers), times)

    def server_error_reply(self) -> Reply:
        return Reply(502, self._error("Server Error"))

    @staticmethod
    def _error(message: str) -> dict[str, Any]:
        return {"message": message, "documentation_url": _DOCS, "status": "x"}

    def handle(self, req: Recorded) -> Reply:
        if req.method != "POST":
            return Reply(404, {"message": "Not Found", "documentation_url": _DOCS})
        if m := _TOKENS.match(req.path):
            return self._exchange(req, m.group(1))
        m = _COMMENTS.match(req.path)
        if m is None:
            return Reply(404, {"message": "Not Found", "documentation_url": _DOCS})
        if bearer(req) not in self.tokens:
            return Reply(401, {"message": "Bad credentials", "documentation_url": _DOCS})
        owner, repo, number = m.groups()
        if f"{owner}/{repo}#{number}" in self.missing:
            return Reply(404, {"message": "Not Found", "documentation_url": _DOCS})
        body = json_of(req)
        schema = f"{_OPERATION}/requestBody/content/application~1json/schema"
        found = problems("github", schema, body)
        if found:
            return Reply(422, {"message": "Validation Failed", "errors": found})
        n = self._next_id()
        comment = dict(spec("github")["components"]["examples"]["issue-comment"]["value"])
        for key in ("pin", "minimized"):  # nullable in OpenAPI 3.0: left out, as optional
            comment.pop(key, None)
        now = _iso(time.time())
        comment |= {
            "id": n,
            "body": body["body"],
            "url": f"{self.url}/repos/{owner}/{repo}/issues/comments/{n}",
            "html_url": f"https://github.com/{owner}/{repo}/issues/{number}#issuecomment-{n}",
            "issue_url": f"{self.url}/repos/{owner}/{repo}/issues/{number}",
            "created_at": now,
            "updated_at": now,
        }
        return Reply(201, comment, {"Location": comment["url"]})

    def _exchange(self, req: Recorded, installation: str) -> Reply:
        token = bearer(req)
        if token is None or self.public_key is None:
            return Reply(401, {"message": "Bad credentials", "documentation_url": _DOCS})
        try:
            claims = jwt.decode(
                token,
                self.public_key,
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"]},
                leeway=0,
            )
        except jwt.PyJWTError as exc:
            return Reply(401, {"message": f"A JSON web token could not be decoded ({exc})"})
        if str(claims["iss"]) != self.app_id or claims["exp"] - claims["iat"] > 660:
            return Reply(401, {"message": "'Issuer' claim ('iss') must be an Integer"})
        if installation != self.installation_id:
            return Reply(404, {"message": "Not Found", "documentation_url": _DOCS})
        self.exchanges.append(claims)
        issued = f"ghs_{self._next_id():036d}"
        self.tokens.add(issued)
        answer = {
            "token": issued,
            "expires_at": _iso(time.time() + self.expires_in),
            "permissions": {"issues": "write", "pull_requests": "write"},
            "repository_selection": "selected",
        }
        return Reply(201, answer)
