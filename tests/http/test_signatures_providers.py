"""Every provider's signature scheme through the real server, signed by the provider's OWN library
where one exists on PyPI (stripe, slack_sdk, standardwebhooks, svix, twilio; paddle's and
SendGrid's verifiers and PyNaCl as oracles of the signatures made here), else as the provider
documents it.

For each provider: a valid delivery is accepted and stored; a tampered body, a wrong secret and
a stale timestamp (where the scheme signs one) are 401 `invalid_signature` and store nothing; a
delivery signed with the previous secret of a rotation (`secrets: [new, old]`) is accepted; a
retry of the same delivery (re-signed, as providers do) is answered as a replay
(`Idempotent-Replayed: true`, the first answer) and stores nothing more.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import nacl.signing
import pytest
import standardwebhooks.webhooks
import stripe
import svix.webhooks
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from paddle_billing.Notifications.PaddleSignature import PaddleSignature
from paddle_billing.Notifications.Secret import Secret
from sendgrid.helpers.eventwebhook import EventWebhook
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config

Headers = dict[str, str]


@dataclass
class Ctx:
    """One delivery as the provider would send it."""

    delivery: str
    ts: int
    url: str  # the full URL the request goes to (for schemes that sign it)


def _hmac(key: str | bytes, data: bytes, digest: Any = hashlib.sha256) -> bytes:
    return hmac.new(key.encode() if isinstance(key, str) else key, data, digest).digest()


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# --- keys -----------------------------------------------------------------------------------------

SW_KEY = b"standard-webhooks-key-31-bytes!"  # 31 bytes: its base64 ends with "=" ...
SW_SECRET = "whsec_" + base64.b64encode(SW_KEY).decode().rstrip("=")  # ... sent unpadded (SDK ok)
SW_OLD = "whsec_" + base64.b64encode(b"the-previous-standard-webhooks-key").decode()
SW_WRONG = "whsec_" + base64.b64encode(b"somebody-elses-key-0123456789").decode()
ED_KEY = nacl.signing.SigningKey(b"d" * 32)
ED_WRONG = nacl.signing.SigningKey(b"w" * 32)
EC_KEY = ec.derive_private_key(0x5EED_1234_ABCD, ec.SECP256R1())
EC_WRONG = ec.derive_private_key(0x0BAD_0BAD, ec.SECP256R1())
EC_PUBLIC = base64.b64encode(
    EC_KEY.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
).decode()


# --- how each provider signs ----------------------------------------------------------------------


def github(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = "sha256=" + _hmac(secret, body).hex()
    return {"X-GitHub-Event": "issues", "X-GitHub-Delivery": c.delivery, "X-Hub-Signature-256": sig}


def stripe_sign(body: bytes, secret: str, c: Ctx) -> Headers:
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, c.ts)
    return {"Stripe-Signature": header}


def standard_sign(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = standardwebhooks.webhooks.Webhook(secret).sign(
        c.delivery, datetime.fromtimestamp(c.ts, UTC), body.decode()
    )
    return {"webhook-id": c.delivery, "webhook-timestamp": str(c.ts), "webhook-signature": sig}


def svix_sign(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = svix.webhooks.Webhook(secret).sign(
        c.delivery, datetime.fromtimestamp(c.ts, UTC), body.decode()
    )
    return {"svix-id": c.delivery, "svix-timestamp": str(c.ts), "svix-signature": sig}


def v1a_sign(body: bytes, key: Any, c: Ctx) -> Headers:
    signed = key.sign(f"{c.delivery}.{c.ts}.".encode() + body).signature
    return {
        "webhook-id": c.delivery,
        "webhook-timestamp": str(c.ts),
        "webhook-signature": "v1a," + base64.b64encode(signed).decode(),
    }


def slack_sign(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = SignatureVerifier(secret).generate_signature(timestamp=str(c.ts), body=body)
    assert sig is not None
    return {"X-Slack-Signature": sig, "X-Slack-Request-Timestamp": str(c.ts)}


def shopify(body: bytes, secret: str, c: Ctx) -> Headers:
    return {
        "X-Shopify-Hmac-Sha256": base64.b64encode(_hmac(secret, body)).decode(),
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Webhook-Id": c.delivery,
    }


def _form_params(body: bytes) -> dict[str, str]:
    from urllib.parse import parse_qsl

    return dict(parse_qsl(body.decode(), keep_blank_values=True))


def twilio_form(body: bytes, secret: str, c: Ctx) -> Headers:
    validator = RequestValidator(secret)
    params = _form_params(body) if body.startswith(b"From") else {}
    sig = validator.compute_signature(c.url, params)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Twilio-Signature": sig,
        "I-Twilio-Idempotency-Token": c.delivery,
    }


def twilio_json(body: bytes, secret: str, c: Ctx) -> Headers:
    # c.url carries ?bodySHA256= of the body as sent (see `Provider.query`)
    return {
        "X-Twilio-Signature": RequestValidator(secret).compute_signature(c.url, {}),
        "I-Twilio-Idempotency-Token": c.delivery,
    }


def gitlab(body: bytes, secret: str, c: Ctx) -> Headers:
    return {
        "X-Gitlab-Token": secret,
        "X-Gitlab-Event": "Issue Hook",
        "X-Gitlab-Event-UUID": c.delivery,
    }


def linear(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"Linear-Signature": _hmac(secret, body).hex(), "Linear-Delivery": c.delivery}


def zoom(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = "v0=" + _hmac(secret, f"v0:{c.ts}:".encode() + body).hex()
    return {"x-zm-signature": sig, "x-zm-request-timestamp": str(c.ts)}


def twitch_time(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ".123456789Z"


def twitch(body: bytes, secret: str, c: Ctx) -> Headers:
    stamp = twitch_time(c.ts)
    sig = "sha256=" + _hmac(secret, c.delivery.encode() + stamp.encode() + body).hex()
    return {
        "Twitch-Eventsub-Message-Id": c.delivery,
        "Twitch-Eventsub-Message-Timestamp": stamp,
        "Twitch-Eventsub-Message-Signature": sig,
        "Twitch-Eventsub-Message-Type": "notification",
    }


def paddle(body: bytes, secret: str, c: Ctx) -> Headers:
    header = f"ts={c.ts};h1={_hmac(secret, f'{c.ts}:'.encode() + body).hex()}"
    # Paddle's own SDK is the oracle of the header made here.
    assert PaddleSignature().verify(header, body.decode(), Secret(secret))
    return {"Paddle-Signature": header}


SQUARE_URL = "https://hooks.example.com/webhooks/square"  # its publicUrl: a proxy in front


def square(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = base64.b64encode(_hmac(secret, SQUARE_URL.encode() + body)).decode()
    return {"x-square-hmacsha256-signature": sig}


def mailgun_body(delivery: str, secret: str, ts: int, token: str = "tok-0123456789abcdef") -> bytes:
    sig = _hmac(secret, f"{ts}{token}".encode()).hex()
    signature = {"timestamp": str(ts), "token": token, "signature": sig}
    return _json({"signature": signature, "event-data": {"id": delivery, "event": "delivered"}})


def sendgrid(body: bytes, key: Any, c: Ctx) -> Headers:
    signed = key.sign(str(c.ts).encode() + body, ec.ECDSA(hashes.SHA256()))
    sig = base64.b64encode(signed).decode()
    return {
        "X-Twilio-Email-Event-Webhook-Signature": sig,
        "X-Twilio-Email-Event-Webhook-Timestamp": str(c.ts),
    }


def discord(body: bytes, key: Any, c: Ctx) -> Headers:
    sig = key.sign(str(c.ts).encode() + body).signature.hex()
    return {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": str(c.ts)}


def meta(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"X-Hub-Signature-256": "sha256=" + _hmac(secret, body).hex()}


def pagerduty(body: bytes, secret: str, c: Ctx) -> Headers:
    # PagerDuty lists one v1 signature per active secret.
    other = _hmac("a-secret-of-another-subscription", body).hex()
    return {"X-PagerDuty-Signature": f"v1={other},v1={_hmac(secret, body).hex()}"}


def sentry(body: bytes, secret: str, c: Ctx) -> Headers:
    return {
        "Sentry-Hook-Signature": _hmac(secret, body).hex(),
        "Sentry-Hook-Resource": "issue",
        "Sentry-Hook-Timestamp": str(c.ts),
        "Request-ID": c.delivery,
    }


def dropbox(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"X-Dropbox-Signature": _hmac(secret, body).hex()}


def no_headers(body: bytes, secret: str, c: Ctx) -> Headers:
    return {}


def custom(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = base64.b64encode(_hmac(secret, f"{c.ts}.".encode() + body, hashlib.sha512)).decode()
    return {"X-Acme-Signature": "sha512=" + sig, "X-Acme-Timestamp": str(c.ts)}


# --- the providers --------------------------------------------------------------------------------


@dataclass
class Provider:
    name: str  # path, rule id
    verify: dict[str, Any]
    sign: Callable[[bytes, Any, Ctx], Headers]
    body: Callable[[str, int, Any], bytes]  # (delivery, ts, key) -> body
    key: Any  # the current secret / private key
    old: Any = None  # the previous secret of a rotation (None: the scheme has no rotation)
    wrong: Any = "a-wrong-secret-for-this-provider"
    stale: bool = False  # the scheme signs a timestamp
    replay: str = "dedupe"  # dedupe | none (no delivery id) | off (dedupe: off)
    tamper: Callable[[bytes], bytes] = lambda b: b[:-1] + b' ,"x":1}'
    query: Callable[[bytes], dict[str, str]] = lambda b: {}
    token: bool = True  # sends the hook token (False: auth: signature)
    extra: dict[str, Any] = field(default_factory=dict)  # more mapping keys


def _event(**fields: Any) -> Callable[[str, int, Any], bytes]:
    return lambda d, ts, key: _json({k: (d if v is ID else v) for k, v in fields.items()})


ID = object()

PROVIDERS = [
    Provider("github", {"scheme": "github"}, github, _event(action="opened", number=1, d=ID), "gh-new", "gh-old"),
    Provider("stripe", {"scheme": "stripe"}, stripe_sign, _event(id=ID, object="event", type="invoice.paid"), "whsec_new", "whsec_old", stale=True),
    Provider("standard", {"scheme": "standard-webhooks"}, standard_sign, _event(type="user.created", d=ID), SW_SECRET, SW_OLD, SW_WRONG, stale=True),
    Provider("svix", {"scheme": "svix"}, svix_sign, _event(type="user.created", d=ID), SW_SECRET, SW_OLD, SW_WRONG, stale=True),
    Provider(
        "standard-v1a",
        {"scheme": "standard-webhooks", "publicKey": "whpk_" + base64.b64encode(bytes(ED_KEY.verify_key)).decode()},
        v1a_sign, _event(type="user.created", d=ID), ED_KEY, None, ED_WRONG, stale=True,
    ),
    Provider("slack", {"scheme": "slack", "auth": "signature"}, slack_sign, _event(type="event_callback", event_id=ID, event={"type": "message"}), "slack-new", "slack-old", stale=True, token=False),
    Provider("shopify", {"scheme": "shopify"}, shopify, _event(id=820982911946154508, email="jon@example.com", d=ID), "shpss_new", "shpss_old"),
    Provider(
        "twilio",
        {"scheme": "twilio"},
        twilio_form,
        lambda d, ts, key: urlencode({"From": "+15005550006", "To": "+15551234567", "Body": "hi", "MessageSid": d}).encode(),
        "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210",
        tamper=lambda b: b.replace(b"Body=hi", b"Body=HI"),
        query=lambda b: {"token": HOOK_TOKEN},  # the token is in the URL Twilio signs
        token=False,
    ),
    Provider(
        "twilio-json",
        {"scheme": "twilio", "auth": "signature"},
        twilio_json, _event(data={"sid": "SM1"}, d=ID),
        "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210",
        query=lambda b: {"bodySHA256": RequestValidator("x").compute_hash(b.decode())},
        token=False,
    ),
    Provider("gitlab", {"scheme": "gitlab"}, gitlab, _event(object_kind="issue", d=ID), "gl-new", "gl-old", tamper=lambda b: b),
    Provider("linear", {"scheme": "linear"}, linear, lambda d, ts, k: _json({"action": "create", "type": "Issue", "webhookTimestamp": ts * 1000, "d": d}), "lin_new", "lin_old", stale=True),
    Provider("zoom", {"scheme": "zoom", "auth": "signature"}, zoom, _event(event="meeting.started", d=ID), "zoom-new", "zoom-old", stale=True, replay="none", token=False),
    Provider("twitch", {"scheme": "twitch"}, twitch, _event(subscription={"type": "channel.follow"}, d=ID), "twitch-new", "twitch-old", stale=True),
    Provider("paddle", {"scheme": "paddle", "tolerance": "60s"}, paddle, _event(event_id=ID, event_type="transaction.completed"), "pdl_ntfset_new", "pdl_ntfset_old", stale=True),
    Provider("square", {"scheme": "square", "publicUrl": SQUARE_URL}, square, _event(type="payment.updated", event_id=ID), "sq-new", "sq-old"),
    Provider(
        "mailgun",
        {"scheme": "mailgun", "tolerance": "5m"},
        no_headers,
        lambda d, ts, key: mailgun_body(d, key, ts),
        "mg-key-new", "mg-key-old", stale=True,
        tamper=lambda b: b.replace(b"tok-0123", b"tok-9999"),
    ),
    Provider("sendgrid", {"scheme": "sendgrid", "publicKey": EC_PUBLIC, "tolerance": "5m"}, sendgrid, _event(event="delivered", sg_event_id=ID), EC_KEY, None, EC_WRONG, stale=True, replay="none"),
    Provider(
        "discord",
        {"scheme": "discord", "publicKey": bytes(ED_KEY.verify_key).hex(), "auth": "signature"},
        discord, _event(type=2, id=ID, data={"name": "ask"}), ED_KEY, None, ED_WRONG, token=False,
    ),
    Provider("whatsapp", {"scheme": "whatsapp"}, meta, _event(object="whatsapp_business_account", d=ID), "app-new", "app-old", replay="none"),
    Provider("pagerduty", {"scheme": "pagerduty"}, pagerduty, lambda d, ts, k: _json({"event": {"id": d, "event_type": "incident.triggered"}}), "pd-new", "pd-old"),
    Provider("sentry", {"scheme": "sentry"}, sentry, _event(action="created", d=ID), "sentry-new", "sentry-old", extra={"dedupe": {"header": "Request-ID"}}),
    Provider("dropbox", {"scheme": "dropbox"}, dropbox, _event(list_folder={"accounts": ["dbid:1"]}, d=ID), "dbx-new", "dbx-old", replay="off", extra={"dedupe": "off"}),
    Provider(
        "msgraph",
        {"scheme": "msgraph"},
        no_headers,
        lambda d, ts, key: _json({"value": [{"subscriptionId": d, "clientState": key, "changeType": "created"}]}),
        "graph-state-new", "graph-state-old", tamper=lambda b: b.replace(b"graph-state", b"graph-statX"),
        replay="none",
    ),
    Provider(
        "acme",
        {"scheme": "hmac", "header": "X-Acme-Signature", "algorithm": "sha512", "encoding": "base64", "prefix": "sha512=", "signed": "{timestamp}.{body}", "timestampHeader": "X-Acme-Timestamp"},
        custom, _event(kind="acme", d=ID), "acme-new", "acme-old", stale=True, extra={"dedupe": {"jsonpath": "$.d"}},
    ),
]  # fmt: skip
BY_NAME = {p.name: p for p in PROVIDERS}


def _block(p: Provider) -> dict[str, Any]:
    if p.old is None:
        return p.verify
    return {**p.verify, "secrets": [p.key, p.old]}


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    mappings = [
        {
            "id": p.name,
            "match": {"path": p.name},
            "action": "wake",
            "textTemplate": f"{p.name} delivery",
            "verify": _block(p),
            **p.extra,
        }
        for p in PROVIDERS
    ]
    return start_module_gateway(base_config(mappings=mappings))


def events_of(gw: GatewayProcess, rule: str) -> int:
    items = gw.admin("/api/events", limit=500)["items"]
    return sum(1 for e in items if e["source"] == f"hook:{rule}")


_counter = iter(range(10**6))


def deliver(
    gw: GatewayProcess,
    p: Provider,
    *,
    delivery: str | None = None,
    key: Any = None,
    ts: int | None = None,
    tamper: bool = False,
) -> Any:
    """Sign a delivery as the provider does and POST it; returns the response."""
    delivery = delivery or f"dlv-{p.name}-{next(_counter)}-{time.time_ns()}"
    key = p.key if key is None else key
    ts = int(time.time()) if ts is None else ts
    body = p.body(delivery, ts, key)
    query = p.query(body)
    path = f"/hooks/{p.name}"
    url = gw.url + path + (("?" + urlencode(query)) if query else "")
    headers = {"Content-Type": "application/json", **p.sign(body, key, Ctx(delivery, ts, url))}
    if p.token:
        headers["Authorization"] = f"Bearer {HOOK_TOKEN}"
    sent = p.tamper(body) if tamper else body
    assert gw.client is not None
    return gw.client.post(path, content=sent, headers=headers, params=query or None)


def refused(r: Any, p: Provider, what: str) -> None:
    assert r.status_code == 401, (what, r.text)
    body = r.json()
    assert (body["ok"], body["code"], body["rule"]) == (False, "invalid_signature", p.name)
    assert body["error"].startswith(f"rule {p.name!r}: ")
    assert "signature check failed" in body["error"]


@pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.name)
def test_a_valid_delivery_is_accepted_and_stored(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    r = deliver(gw, p)
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is True and r.json()["eventId"]
    assert events_of(gw, p.name) == before + 1


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.name != "gitlab"], ids=lambda p: p.name)
def test_a_tampered_body_is_401_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    refused(deliver(gw, p, tamper=True), p, "tampered")
    assert events_of(gw, p.name) == before


def test_gitlab_proves_the_sender_not_the_body(gw: GatewayProcess) -> None:
    # GitLab's secret token is a shared token, not a signature: the body is not covered.
    p = BY_NAME["gitlab"]
    assert deliver(gw, p).status_code == 200
    refused(deliver(gw, p, key="gl-guess"), p, "wrong token")


@pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.name)
def test_a_wrong_secret_is_401_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    refused(deliver(gw, p, key=p.wrong), p, "wrong secret")
    assert events_of(gw, p.name) == before


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.stale], ids=lambda p: p.name)
def test_a_stale_timestamp_is_401(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    r = deliver(gw, p, ts=int(time.time()) - 3600)
    refused(r, p, "stale")
    assert "the signed timestamp is" in r.json()["error"]
    assert "s old, more than the" in r.json()["error"]
    assert events_of(gw, p.name) == before


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.old is not None], ids=lambda p: p.name)
def test_the_previous_secret_of_a_rotation_is_accepted(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    r = deliver(gw, p, key=p.old)
    assert r.status_code == 200, r.text
    assert events_of(gw, p.name) == before + 1


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.replay == "dedupe"], ids=lambda p: p.name)
def test_a_retried_delivery_is_a_replay_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    delivery = f"retry-{p.name}-{time.time_ns()}"
    first = deliver(gw, p, delivery=delivery, ts=int(time.time()) - 2)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    count = events_of(gw, p.name)
    again = deliver(gw, p, delivery=delivery)  # re-signed now, as the provider's retry is
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert events_of(gw, p.name) == count
    other = deliver(gw, p)  # another delivery is not a replay
    assert "idempotent-replayed" not in other.headers
    assert events_of(gw, p.name) == count + 1


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.replay != "dedupe"], ids=lambda p: p.name)
def test_without_a_delivery_id_nothing_is_deduplicated(gw: GatewayProcess, p: Provider) -> None:
    # zoom, sendgrid, meta and graph send no delivery id; dropbox's rule says dedupe: off
    delivery = f"same-{p.name}-{time.time_ns()}"
    count = events_of(gw, p.name)
    for _ in range(2):
        r = deliver(gw, p, delivery=delivery)
        assert r.status_code == 200 and "idempotent-replayed" not in r.headers
    assert events_of(gw, p.name) == count + 2


def test_an_idempotency_key_sent_wins_over_the_delivery_id(gw: GatewayProcess) -> None:
    p = BY_NAME["github"]
    headers = {"Idempotency-Key": f"mine-{time.time_ns()}"}
    body = _json({"action": "x"})
    sig = github(body, p.key, Ctx(f"d-{time.time_ns()}", 0, ""))
    first = gw.hook("github", content=body, headers={**sig, **headers})
    sig2 = github(body, p.key, Ctx(f"d-{time.time_ns()}", 0, ""))  # another delivery id
    again = gw.hook("github", content=body, headers={**sig2, **headers})
    assert first.status_code == again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize("name", ["slack", "zoom", "discord", "twilio-json"])
def test_auth_signature_needs_no_token_but_a_valid_signature(gw: GatewayProcess, name: str) -> None:
    p = BY_NAME[name]
    assert deliver(gw, p).status_code == 200  # no hook token sent
    r = gw.hook(name, {"type": "event_callback"}, token=None)
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"


def test_default_auth_still_needs_the_hook_token_with_a_valid_signature(gw: GatewayProcess) -> None:
    p = BY_NAME["github"]
    body = p.body("d-1", 0, p.key)
    headers = {"Content-Type": "application/json", **github(body, p.key, Ctx("d-1", 0, ""))}
    r = gw.hook("github", content=body, headers=headers, token=None)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"


def test_twilio_signs_the_url_with_the_token_in_it(gw: GatewayProcess) -> None:
    # the form path has no auth: signature: the token in the signed URL authenticates it
    p = BY_NAME["twilio"]
    body = p.body("SM1", 0, p.key)
    url = f"{gw.url}/hooks/twilio?token={HOOK_TOKEN}"
    sig = RequestValidator(p.key).compute_signature(url, _form_params(body))
    assert RequestValidator(p.key).validate(url, _form_params(body), sig)
    assert gw.client is not None
    r = gw.client.post(
        "/hooks/twilio",
        params={"token": HOOK_TOKEN},
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": sig},
    )
    assert r.status_code == 200, r.text
    moved = gw.client.post(
        "/hooks/twilio",
        params={"token": HOOK_TOKEN, "extra": "1"},  # not the URL Twilio signed
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": sig},
    )
    assert moved.status_code == 401


def test_sendgrid_signature_checks_with_sendgrids_own_verifier() -> None:
    # the oracle: SendGrid's helper accepts the signatures the tests send
    body = _json({"event": "delivered"})
    headers = sendgrid(body, EC_KEY, Ctx("x", 1_700_000_000, ""))
    helper = EventWebhook()
    key = helper.convert_public_key_to_ecdsa(EC_PUBLIC)
    sig = headers["X-Twilio-Email-Event-Webhook-Signature"]
    assert helper.verify_signature(body.decode(), sig, "1700000000", key)
    assert not helper.verify_signature(body.decode() + " ", sig, "1700000000", key)


def test_the_standard_webhooks_sdk_accepts_what_hookwise_accepts() -> None:
    # the unpadded whsec_ secret of this module is accepted by both SDKs
    body = b'{"a":1}'
    headers = standard_sign(body, SW_SECRET, Ctx("msg_1", int(time.time()), ""))
    standardwebhooks.webhooks.Webhook(SW_SECRET).verify(body, headers)
    svix.webhooks.Webhook(SW_SECRET).verify(body, headers)


def test_no_secret_reaches_the_log(gw: GatewayProcess) -> None:
    for p in PROVIDERS:
        deliver(gw, p, key=p.wrong)
    log = gw.stderr()
    assert "startup complete" in log
    for p in PROVIDERS:
        for secret in (p.key, p.old):
            if isinstance(secret, str):
                assert secret not in log
