"""Schemes whose proof is a signed JWT in a header, checked with PyJWT: Netlify (HS256 with the
shared secret; its `sha256` claim is the body's digest) and Google Cloud Pub/Sub push (RS256
OIDC tokens; Google's public keys are fetched by the server, see `google_keys`).

The engine reads no clock and fetches nothing: `exp` and `nbf` are checked against the request's
`now`, and the keys come in `InboundRequest.fetched`, by URL. `google_keys` names the one URL a
request needs: Google's JWKS, or the block's `keysUrl` (a mirror, or a test's server).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from ..request import InboundRequest
from .core import Scheme, SignatureError, SignatureFormat, Verifier, header, malformed

GOOGLE_JWKS = "https://www.googleapis.com/oauth2/v3/certs"
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
LEEWAY = 60.0  # seconds of clock skew allowed on exp and nbf


class KeyMismatch(SignatureError):
    """A token not signed with the key tried (another key of a rotation may have signed it)."""


def claims_of(
    scheme: Scheme, token: str, key: Any, algorithm: str, **checks: Any
) -> dict[str, Any]:
    """The token's claims once its signature (and `audience`/`issuer`, when given) check;
    the times are checked against the request's `now` by `check_times`."""
    import jwt  # PyJWT (and `cryptography`) loads with the first token: not at every start-up

    # no audience configured: an `aud` claim is not refused
    aud = checks.setdefault("audience", None) is not None
    options: Any = {
        "verify_exp": False,
        "verify_nbf": False,
        "verify_iat": False,
        "verify_aud": aud,
    }
    try:
        return jwt.decode(token, key, algorithms=[algorithm], options=options, **checks)
    except jwt.InvalidAudienceError:
        raise malformed(scheme, "the token's audience is not the configured audience") from None
    except jwt.InvalidIssuerError:
        raise malformed(scheme, "the token's issuer is not the provider") from None
    except jwt.InvalidSignatureError:
        raise KeyMismatch(f"{scheme.name} signature check failed: the token's signature does not"
                          " match the key") from None  # fmt: skip
    except jwt.PyJWTError as exc:
        raise malformed(scheme, f"the token is not valid: {type(exc).__name__}") from None


def check_times(scheme: Scheme, claims: dict[str, Any], request: InboundRequest) -> None:
    """Refuse a token past its `exp` (which it must carry) or before its `nbf`, `LEEWAY` aside."""
    if request.now is None:
        raise ValueError(f"InboundRequest.now is required to verify {scheme.name} tokens")
    now = request.now.timestamp()
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or exp + LEEWAY < now:
        raise SignatureError(f"{scheme.name} signature check failed: the token has expired")
    if isinstance(nbf, int | float) and nbf - LEEWAY > now:
        raise SignatureError(f"{scheme.name} signature check failed: the token is not valid yet")


def shared_claims(v: Verifier, token: str, **checks: Any) -> dict[str, Any]:
    """The claims of an HS256 token signed with any of the block's secrets (a rotation)."""
    last: SignatureError | None = None
    for key in v.keys.secrets:
        try:
            return claims_of(v.scheme, token, key, "HS256", **checks)
        except KeyMismatch as exc:  # another key may have signed it; any other failure is final
            last = exc
    assert last is not None
    raise last


def _netlify(v: Verifier, request: InboundRequest) -> None:
    scheme = v.scheme
    claims = shared_claims(v, header(request, scheme.signature.header, scheme), issuer="netlify")
    digest = hashlib.sha256(request.raw_body).hexdigest()
    if not hmac.compare_digest(str(claims.get("sha256", "")).encode(), digest.encode()):
        raise malformed(scheme, "the token's sha256 is not the body's")


def google_keys(v: Verifier, request: InboundRequest) -> tuple[str, ...]:
    """The JWKS the check needs: Google's, or the block's `keysUrl`."""
    return (v.options.keys_url or GOOGLE_JWKS,)


def _google(v: Verifier, request: InboundRequest) -> None:
    import jwt  # see `claims_of`

    scheme = v.scheme
    value = header(request, scheme.signature.header, scheme)
    kind, _, token = value.partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        raise malformed(scheme, "the Authorization header is not 'Bearer <token>'")
    token = token.strip()
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError:
        raise malformed(scheme, "the Authorization header holds no JWT") from None
    document = request.fetched.get(google_keys(v, request)[0])
    if document is None:
        raise SignatureError(f"{scheme.name} signature check failed: the keys were not fetched")
    try:
        keys = jwt.PyJWKSet.from_dict(json.loads(document))
        key = next((k for k in keys.keys if k.key_id == kid), None)
    except (ValueError, jwt.PyJWTError):
        raise SignatureError(f"{scheme.name} signature check failed: unreadable keys") from None
    if key is None:
        raise malformed(scheme, "the token names a key the provider does not publish")
    claims = claims_of(
        scheme, token, key.key, "RS256", audience=v.options.audience, issuer=GOOGLE_ISSUERS
    )
    check_times(scheme, claims, request)
    wanted = v.options.service_account
    if wanted is not None and (claims.get("email") != wanted or not claims.get("email_verified")):
        raise malformed(scheme, "the token is not from the configured service account")


JWT_SCHEMES = [
    Scheme(
        "netlify",
        SignatureFormat("X-Webhook-Signature"),
        algorithm="jwt-hs256",
        encoding="raw",
        check=_netlify,
        doc="X-Webhook-Signature: <JWT HS256(secret) {iss: netlify, sha256: hex SHA-256(body)}>",
    ),
    Scheme(
        "google-pubsub",
        SignatureFormat("Authorization"),
        algorithm="jwt-rs256",
        encoding="raw",
        key="fetched",
        delivery_id="$.message.messageId",
        check=_google,
        fetch=google_keys,
        doc="Authorization: Bearer <OIDC JWT RS256 by Google {aud, iss, email}> (keys: JWKS)",
    ),
]
