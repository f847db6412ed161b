"""Plaid: `Plaid-Verification` holds a JWT (ES256) signed with a key Plaid gives out by its id:
the server asks `/webhook_verification_key/get` for the token's `kid` with the block's API
credentials (`clientId` and `secret`: a POST, a `KeyRequest`), as Plaid documents
(https://plaid.com/docs/api/webhooks/webhook-verification/). The key must not have expired
(`expired_at`), the token's `iat` must be at most 5 minutes away, and its `request_body_sha256`
claim must be the hex SHA-256 of the body.

The endpoint is production's, or the block's `keysUrl` (Plaid's sandbox, or a test's server); a
key is cached under the endpoint, the credentials that asked for it and its id, so a new key (a
rotation) is asked for once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

from ..request import InboundRequest
from .core import (
    KeyRequest,
    Scheme,
    SignatureError,
    SignatureFormat,
    Verifier,
    check_age,
    header,
    malformed,
)
from .jwts import claims_of

PLAID_KEYS = "https://production.plaid.com/webhook_verification_key/get"
_KID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def _kid(v: Verifier, request: InboundRequest) -> tuple[str, str]:
    import jwt  # PyJWT loads with the first token (see `jwts.claims_of`)

    token = header(request, v.scheme.signature.header, v.scheme)
    try:
        head = jwt.get_unverified_header(token)
    except jwt.PyJWTError:
        raise malformed(v.scheme, "the Plaid-Verification header holds no JWT") from None
    if head.get("alg") != "ES256":
        raise malformed(v.scheme, "the token's alg is not ES256")
    kid = head.get("kid")
    if not isinstance(kid, str) or not _KID.fullmatch(kid):
        raise malformed(v.scheme, "the token names no key (kid)")
    return token, kid


def key_request(v: Verifier, request: InboundRequest) -> tuple[KeyRequest, ...]:
    """The key the token names, asked for with the block's API credentials."""
    _, kid = _kid(v, request)
    url = v.options.keys_url or PLAID_KEYS
    secret = v.keys.secrets[0].decode("utf-8") if v.keys.secrets else ""
    body = {"client_id": v.options.client_id or "", "secret": secret, "key_id": kid}
    # cached per credentials (a digest of them: the name is no secret) and key id
    asker = hashlib.sha256(f"{body['client_id']}\n{secret}".encode()).hexdigest()[:16]
    return (KeyRequest(url, json.dumps(body).encode(), f"{url}#{asker}#{kid}"),)


def _check(v: Verifier, request: InboundRequest) -> None:
    import jwt

    scheme = v.scheme
    token, _ = _kid(v, request)
    wanted = key_request(v, request)[0]
    document = request.fetched.get(wanted.name)
    if document is None:
        raise SignatureError("plaid signature check failed: the key was not fetched")
    try:
        found = json.loads(document).get("key")
        key = jwt.PyJWK.from_dict(found, algorithm="ES256").key
    except (ValueError, AttributeError, TypeError, jwt.PyJWTError):
        raise SignatureError("plaid signature check failed: unreadable key") from None
    if found.get("expired_at") is not None:
        raise malformed(scheme, "the token's key has expired")
    claims = claims_of(scheme, token, key, "ES256")
    iat = claims.get("iat")
    if isinstance(iat, bool) or not isinstance(iat, int | float):
        raise malformed(scheme, "the token has no iat")
    tolerance = v.tolerance
    assert tolerance is not None
    check_age(scheme.name, float(iat), request.now, tolerance)
    digest = hashlib.sha256(request.raw_body).hexdigest()
    presented = str(claims.get("request_body_sha256", ""))
    if not hmac.compare_digest(presented.encode(), digest.encode()):
        raise malformed(scheme, "the token's request_body_sha256 is not the body's")


PLAID = Scheme(
    "plaid",
    SignatureFormat("Plaid-Verification"),
    algorithm="jwt-es256",
    encoding="raw",
    tolerance=300.0,
    key="fetched",
    check=_check,
    fetch=key_request,
    doc="Plaid-Verification: <JWT ES256 {iat, request_body_sha256}> (key: its kid, from Plaid)",
)
