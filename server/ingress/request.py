"""`HookRequest`: what the door and the body stages established about one hook request.

One immutable value handed from stage to stage (door -> body -> judge -> accept -> answer; see
`hookwise.server.ingress.hooks`): the hook name, the caller's address, the headers and query as
received, the door guarding the path, and, once the body stage is done, the raw body, the
parsed payload, the `Idempotency-Key` and the engine's view a provider's door checked. A stage
that learns something returns a new value (`attrs.evolve`); nothing changes one in place.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

import attrs
from litestar.types import Scope

from ...engine.request import InboundRequest
from ...engine.signatures.door import Door

#: the longest `Idempotency-Key` taken (and the longest key derived from a provider's id)
MAX_IDEMPOTENCY_KEY = 256

#: headers as the ASGI server gives them (lower-cased names; uvicorn sends a list)
Headers = list[tuple[bytes, bytes]]


@attrs.frozen
class HookRequest:
    """A hook request as the stages see it (never logged: it holds the body and the headers)."""

    #: the hook's name: the path after the hook path, slashes trimmed (`wake`, `github`)
    sub: str
    method: str
    #: the caller's address as the lock-out and the limits count it (`auth.client_key`)
    client: str
    headers: Headers
    #: the raw query string
    query: bytes
    #: the URL as the client requested it (for schemes that sign it: Twilio, Square)
    url: str
    #: the provider's door guarding this path (a `verify` block), if any
    door: Door | None = None
    #: authenticated by the door's signature instead of the hook token (`auth: signature`)
    by_signature: bool = False
    body: bytes = b""
    payload: Any = None
    idempotency_key: str | None = None
    #: the engine's view the door checked (its fetched keys, its URL); None without a door
    checked: InboundRequest | None = None
    #: who the door's signature check says sent it (`Verifier.sender`); None: not checked there
    sender: str | None = None

    def with_body(self, body: bytes) -> HookRequest:
        """This request with its body read (built directly: `attrs.evolve` costs twice as much,
        on every request)."""
        return HookRequest(
            self.sub, self.method, self.client, self.headers, self.query, self.url, self.door,
            self.by_signature, body, self.payload, self.idempotency_key, self.checked,
            self.sender,
        )  # fmt: skip

    def with_payload(self, payload: Any, idempotency_key: str | None) -> HookRequest:
        """This request with its payload parsed and its `Idempotency-Key` read."""
        return HookRequest(
            self.sub, self.method, self.client, self.headers, self.query, self.url, self.door,
            self.by_signature, self.body, payload, idempotency_key, self.checked,
            self.sender,
        )  # fmt: skip

    def inbound(self, payload: Any) -> InboundRequest:
        """The engine's view of this request carrying `payload` (the door's, when it checked
        one; without a door the URL is left out: the judge asks for it only when a rule signs
        it)."""
        if self.checked is not None:
            return attrs.evolve(self.checked, payload=payload)
        return InboundRequest(
            path=self.sub,
            payload=payload,
            headers={k.decode("latin-1"): v.decode("latin-1") for k, v in self.headers},
            query=query_of(self.query),
            raw_body=self.body,
            now=datetime.now(UTC),
            url="",
        )

    def header(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None


def sub_path(scope: Scope, hook_path: str) -> str | None:
    """The part after the hook path with slashes trimmed; None when the path is not ours."""
    path: str = scope.get("raw_path", b"").decode("latin-1").split("?", 1)[0] or scope["path"]
    path = unquote(path)
    if path == hook_path:
        return ""
    if not path.startswith(hook_path + "/"):
        return None
    return path[len(hook_path) + 1 :].strip("/")


def query_of(raw: bytes) -> dict[str, str]:
    return dict(parse_qsl(raw.decode("latin-1"))) if raw else {}


def url_of(scope: Scope, headers: Headers) -> str:
    """The URL as the client requested it (for schemes that sign it: Twilio, Square)."""
    host = None
    for k, v in headers:
        if k == b"host":
            host = v
            break
    if host is None:
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}".encode() if server[1] else str(server[0]).encode()
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope.get("query_string", b"")
    url = f"{scope.get('scheme', 'http')}://{host.decode('latin-1')}{path.decode('latin-1')}"
    return url + ("?" + query.decode("latin-1") if query else "")
