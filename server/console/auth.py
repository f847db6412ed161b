"""Who may use the console: the gateway token, as a login session or a bearer header.

A login (`POST /ui/login` with the gateway token) sets a session cookie signed with a key derived
from the gateway token (every worker derives the same key; changing the token ends every
session). The cookie holds a random session id and its issue time, nothing else; it is
`HttpOnly`, `SameSite=Strict`, `Secure` when the request came over HTTPS, and expires after
`SESSION_SECONDS`. A logout ends the session for good: its id is recorded in the store (every
process reads it there; `console.door`), and a copy of its cookie is no session any more.
`Authorization: Bearer <gateway token>` also works (scripts, tests).

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

from ..ingress.auth import TokenCheck

COOKIE = "hookwise_console"
SESSION_SECONDS = 12 * 3600
_SESSION_SALT = "hookwise-console-session"
_CSRF_SALT = "hookwise-console-csrf"


@attrs.frozen
class Viewer:
    """An authenticated console user: by a login session (`session_id`) or a bearer header."""

    session_id: str | None

    @property
    def needs_csrf(self) -> bool:
        return self.session_id is not None


class ConsoleAuth:
    """Signs and checks session cookies and CSRF tokens for one gateway token."""

    def __init__(self, token: str) -> None:
        self._check = TokenCheck(token)
        key = hashlib.sha256(b"hookwise console v1\0" + token.encode("utf-8")).digest()
        self._signer = URLSafeTimedSerializer(key, salt=_SESSION_SALT)
        self._csrf = URLSafeTimedSerializer(key, salt=_CSRF_SALT)

    def token_matches(self, presented: str) -> bool:
        return self._check.matches(presented)

    def new_session(self) -> tuple[str, str]:
        """A fresh session: (its id, the cookie value)."""
        sid = secrets.token_urlsafe(18)
        return sid, self._signer.dumps(sid)

    def viewer(self, connection: ASGIConnection[Any, Any, Any, Any]) -> Viewer | None:
        """Who is asking, or None when neither a valid bearer header nor session cookie is there."""
        header = connection.headers.get("authorization")
        if header is not None:
            scheme, _, token = header.partition(" ")
            if scheme.lower() == "bearer" and token.strip() and self.token_matches(token.strip()):
                return Viewer(session_id=None)
            return None
        cookie = connection.cookies.get(COOKIE)
        if not cookie:
            return None
        try:
            sid = self._signer.loads(cookie, max_age=SESSION_SECONDS)
        except BadSignature:
            return None
        return Viewer(session_id=str(sid))

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
