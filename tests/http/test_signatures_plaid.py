"""Plaid through the real server, against a local fake of Plaid's key endpoint.

Plaid documents the scheme at https://plaid.com/docs/api/webhooks/webhook-verification/: the
`Plaid-Verification` header is a JWT (`alg` ES256, `kid` the key's id) whose claims are `iat`
(refused when more than 5 minutes old) and `request_body_sha256` (the hex SHA-256 of the body);
the key is a JWK that `POST /webhook_verification_key/get` returns for `{client_id, secret,
key_id}` as `{"key": {alg, created_at, crv, expired_at, kid, kty, use, x, y}, "request_id"}`
(an expired key has `expired_at` set). The fake below answers that request as documented
(Plaid's error object with HTTP 400 for wrong credentials or an unknown key). Plaid publishes no
library that signs webhooks, so the tokens are made here with PyJWT and a P-256 key pair made for
the test, as the documentation describes them.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from tests.http.test_signatures_providers import events_of
from tests.support.gateway import GatewayProcess, base_config

CLIENT_ID, SECRET = "5f2a0c7e9b1d4e3f8a6c0b2d", "plaid-sandbox-api-secret-0123456789"
KEYS = {kid: ec.generate_private_key(ec.SECP256R1()) for kid in ("kid-1", "kid-2", "kid-old")}
EXPIRED = {"kid-old"}
ASKED: list[dict[str, Any]] = []  # the bodies the fake was POSTed


def _jwk(kid: str) -> dict[str, Any]:
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(KEYS[kid].public_key()))
    return {**jwk, "alg": "ES256", "kid": kid, "use": "sig", "created_at": 1560466150,
            "expired_at": 1560466200 if kid in EXPIRED else None}  # fmt: skip


def _error(code: str, message: str) -> dict[str, Any]:
    return {"display_message": None, "error_code": code, "error_message": message,
            "error_type": "INVALID_INPUT", "request_id": "req-fake"}  # fmt: skip


class _Plaid(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ASKED.append(asked)
        if self.path != "/webhook_verification_key/get":
            status, answer = 404, _error("NOT_FOUND", "not found")
        elif (asked.get("client_id"), asked.get("secret")) != (CLIENT_ID, SECRET):
            status, answer = 400, _error("INVALID_API_KEYS", "invalid client_id or secret provided")
        elif asked.get("key_id") not in KEYS:
            status, answer = 400, _error("INVALID_FIELD", "invalid key_id provided")
        else:
            status, answer = 200, {"key": _jwk(asked["key_id"]), "request_id": "req-fake"}
        body = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def plaid() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Plaid)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/webhook_verification_key/get"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess], plaid: str) -> GatewayProcess:
    block = {"scheme": "plaid", "auth": "signature", "clientId": CLIENT_ID, "secret": SECRET,
             "keysUrl": plaid}  # fmt: skip
    mappings = [
        {"id": "plaid", "match": {"path": "plaid"}, "action": "wake", "textTemplate": "plaid",
         "verify": block},
        {"id": "plaid-badcreds", "match": {"path": "plaid-badcreds"}, "action": "wake",
         "textTemplate": "x", "verify": {**block, "secret": "not-the-api-secret"}},
    ]  # fmt: skip
    return start_module_gateway(base_config(mappings=mappings))


def webhook(n: int) -> bytes:
    return json.dumps({"webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE",
                       "item_id": f"item-{n}-{time.time_ns()}", "environment": "sandbox"},
                      indent=2).encode()  # fmt: skip


def token(body: bytes, kid: str = "kid-1", *, key: Any = None, **claims: Any) -> str:
    payload = {"iat": int(time.time()), "request_body_sha256": hashlib.sha256(body).hexdigest()}
    return jwt.encode({**payload, **claims}, key or KEYS[kid], algorithm="ES256",
                      headers={"kid": kid})  # fmt: skip


def post(gw: GatewayProcess, body: bytes, value: str, path: str = "plaid") -> Any:
    assert gw.client is not None
    headers = {"Content-Type": "application/json", "Plaid-Verification": value}
    return gw.client.post(f"/hooks/{path}", content=body, headers=headers)


def refused(r: Any, why: str) -> None:
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "invalid_signature" and why in r.json()["error"], r.text


def test_a_signed_webhook_is_accepted_and_its_key_asked_for_once(gw: GatewayProcess) -> None:
    before, asked = events_of(gw, "plaid"), len(ASKED)
    for n in range(3):
        body = webhook(n)
        assert post(gw, body, token(body)).status_code == 200
    assert events_of(gw, "plaid") == before + 3
    new = ASKED[asked:]
    assert new in ([], [{"client_id": CLIENT_ID, "secret": SECRET, "key_id": "kid-1"}])
    body = webhook(9)
    assert post(gw, body, token(body, "kid-2")).status_code == 200  # a new key: asked for
    assert ASKED[-1] == {"client_id": CLIENT_ID, "secret": SECRET, "key_id": "kid-2"}


def test_a_tampered_body_is_refused(gw: GatewayProcess) -> None:
    body = webhook(1)
    refused(post(gw, body.replace(b"TRANSACTIONS", b"AUTH"), token(body)), "request_body_sha256")


def test_a_token_older_than_five_minutes_is_refused(gw: GatewayProcess) -> None:
    body = webhook(2)
    refused(post(gw, body, token(body, iat=int(time.time()) - 600)), "s old, more than the 300")


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda b: token(b, key=ec.generate_private_key(ec.SECP256R1())), "signature does not"),
        (lambda b: token(b, "kid-old"), "key has expired"),
        (
            lambda b: jwt.encode({"iat": int(time.time())}, "k" * 32, headers={"kid": "kid-1"}),
            "ES256",
        ),
        (lambda b: token(b, iat="yesterday"), "token"),
        (lambda b: "not a jwt", "no JWT"),
    ],
    ids=["other-key", "expired-key", "hs256", "bad-iat", "garbage"],
)
def test_what_plaid_did_not_sign_is_refused(
    gw: GatewayProcess, make: Callable[[bytes], str], why: str
) -> None:
    body = webhook(3)
    refused(post(gw, body, make(body)), why)


def test_an_unknown_key_or_wrong_credentials_are_503_and_plaid_retries(gw: GatewayProcess) -> None:
    body = webhook(4)
    r = post(gw, body, token(body, "kid-unknown", key=KEYS["kid-1"]))
    assert (r.status_code, r.json()["code"]) == (503, "keys_unavailable"), r.text
    r = post(gw, body, token(body), path="plaid-badcreds")
    assert (r.status_code, r.json()["code"]) == (503, "keys_unavailable"), r.text
    assert SECRET not in r.text and "not-the-api-secret" not in r.text


def test_plaid_needs_its_client_id() -> None:
    from hookwise.engine.config.convert import structure
    from hookwise.engine.config.mapping import VerifyConfig
    from hookwise.engine.errors import ConfigError
    from hookwise.engine.signatures import compile_verifier
    from tests.support.gateway import REPO

    block = {"scheme": "plaid", "auth": "signature", "secret": SECRET}
    with pytest.raises(ConfigError, match="clientId: is required for the plaid scheme"):
        compile_verifier(structure(block, VerifyConfig), REPO, "v")
    with pytest.raises(ConfigError, match="clientId: does not apply"):
        compile_verifier(structure({"scheme": "github", "secret": "s", "clientId": "c"},
                                   VerifyConfig), REPO, "v")  # fmt: skip
