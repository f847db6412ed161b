"""JWT-carried proofs through the real server: Google Cloud Pub/Sub push (an OIDC token signed
with a key Google publishes; here a key pair made for the test, published by a local JWKS
server that the verify block's `keysUrl` names) and Netlify (a JWT signed with the shared
secret whose `sha256` claim is the body's digest).

The oracle for the Pub/Sub tokens made here is Google's own library: `google-auth`'s
`id_token.verify_token` accepts them from the same local JWKS. Netlify's scheme is as its
documentation describes it (https://docs.netlify.com/site-deploys/deploy-notifications/
#payload-signature): a JWS with `iss: netlify` and `sha256`, signed with the JWS secret token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import google.auth.transport.requests
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.oauth2 import id_token

from tests.support.documents import serving
from tests.support.gateway import GatewayProcess, base_config

AUDIENCE = "https://hooks.example.com/hooks/pubsub"
ACCOUNT = "pusher@project-1.iam.gserviceaccount.com"
KID = "test-key-1"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
NETLIFY_SECRET = "netlify-jws-secret-0123456789abcdef"
NETLIFY_OLD = "netlify-old-jws-secret-0123456789ab"


HITS: dict[str, int] = {}


def _route(path: str) -> tuple[int, bytes, dict[str, str]]:
    if path != "/certs":
        return 500, b"", {}
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key()))
    body = json.dumps({"keys": [{**jwk, "kid": KID, "alg": "RS256", "use": "sig"}]}).encode()
    return 200, body, {"Content-Type": "application/json", "Cache-Control": "max-age=3600"}


@pytest.fixture(scope="module")
def keys_url() -> Iterator[str]:
    with serving(_route, HITS) as url:
        yield url


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess], keys_url: str) -> GatewayProcess:
    pubsub = {
        "scheme": "google-pubsub",
        "audience": AUDIENCE,
        "serviceAccount": ACCOUNT,
        "keysUrl": keys_url + "/certs",
        "auth": "signature",
    }
    mappings = [
        {"id": "pubsub", "match": {"path": "pubsub"}, "action": "wake",
         "textTemplate": "pubsub {{ payload.message.messageId }}", "verify": pubsub},
        {"id": "pubsub-down", "match": {"path": "pubsub-down"}, "action": "wake",
         "textTemplate": "x", "verify": {**pubsub, "keysUrl": keys_url + "/broken"}},
        {"id": "netlify", "match": {"path": "netlify"}, "action": "wake", "textTemplate": "deploy",
         "verify": {"scheme": "netlify", "secrets": [NETLIFY_SECRET, NETLIFY_OLD]}},
    ]  # fmt: skip
    return start_module_gateway(base_config(mappings=mappings))


def _token(key: Any = KEY, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": "https://accounts.google.com",
        "aud": AUDIENCE,
        "email": ACCOUNT,
        "email_verified": True,
        "iat": now,
        "exp": now + 3600,
        **claims,
    }
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return jwt.encode(body, pem, algorithm="RS256", headers={"kid": KID})


def _push(message_id: str) -> bytes:
    data = base64.b64encode(b'{"alert": "disk"}').decode()
    message = {"data": data, "messageId": message_id, "publishTime": "2026-01-01T00:00:00Z"}
    return json.dumps({"message": message, "subscription": "projects/p/subscriptions/s"}).encode()


def _post(gw: GatewayProcess, path: str, token: str | None, body: bytes) -> Any:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    assert gw.client is not None
    return gw.client.post(f"/hooks/{path}", content=body, headers=headers)


def _events(gw: GatewayProcess, rule: str) -> int:
    items = gw.admin("/api/events", limit=500)["items"]
    return sum(1 for e in items if e["source"] == f"hook:{rule}")


def test_googles_library_accepts_the_tokens_made_here(keys_url: str) -> None:
    claims = id_token.verify_token(
        _token(),
        google.auth.transport.requests.Request(),
        audience=AUDIENCE,
        certs_url=keys_url + "/certs",
    )
    assert claims["email"] == ACCOUNT


def test_a_pubsub_push_with_a_valid_token_is_accepted_and_a_redelivery_replayed(
    gw: GatewayProcess,
) -> None:
    message_id = f"m-{time.time_ns()}"
    before = _events(gw, "pubsub")
    r = _post(gw, "pubsub", _token(), _push(message_id))
    assert r.status_code == 200, r.text
    assert _events(gw, "pubsub") == before + 1
    again = _post(gw, "pubsub", _token(), _push(message_id))  # Pub/Sub redelivers the message id
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert _events(gw, "pubsub") == before + 1


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: _token(aud="https://elsewhere.example.com/"), "audience"),
        (lambda: _token(iss="https://evil.example.com"), "issuer"),
        (lambda: _token(OTHER), "signature does not match"),
        (lambda: _token(exp=int(time.time()) - 3600, iat=int(time.time()) - 7200), "expired"),
        (lambda: _token(email="someone@else.iam.gserviceaccount.com"), "service account"),
        (lambda: _token(email_verified=False), "service account"),
        (lambda: "not-a-jwt", "no JWT"),
    ],
    ids=["audience", "issuer", "other-key", "expired", "account", "unverified", "garbage"],
)
def test_a_pubsub_push_with_a_bad_token_is_401(gw: GatewayProcess, token: Any, why: str) -> None:
    before = _events(gw, "pubsub")
    r = _post(gw, "pubsub", token(), _push(f"bad-{time.time_ns()}"))
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "invalid_signature" and why in r.json()["error"]
    assert _events(gw, "pubsub") == before


def test_a_pubsub_push_without_a_token_is_401(gw: GatewayProcess) -> None:
    r = _post(gw, "pubsub", None, _push("none"))
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"


def test_the_keys_are_fetched_once_and_cached(gw: GatewayProcess) -> None:
    assert _post(gw, "pubsub", _token(), _push(f"c-{time.time_ns()}")).status_code == 200
    fetched = HITS["/certs"]
    for _ in range(5):
        assert _post(gw, "pubsub", _token(), _push(f"c-{time.time_ns()}")).status_code == 200
    assert HITS["/certs"] == fetched  # none of the five fetched the keys again


def test_keys_that_cannot_be_fetched_are_a_503_and_fetched_again_only_later(
    gw: GatewayProcess,
) -> None:
    before = HITS.get("/broken", 0)
    for _ in range(3):
        r = _post(gw, "pubsub-down", _token(), _push(f"d-{time.time_ns()}"))
        assert r.status_code == 503 and r.json()["code"] == "keys_unavailable"
    assert HITS["/broken"] == before + 1  # the failure is remembered: no flood of fetches
    assert "fetching http://127.0.0.1" in gw.stderr()


def _netlify(body: bytes, secret: str = NETLIFY_SECRET, **claims: Any) -> dict[str, str]:
    payload = {"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest(), **claims}
    return {"X-Webhook-Signature": jwt.encode(payload, secret, algorithm="HS256")}


def test_netlify_deploy_notifications(gw: GatewayProcess) -> None:
    body = json.dumps({"id": "d1", "state": "ready"}).encode()
    for secret in (NETLIFY_SECRET, NETLIFY_OLD):  # the previous secret of a rotation too
        r = gw.hook("netlify", content=body, headers=_netlify(body, secret))
        assert r.status_code == 200, r.text
    cases = {
        "wrong secret": _netlify(body, "somebody-elses-secret-0123456789abcd"),
        "another body": _netlify(body + b" "),
        "issuer": _netlify(body, iss="elsewhere"),
    }
    for what, headers in cases.items():
        r = gw.hook("netlify", content=body, headers=headers)
        assert r.status_code == 401, what
        assert r.json()["code"] == "invalid_signature"
