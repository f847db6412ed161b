"""Schemes of app platforms whose proof is a JWT signed (HS256) with the app's shared secret in
the Authorization header, checked with PyJWT; the body itself is not signed.

- `monday`: monday.com's integration requests and board webhooks created by an app carry
  `Authorization: <JWT>` signed with the app's Signing Secret; `exp` is checked, and `aud` (the
  app's endpoint URL) when the block gives `audience`. Its URL challenge
  (`{"challenge": C}` -> `{"challenge": C}`) is answered in `handshakes`.
- `atlassian-connect`: Jira's and Confluence's webhooks to a Connect app carry
  `Authorization: JWT <token>` signed with the installation's `sharedSecret`; its `qsh` claim is
  the hex SHA-256 of the canonical request `METHOD&path&query` (`query_string_hash`), which binds
  the token to the URL called. The path is the request's own (the app's `baseUrl` is then the
  host's root), or `publicUrl`'s when the block gives one.
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import parse_qsl, quote, urlsplit

from ..request import InboundRequest
from .core import Scheme, SignatureFormat, Verifier, header, malformed, request_url
from .jwts import check_times, shared_claims


def _monday(v: Verifier, request: InboundRequest) -> None:
    scheme = v.scheme
    value = header(request, scheme.signature.header, scheme)
    kind, _, rest = value.partition(" ")
    token = rest.strip() if kind.lower() == "bearer" else value
    claims = shared_claims(v, token, audience=v.options.audience)
    check_times(scheme, claims, request)


def _encode(value: str) -> str:
    # RFC 3986 percent-encoding, as Atlassian's canonical query: space is %20, `~` stays
    return quote(value, safe="~")


def canonical_request(method: str, url: str) -> str:
    """`METHOD&path&query` as Atlassian Connect hashes it: the path between single slashes
    (`/` when empty) with `&` encoded; the query's parameters but `jwt`, sorted, each
    `name=value[,value]` (a name's values sorted as sent, then percent-encoded), joined by `&`."""
    parts = urlsplit(url)
    path = "/" + parts.path.strip("/").replace("&", "%26")
    grouped: dict[str, list[str]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name != "jwt":
            grouped.setdefault(name, []).append(value)
    pairs = sorted(
        (_encode(k), ",".join(_encode(v) for v in sorted(vs))) for k, vs in grouped.items()
    )
    return f"{method.upper()}&{path}&{'&'.join(f'{k}={v}' for k, v in pairs)}"


def query_string_hash(method: str, url: str) -> str:
    """The `qsh` claim of a request: the hex SHA-256 of its canonical request."""
    return hashlib.sha256(canonical_request(method, url).encode("utf-8")).hexdigest()


def _atlassian(v: Verifier, request: InboundRequest) -> None:
    scheme = v.scheme
    kind, _, token = header(request, scheme.signature.header, scheme).partition(" ")
    if kind != "JWT" or not token.strip():
        raise malformed(scheme, "the Authorization header is not 'JWT <token>'")
    claims = shared_claims(v, token.strip())
    check_times(scheme, claims, request)
    wanted = query_string_hash("POST", request_url(request, v.options))  # webhooks are POSTed
    if not hmac.compare_digest(str(claims.get("qsh", "")).encode(), wanted.encode()):
        raise malformed(scheme, "the token's qsh is not the hash of the request's method and URL")


APP_SCHEMES = [
    Scheme(
        "monday",
        SignatureFormat("Authorization"),
        algorithm="jwt-hs256",
        encoding="raw",
        handshake="monday",
        check=_monday,
        doc="Authorization: <JWT HS256(signing secret) {exp, aud}>; POST {challenge} echoed",
    ),
    Scheme(
        "atlassian-connect",
        SignatureFormat("Authorization"),
        algorithm="jwt-hs256",
        encoding="raw",
        needs_url=True,
        delivery_id="X-Atlassian-Webhook-Identifier",
        check=_atlassian,
        doc="Authorization: JWT <HS256(sharedSecret) {iss, exp, qsh: SHA-256(POST&path&query)}>",
    ),
]
