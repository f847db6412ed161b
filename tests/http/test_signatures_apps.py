"""The schemes of issue 28 that are more than a row of HMAC data, through the real server:

- monday.com: `Authorization: <JWT>` signed (HS256) with the app's Signing Secret, with the
  claims its documentation lists (https://developer.monday.com/apps/docs/authorization-header:
  `accountId`, `userId`, `aud` the app's endpoint, `exp`, `shortLivedToken`, `iat`), and its URL
  challenge (`POST {"challenge": C}` answered `{"challenge": C}`,
  https://developer.monday.com/api-reference/reference/webhooks). monday.com publishes no
  library that signs these; the tokens are made with PyJWT as the documentation describes.
- Atlassian Connect: `Authorization: JWT <token>` whose `qsh` binds it to the request's method,
  path and query. The tokens are made by Atlassian's own library, `atlassian-jwt`
  (`encode_token`, which computes the `qsh` with its `hash_url`).
- Twilio's HMAC-SHA256 signatures (a Webhooks Rule signing with its SharedKey and naming the
  algorithm in `X-Twilio-Webhooks-Signature-Settings`): made by the `twilio` library's
  `RequestValidator.compute_signature(..., algorithm="HMAC_SHA256")`, which also validates them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import jwt
import pytest
from atlassian_jwt.encode import encode_token
from twilio.request_validator import RequestValidator

from tests.http.test_signatures_handshakes import handshakes
from tests.http.test_signatures_providers import events_of
from tests.support.gateway import GatewayProcess, base_config
from tests.support.wait import eventually

MONDAY, MONDAY_OLD = "monday-signing-secret-5f1e-0123456789", "monday-previous-signing-secret-01"
ENDPOINT = "https://hooks.example.com/hooks/monday"
CONNECT, CONNECT_OLD = "connect-shared-secret-0b7c2a-0123456", "connect-previous-shared-secret-012"
CLIENT_KEY = "jira:6a4f0c7e-2f35-4a0b-9d61-connect"
AUTH_TOKEN, SHARED_KEY = "0123456789abcdef0123456789abcdef", "webhooks-rule-shared-key-secret"
RULE_SETTINGS = "key=webhooks_sharedkey_0123456789abcdef,algorithm=HMAC_SHA256"


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    def rule(name: str, verify: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": name,
            "match": {"path": name},
            "action": "wake",
            "textTemplate": f"{name} delivery",
            "verify": {**verify, "auth": "signature"},
        }

    mappings = [
        rule("monday", {"scheme": "monday", "secrets": [MONDAY, MONDAY_OLD], "audience": ENDPOINT}),
        rule("monday-any", {"scheme": "monday", "secret": MONDAY}),
        rule("connect", {"scheme": "atlassian-connect", "secrets": [CONNECT, CONNECT_OLD]}),
        rule("twilio-rule", {"scheme": "twilio", "secrets": [AUTH_TOKEN, SHARED_KEY]}),
    ]  # fmt: skip
    return start_module_gateway(base_config(mappings=mappings))


def _post(gw: GatewayProcess, path: str, body: bytes, headers: dict[str, str], **kw: Any) -> Any:
    assert gw.client is not None
    headers = {"Content-Type": "application/json", **headers}
    return gw.client.post(f"/hooks/{path}", content=body, headers=headers, **kw)


def _refused(r: Any, why: str) -> None:
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "invalid_signature" and why in r.json()["error"], r.text


# --- monday.com -----------------------------------------------------------------------------------


def monday_token(secret: str = MONDAY, **claims: Any) -> str:
    now = int(time.time())
    body = {"accountId": 1825529, "userId": 4012689, "aud": ENDPOINT, "exp": now + 300,
            "shortLivedToken": "SHORT_LIVED_TOKEN", "iat": now, **claims}  # fmt: skip
    return jwt.encode(body, secret, algorithm="HS256")


EVENT = b'{"event":{"type":"create_pulse","boardId":1,"pulseId":2}}'


def test_monday_a_signed_request_is_accepted_and_stored(gw: GatewayProcess) -> None:
    before = events_of(gw, "monday")
    assert _post(gw, "monday", EVENT, {"Authorization": monday_token()}).status_code == 200
    assert (
        _post(gw, "monday", EVENT, {"Authorization": monday_token(MONDAY_OLD)}).status_code == 200
    )
    assert events_of(gw, "monday") == before + 2


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (monday_token("somebody-elses-secret-0123456789abcdef"), "signature does not match"),
        (monday_token(exp=int(time.time()) - 3600), "the token has expired"),
        (monday_token(aud="https://elsewhere.example/hook"), "audience"),
        ("not-a-jwt", "the token is not valid"),
    ],
    ids=["wrong-secret", "expired", "other-audience", "garbage"],
)
def test_monday_refuses_what_its_secret_did_not_sign_now_for_this_endpoint(
    gw: GatewayProcess, token: str, why: str
) -> None:
    before = events_of(gw, "monday")
    _refused(_post(gw, "monday", EVENT, {"Authorization": token}), why)
    assert events_of(gw, "monday") == before


def test_monday_without_an_audience_accepts_any_aud(gw: GatewayProcess) -> None:
    token = monday_token(aud="https://other.example/hook")
    assert _post(gw, "monday-any", EVENT, {"Authorization": token}).status_code == 200


def test_monday_challenge_is_echoed_as_json_and_not_dispatched(gw: GatewayProcess) -> None:
    before = events_of(gw, "monday")
    body = b'{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}'
    r = _post(gw, "monday", body, {})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert r.headers["x-content-type-options"] == "nosniff"
    assert _post(gw, "monday", b'{"challenge":"a\\r\\nb"}', {}).status_code == 400
    assert events_of(gw, "monday") == before


# --- Atlassian Connect ----------------------------------------------------------------------------


def connect_headers(url: str, secret: str = CONNECT, **kw: Any) -> dict[str, str]:
    token = encode_token("POST", url, CLIENT_KEY, secret, **kw)  # Atlassian's library
    return {"Authorization": f"JWT {token}", "X-Atlassian-Webhook-Identifier": str(time.time_ns())}


ISSUE = b'{"timestamp":1,"webhookEvent":"jira:issue_updated","issue":{"key":"HW-1"}}'


def test_connect_a_token_for_this_request_is_accepted(gw: GatewayProcess) -> None:
    before = events_of(gw, "connect")
    for url, query in (
        ("/hooks/connect", None),
        ("/hooks/connect?b=2&a=x%20y&a=1", "b=2&a=x%20y&a=1"),
    ):
        r = _post(gw, "connect", ISSUE, connect_headers(url), params=query)
        assert r.status_code == 200, r.text
    r = _post(gw, "connect", ISSUE, connect_headers("/hooks/connect", CONNECT_OLD))
    assert r.status_code == 200, r.text  # the previous secret of a rotation
    assert events_of(gw, "connect") == before + 3


@pytest.mark.parametrize(
    ("url", "secret", "kw", "why"),
    [
        ("/hooks/elsewhere", CONNECT, {}, "qsh"),
        ("/hooks/connect?a=1", CONNECT, {}, "qsh"),  # sent without the query it signed
        (
            "/hooks/connect",
            "somebody-elses-secret-0123456789abcdef",
            {},
            "signature does not match",
        ),
        ("/hooks/connect", CONNECT, {"timeout_secs": -3600}, "the token has expired"),
    ],
    ids=["other-path", "other-query", "wrong-secret", "expired"],
)
def test_connect_refuses_a_token_not_for_this_request(
    gw: GatewayProcess, url: str, secret: str, kw: dict[str, Any], why: str
) -> None:
    _refused(_post(gw, "connect", ISSUE, connect_headers(url, secret, **kw)), why)


def test_connect_needs_the_jwt_scheme_word(gw: GatewayProcess) -> None:
    token = connect_headers("/hooks/connect")["Authorization"].removeprefix("JWT ")
    _refused(_post(gw, "connect", ISSUE, {"Authorization": f"Bearer {token}"}), "'JWT <token>'")


def test_connect_a_retried_webhook_is_a_replay(gw: GatewayProcess) -> None:
    headers = connect_headers("/hooks/connect")
    assert _post(gw, "connect", ISSUE, headers).status_code == 200
    count = events_of(gw, "connect")
    again = _post(gw, "connect", ISSUE, {**connect_headers("/hooks/connect"),
                  "X-Atlassian-Webhook-Identifier": headers["X-Atlassian-Webhook-Identifier"]})  # fmt: skip
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert events_of(gw, "connect") == count


# --- Twilio, HMAC-SHA256 with a Webhooks Rule's SharedKey -----------------------------------------

FORM = {"From": "+15005550006", "To": "+15551234567", "Body": "hi", "MessageSid": "SM1"}


def _twilio(gw: GatewayProcess, key: str, settings: str | None, algorithm: str) -> Any:
    url = f"{gw.url}/hooks/twilio-rule"
    validator = RequestValidator(key)
    sig = validator.compute_signature(url, FORM, algorithm=algorithm)
    assert validator.validate(url, FORM, sig, algorithm=algorithm)  # the library's own check
    headers = {"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": sig}
    if settings is not None:
        headers["X-Twilio-Webhooks-Signature-Settings"] = settings
    return _post(gw, "twilio-rule", urlencode(FORM).encode(), headers)


def test_twilio_sha256_with_the_shared_key_is_accepted(gw: GatewayProcess) -> None:
    before = events_of(gw, "twilio-rule")
    assert _twilio(gw, SHARED_KEY, RULE_SETTINGS, "HMAC_SHA256").status_code == 200
    assert _twilio(gw, AUTH_TOKEN, None, "HMAC_SHA1").status_code == 200  # no rule: SHA-1
    assert events_of(gw, "twilio-rule") == before + 2


def test_twilio_the_algorithm_must_be_the_one_named(gw: GatewayProcess) -> None:
    _refused(_twilio(gw, SHARED_KEY, None, "HMAC_SHA256"), "signature")  # SHA-256, no settings
    _refused(_twilio(gw, SHARED_KEY, RULE_SETTINGS, "HMAC_SHA1"), "signature")
    _refused(_twilio(gw, "somebody-elses-key", RULE_SETTINGS, "HMAC_SHA256"), "signature")
    unknown = RULE_SETTINGS.replace("HMAC_SHA256", "HMAC_SHA512")
    _refused(_twilio(gw, SHARED_KEY, unknown, "HMAC_SHA256"), "unknown algorithm")


def test_the_monday_challenge_is_in_the_request_log(gw: GatewayProcess) -> None:
    assert _post(gw, "monday", b'{"challenge":"logged-challenge"}', {}).status_code == 200
    entry = eventually(lambda: handshakes(gw, "/hooks/monday"), what="the handshake in the log")
    assert entry[0]["code"] == "monday_challenge"
