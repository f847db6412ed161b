"""Who may use the console: an admin token, as a login session or a bearer header.

A login (`POST /ui/login` with one of the admin tokens: `gateway.auth.token` or an entry of
`gateway.auth.tokens`) sets a session cookie signed with a key derived from every admin token,
name and scope (every worker derives the same key; changing any of them ends every session).
The cookie holds a random session id, the name of the token logged in with and its issue time,
nothing else: the session's scopes are that token's, read from the configuration on each
request (`admin.scopes`); a name no longer configured is no session. it is
`HttpOnly`, `SameSite=Strict`, `Secure` when the request came over HTTPS, and expires after
`SESSION_SECONDS`. A logout ends the session for good: its id is recorded in the store (every
process reads it there; `console.door`), and a copy of its cookie is no session any more.
`Authorization: Bearer <token>` also works (scripts, tests), with that token's scopes.

Every POST of the console carries a CSRF token: a signature of the session id under another
salt, sent as the form field `csrf` (or the `X-CSRF-Token` header for htmx requests). A request
authenticated by a bearer header needs none (a browser never sends that header by itself).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import attrs
from itsdangerous import BadSignature, URLSafeTimedSerializer
from litestar.connection import ASGIConnection

from ..admin.scopes import Principal, TokenTable

COOKIE = "hookwise_console"
SESSION_SECONDS = 12 * 3600
_SESSION_SALT = "hookwise-console-session"
_CSRF_SALT = "hookwise-console-csrf"


@attrs.frozen
class Viewer:
    """An authenticated console user: by a login session (`session_id`) or a bearer header,
    with the token's name and scopes (`principal`)."""

    session_id: str | None
    principal: Principal

    def can(self, scope: str) -> bool:
        """Whether the viewer's token holds `scope` (the pages hide what it may not do)."""
        return self.principal.can(scope)

    @property
    def needs_csrf(self) -> bool:
        return self.session_id is not None


class ConsoleAuth:
    """Signs and checks session cookies and CSRF tokens for the configured admin tokens."""

    def __init__(self, tokens: TokenTable) -> None:
        self._tokens = tokens
        key = hashlib.sha256(b"hookwise console v2\0" + tokens.fingerprint).digest()
        self._signer = URLSafeTimedSerializer(key, salt=_SESSION_SALT)
        self._csrf = URLSafeTimedSerializer(key, salt=_CSRF_SALT)

    def match(self, presented: str) -> Principal | None:
        """The token presented at the login form, or None."""
        return self._tokens.match(presented)

    def new_session(self, principal: Principal) -> tuple[str, str]:
        """A fresh session of `principal`: (its id, the cookie value)."""
        sid = secrets.token_urlsafe(18)
        return sid, self._signer.dumps([sid, principal.name])

    def viewer(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Viewer | None:
        """Who is asking, or None when neither a valid bearer header nor session cookie is there."""
        header = connection.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            found = self.match(token.strip()) if scheme.lower() == "bearer" and token else None
            return Viewer(session_id=None, principal=found) if found else None
        cookie = connection.cookies.get(COOKIE)
        if not cookie:
            return None
        try:
            sid, name = self._signer.loads(cookie, max_age=SESSION_SECONDS)
        except (BadSignature, ValueError, TypeError):
            return None
        principal = self._tokens.named(str(name))
        return Viewer(session_id=str(sid), principal=principal) if principal else None

    def csrf_token(self, viewer: Viewer) -> str:
        return self._csrf.dumps(viewer.session_id or "") if viewer.session_id else ""

    def csrf_ok(self, viewer: Viewer, presented: str | None) -> bool:
        if not viewer.needs_csrf:
            return True
        if not presented:
            return False
        try:
            sid = self._csrf.loads(presented, max_age=SESSION_SECONDS)
        except BadSignature:
            return False
        return secrets.compare_digest(str(sid), viewer.session_id or "")
