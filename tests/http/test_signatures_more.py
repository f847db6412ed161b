"""The providers of `hookwise.engine.signatures.providers` through the real server, as
`test_signatures_providers.py` tests the first ones (same harness, same checks).

How each delivery is signed here, independently of hookwise's code:
- by the provider's own library where one is on PyPI: HubSpot (`hubspot-api-client` makes the
  v3 signature), Clerk and Resend (`svix`, through which they deliver); and as the oracle that
  accepts the headers made here: Box (`boxsdk`'s `validate_message`), Razorpay (`razorpay`),
  WorkOS (`workos`), LINE (`line-bot-sdk`);
- otherwise as the provider's documentation describes it (the URL is on each row): the header,
  the algorithm, the encoding and the signed content. None of these documents publishes a full
  test vector (secret, body and signature) that could be replayed today, so these rows prove
  the scheme as documented, not against a captured delivery.

For each provider: a valid delivery is accepted and stored; a tampered body (where the body is
signed), a wrong secret and a stale timestamp (where one is signed) are 401 `invalid_signature`;
the previous secret of a rotation is accepted; a retried delivery with the provider's delivery
id is a replay.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode

import braintree
import pytest
import razorpay
from Adyen.util import generate_notification_sig
from box_sdk_gen.managers.webhooks import WebhooksManager
from hubspot.utils.signature import Signature
from linebot.v3 import SignatureValidator
from workos.webhooks._verification import verify_header as workos_verify

from tests.http.test_signatures_providers import (
    ID,
    SW_OLD,
    SW_SECRET,
    SW_WRONG,
    Ctx,
    Headers,
    Provider,
    _event,
    _hmac,
    _json,
    deliver,
    events_of,
    refused,
    svix_sign,
)
from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config

Signer = Callable[[bytes, Any, Ctx], Headers]


def _enc(digest: bytes, encoding: str) -> str:
    if encoding == "hex":
        return digest.hex()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return base64.b64encode(digest).decode()


def body_mac(
    header: str,
    digest: Any = hashlib.sha256,
    encoding: str = "hex",
    prefix: str = "",
    id_header: str | None = None,
    key: Callable[[str], bytes] = str.encode,
) -> Signer:
    """`header: prefix + encoding(HMAC(secret, body))`, and the delivery id in `id_header`."""

    def signer(body: bytes, secret: str, c: Ctx) -> Headers:
        headers = {header: prefix + _enc(_hmac(key(secret), body, digest), encoding)}
        if id_header:
            headers[id_header] = c.delivery
        return headers

    return signer


def token(header: str) -> Signer:
    return lambda body, secret, c: {header: secret}


def bearer(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"Authorization": f"Bearer {secret}"}


def t_v1(header: str, *, ms: bool = False, space: str = "") -> Signer:
    """`header: t=<time>,v1=<hex HMAC-SHA256(secret, t.body)>` (Calendly, Persona, Mux, WorkOS)."""

    def signer(body: bytes, secret: str, c: Ctx) -> Headers:
        t = str(c.ts * 1000 if ms else c.ts)
        return {header: f"t={t},{space}v1={_hmac(secret, t.encode() + b'.' + body).hex()}"}

    return signer


def hubspot(body: bytes, secret: str, c: Ctx) -> Headers:
    ms = str(c.ts * 1000)
    sig = Signature.get_signature(secret, body.decode(), "v3", c.url, "POST", ms)
    return {"X-HubSpot-Signature-v3": sig, "X-HubSpot-Request-Timestamp": ms}


def zendesk(body: bytes, secret: str, c: Ctx) -> Headers:
    stamp = datetime.fromtimestamp(c.ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "X-Zendesk-Webhook-Signature": _enc(_hmac(secret, stamp.encode() + body), "base64"),
        "X-Zendesk-Webhook-Signature-Timestamp": stamp,
        "X-Zendesk-Webhook-Invocation-Id": c.delivery,
    }


def box(body: bytes, secret: str, c: Ctx) -> Headers:
    stamp = datetime.fromtimestamp(c.ts, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    headers = {
        "box-signature-primary": _enc(_hmac(secret, body + stamp.encode()), "base64"),
        "box-delivery-timestamp": stamp,
        "box-signature-version": "1",
        "box-signature-algorithm": "HmacSHA256",
        "box-delivery-id": c.delivery,
    }
    if abs(time.time() - c.ts) < 60 and secret.startswith("box"):  # Box's SDK is the oracle
        assert WebhooksManager.validate_message(body.decode(), headers, secret)
    return headers


def webflow(body: bytes, secret: str, c: Ctx) -> Headers:
    ms = str(c.ts * 1000)
    return {
        "x-webflow-signature": _hmac(secret, ms.encode() + b":" + body).hex(),
        "x-webflow-timestamp": ms,
    }


def workos(body: bytes, secret: str, c: Ctx) -> Headers:
    headers = t_v1("WorkOS-Signature", ms=True, space=" ")(body, secret, c)
    if abs(time.time() - c.ts) < 60 and secret.startswith("wos"):  # WorkOS's SDK is the oracle
        workos_verify(event_body=body, event_signature=headers["WorkOS-Signature"], secret=secret)
    return headers


def razorpay_sign(body: bytes, secret: str, c: Ctx) -> Headers:
    headers = body_mac("X-Razorpay-Signature", id_header="X-Razorpay-Event-Id")(body, secret, c)
    if secret.startswith("rzp"):  # Razorpay's SDK is the oracle
        razorpay.Utility().verify_webhook_signature(
            body.decode(), headers["X-Razorpay-Signature"], secret
        )
    return headers


def line(body: bytes, secret: str, c: Ctx) -> Headers:
    headers = body_mac("x-line-signature", encoding="base64")(body, secret, c)
    if secret.startswith("line"):  # LINE's SDK is the oracle
        assert SignatureValidator(secret).validate(body.decode(), headers["x-line-signature"])
    return headers


def customerio(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = _hmac(secret, f"v0:{c.ts}:".encode() + body).hex()
    return {"X-CIO-Signature": sig, "X-CIO-Timestamp": str(c.ts)}


def frameio(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = "v0=" + _hmac(secret, f"v0:{c.ts}:".encode() + body).hex()
    return {"X-Frameio-Signature": sig, "X-Frameio-Request-Timestamp": str(c.ts)}


def close(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = _hmac(bytes.fromhex(secret), str(c.ts).encode() + body).hex()
    return {"close-sig-hash": sig, "close-sig-timestamp": str(c.ts)}


def buildkite(body: bytes, secret: str, c: Ctx) -> Headers:
    sig = _hmac(secret, f"{c.ts}.".encode() + body).hex()
    return {"X-Buildkite-Signature": f"timestamp={c.ts},signature={sig}"}


def sanity(body: bytes, secret: str, c: Ctx) -> Headers:
    ms = c.ts * 1000
    sig = _enc(_hmac(secret, f"{ms}.".encode() + body), "base64url")
    return {"sanity-webhook-signature": f"t={ms},v1={sig}", "idempotency-key": c.delivery}


def trello(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"X-Trello-Webhook": _enc(_hmac(secret, body + c.url.encode(), hashlib.sha1), "base64")}


def circleci(body: bytes, secret: str, c: Ctx) -> Headers:
    other = _hmac("a-previous-signing-secret", body).hex()
    return {"circleci-signature": f"v1={other},v1={_hmac(secret, body).hex()}"}


def no_headers(body: bytes, secret: str, c: Ctx) -> Headers:
    return {}


def form(body: bytes, secret: str, c: Ctx) -> Headers:
    return {"Content-Type": "application/x-www-form-urlencoded"}


def adyen_body(delivery: str, ts: int, key: str) -> bytes:
    item = {
        "amount": {"currency": "EUR", "value": 1130},
        "eventCode": "AUTHORISATION",
        "merchantAccountCode": "TestMerchant",
        "merchantReference": delivery,
        "pspReference": "7914073381342284",
        "success": "true",
    }
    item["additionalData"] = {"hmacSignature": generate_notification_sig(item, key).decode()}
    return json.dumps(
        {"live": "false", "notificationItems": [{"NotificationRequestItem": item}]}
    ).encode()


def braintree_body(delivery: str, ts: int, key: str) -> bytes:
    config = braintree.Configuration(
        braintree.Environment.Sandbox, merchant_id="m", public_key="pub", private_key=key
    )
    gateway = braintree.BraintreeGateway(config)
    kind = braintree.WebhookNotification.Kind.SubscriptionWentPastDue
    sample = gateway.webhook_testing.sample_notification(kind, delivery)
    if key.startswith("braintree"):  # the library's own parser accepts what it made
        gateway.webhook_notification.parse(sample["bt_signature"], sample["bt_payload"])
    return urlencode(sample).encode()


def mandrill_body(delivery: str, ts: int, key: str) -> bytes:
    events = [{"event": "send", "_id": delivery}]
    return urlencode({"mandrill_events": json.dumps(events)}).encode()


def mandrill(body: bytes, secret: str, c: Ctx) -> Headers:
    fields = sorted(parse_qsl(body.decode(), keep_blank_values=True))
    signed = c.url + "".join(k + v for k, v in fields)
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Mandrill-Signature": _enc(_hmac(secret, signed.encode(), hashlib.sha1), "base64"),
    }


B64 = base64.b64encode
HEX_KEY, HEX_OLD = "c0ffee00" * 8, "0badf00d" * 8
AIR_KEY, AIR_OLD = B64(b"airtable-mac-secret").decode(), B64(b"airtable-old-secret").decode()


def P(
    name: str,
    sign: Signer,
    body: Callable[[str, int, Any], bytes],
    doc: str,
    *,
    verify: dict[str, Any] | None = None,
    key: Any = None,
    old: Any = None,
    wrong: Any = "a-wrong-secret-for-this-provider",
    stale: bool = False,
    dedupe: bool = False,
    signs_body: bool = True,
    token: bool = True,
    tamper: Callable[[bytes], bytes] | None = None,
) -> Provider:
    """A row: `doc` is where the provider documents the scheme (or names its library)."""
    p = Provider(
        name,
        {"scheme": name, **(verify or {})},
        sign,
        body,
        key or f"{name}-current-secret",
        old or f"{name}-previous-secret",
        wrong,
        stale,
        "dedupe" if dedupe else "none",
        token=token,
    )
    if tamper is not None:
        p.tamper = tamper
    p.extra["doc"] = doc  # not a mapping key: taken out before the config is written
    p.extra["signs_body"] = signs_body
    return p


PROVIDERS = [
    # -- dev -------------------------------------------------------------------------------------
    P("bitbucket", body_mac("X-Hub-Signature", prefix="sha256=", id_header="X-Request-UUID"), _event(push={}, d=ID), "https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/", dedupe=True),
    P("jira", body_mac("X-Hub-Signature", prefix="sha256=", id_header="X-Atlassian-Webhook-Identifier"), _event(webhookEvent="jira:issue_created", d=ID), "https://developer.atlassian.com/cloud/jira/platform/webhooks/", dedupe=True),
    P("gitea", body_mac("X-Gitea-Signature", id_header="X-Gitea-Delivery"), _event(ref="refs/heads/main", d=ID), "https://docs.gitea.com/usage/webhooks", dedupe=True),
    P("forgejo", body_mac("X-Forgejo-Signature", id_header="X-Forgejo-Delivery"), _event(ref="refs/heads/main", d=ID), "https://forgejo.org/docs/latest/user/webhooks/", dedupe=True),
    P("gogs", body_mac("X-Gogs-Signature", id_header="X-Gogs-Delivery"), _event(ref="refs/heads/main", d=ID), "https://gogs.io/docs/features/webhook", dedupe=True),
    P("circleci", circleci, _event(id=ID, type="workflow-completed"), "https://circleci.com/docs/webhooks/", dedupe=True),
    P("vercel", body_mac("x-vercel-signature", hashlib.sha1), _event(id=ID, type="deployment.created"), "https://vercel.com/docs/webhooks/webhooks-api", dedupe=True),
    P("cloudflare", token("cf-webhook-auth"), _event(text="alert", d=ID), "https://developers.cloudflare.com/notifications/get-started/configure-webhooks/", signs_body=False),
    P("heroku", body_mac("Heroku-Webhook-Hmac-SHA256", encoding="base64", id_header="Heroku-Webhook-Id"), _event(action="update", d=ID), "https://devcenter.heroku.com/articles/app-webhooks", dedupe=True),
    P("launchdarkly", body_mac("X-LD-Signature"), _event(kind="flag", d=ID), "https://docs.launchdarkly.com/home/connecting/webhooks"),
    P("terraform", body_mac("X-TFE-Notification-Signature", hashlib.sha512), _event(run_id=ID), "https://developer.hashicorp.com/terraform/cloud-docs/api-docs/notification-configurations"),
    P("sonarqube", body_mac("X-Sonar-Webhook-HMAC-SHA256"), _event(status="SUCCESS", d=ID), "https://docs.sonarsource.com/sonarqube-server/latest/project-administration/webhooks/"),
    P("buildkite", buildkite, _event(event="build.finished", event_id=ID), "https://buildkite.com/docs/apis/webhooks#webhook-signature", stale=True, dedupe=True),
    P("frameio", frameio, _event(type="asset.created", d=ID), "https://developer.frame.io/docs/automations-webhooks/webhooks-overview", stale=True),
    P("sanity", sanity, _event(_id=ID, _type="post"), "https://www.sanity.io/docs/webhooks (signature as @sanity/webhook makes it)", stale=True, dedupe=True),
    # -- business --------------------------------------------------------------------------------
    P("intercom", body_mac("X-Hub-Signature", hashlib.sha1, prefix="sha1="), _event(type="notification_event", id=ID), "https://developers.intercom.com/docs/references/webhooks/webhook-models", dedupe=True),
    P("hubspot", hubspot, _event(eventId=ID, subscriptionType="contact.creation"), "hubspot-api-client (hubspot.utils.signature.Signature, v3)", stale=True),
    P("zendesk", zendesk, _event(type="zen:event-type:ticket.created", d=ID), "https://developer.zendesk.com/documentation/webhooks/verifying/", verify={"tolerance": "5m"}, stale=True, dedupe=True),
    P("segment", body_mac("X-Signature", hashlib.sha1), _event(type="track", messageId=ID), "https://segment.com/docs/connections/destinations/catalog/webhooks/", dedupe=True),
    P("typeform", body_mac("Typeform-Signature", encoding="base64", prefix="sha256="), _event(event_id=ID, event_type="form_response"), "https://www.typeform.com/developers/webhooks/secure-your-webhooks/", dedupe=True),
    P("calendly", t_v1("Calendly-Webhook-Signature"), _event(event="invitee.created", d=ID), "https://developer.calendly.com/api-docs/overview/webhooks/webhook-signatures", stale=True),
    P("docusign", body_mac("X-DocuSign-Signature-1", encoding="base64"), _event(event="envelope-completed", d=ID), "https://developers.docusign.com/platform/webhooks/connect/validate/"),
    P("box", box, _event(trigger="FILE.UPLOADED", d=ID), "boxsdk (box_sdk_gen WebhooksManager.validate_message)", key="box-primary-key", old="box-secondary-key", stale=True, dedupe=True),
    P("notion", body_mac("X-Notion-Signature", prefix="sha256="), _event(id=ID, type="page.created"), "https://developers.notion.com/reference/webhooks", dedupe=True),
    P("airtable", body_mac("X-Airtable-Content-MAC", prefix="hmac-sha256=", key=base64.b64decode), _event(base={"id": "app1"}, d=ID), "https://airtable.com/developers/web/api/webhooks-overview", key=AIR_KEY, old=AIR_OLD, wrong=B64(b"somebody-elses").decode()),
    P("asana", body_mac("X-Hook-Signature"), _event(events=[], d=ID), "https://developers.asana.com/docs/webhooks-guide"),
    P("clickup", body_mac("X-Signature"), _event(webhook_id="w1", event="taskCreated", d=ID), "https://developer.clickup.com/docs/webhooksignature"),
    P("webflow", webflow, _event(triggerType="form_submission", d=ID), "https://developers.webflow.com/data/v1.0.0/docs/verifying-webhook-signatures", stale=True),
    P("workos", workos, _event(id=ID, event="user.created"), "workos (workos.webhooks verify_header)", key="wos-current-secret", old="wos-previous-secret", stale=True, dedupe=True),
    P("telegram", token("X-Telegram-Bot-Api-Secret-Token"), lambda d, ts, k: _json({"update_id": d, "message": {"text": "hi"}}), "https://core.telegram.org/bots/api#setwebhook", signs_body=False, dedupe=True),
    P("okta", token("Authorization"), _event(eventId=ID, eventType="com.okta.event_hook"), "https://developer.okta.com/docs/concepts/event-hooks/", verify={"auth": "signature"}, signs_body=False, dedupe=True, token=False),
    P("auth0", token("Authorization"), _event(logs=[], d=ID), "https://auth0.com/docs/customize/log-streams/custom-log-streams", verify={"auth": "signature"}, signs_body=False, token=False),
    P("line", line, lambda d, ts, k: _json({"destination": "U1", "events": [{"webhookEventId": d}]}), "line-bot-sdk (linebot.v3.SignatureValidator)", key="line-channel-secret", old="line-old-secret", dedupe=True),
    P("helpscout", body_mac("X-HelpScout-Signature", hashlib.sha1, encoding="base64"), _event(id=1, d=ID), "https://developer.helpscout.com/webhooks/"),
    P("trello", trello, _event(action={"type": "createCard"}, d=ID), "https://developer.atlassian.com/cloud/trello/guides/rest-api/webhooks/#webhook-signatures"),
    P("mailersend", body_mac("Signature"), _event(type="activity.sent", d=ID), "https://developers.mailersend.com/api/v1/webhooks.html#security"),
    P("nylas", body_mac("X-Nylas-Signature"), _event(type="message.created", d=ID), "https://developer.nylas.com/docs/v3/notifications/webhooks/"),
    P("calcom", body_mac("X-Cal-Signature-256"), _event(triggerEvent="BOOKING_CREATED", d=ID), "https://cal.com/docs/developing/guides/automation/webhooks"),
    P("viber", body_mac("X-Viber-Content-Signature"), _event(event="message", d=ID), "https://developers.viber.com/docs/api/rest-bot-api/#callbacks"),
    P("webex", body_mac("X-Spark-Signature", hashlib.sha1), _event(resource="messages", d=ID), "https://developer.webex.com/docs/webhooks"),
    P("customerio", customerio, _event(metric="sent", d=ID), "https://docs.customer.io/journeys/webhooks/#securely-verify-requests", stale=True),
    P("close", close, _event(event={"action": "created"}, d=ID), "https://developer.close.com/topics/webhooks/", key=HEX_KEY, old=HEX_OLD, wrong="ab" * 32, stale=True),
    P("persona", t_v1("Persona-Signature"), _event(data={"type": "event"}, d=ID), "https://docs.withpersona.com/docs/webhooks-best-practices", stale=True),
    P("tally", body_mac("Tally-Signature", encoding="base64"), _event(eventType="FORM_RESPONSE", d=ID), "https://tally.so/help/webhooks"),
    P("shortcut", body_mac("Payload-Signature"), _event(actions=[], d=ID), "https://developer.shortcut.com/api/webhook/v1"),
    P("brevo", bearer, _event(event="delivered", d=ID), "https://developers.brevo.com/docs/username-and-password-authentication (webhook auth type bearer)", verify={"auth": "signature"}, signs_body=False, token=False),
    # -- commerce --------------------------------------------------------------------------------
    P("woocommerce", body_mac("X-WC-Webhook-Signature", encoding="base64", id_header="X-WC-Webhook-Delivery-ID"), _event(id=1, status="processing", d=ID), "https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks", dedupe=True),
    P("razorpay", razorpay_sign, _event(event="payment.captured", d=ID), "razorpay (razorpay.Utility.verify_webhook_signature)", key="rzp-current-secret", old="rzp-previous-secret", dedupe=True),
    P("coinbase", body_mac("X-CC-Webhook-Signature"), _event(id=ID, event={"type": "charge:confirmed"}), "https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security", dedupe=True),
    P("paystack", body_mac("x-paystack-signature", hashlib.sha512), _event(event="charge.success", d=ID), "https://paystack.com/docs/payments/webhooks/#verify-event-origin"),
    P("lemonsqueezy", body_mac("X-Signature"), _event(meta={"event_name": "order_created"}, d=ID), "https://docs.lemonsqueezy.com/help/webhooks/signing-requests"),
    P("flutterwave", token("verif-hash"), _event(event="charge.completed", d=ID), "https://developer.flutterwave.com/docs/webhooks", signs_body=False),
    P("gocardless", body_mac("Webhook-Signature"), _event(events=[], d=ID), "https://developer.gocardless.com/getting-started/staying-up-to-date-with-webhooks"),
    P("mux", t_v1("Mux-Signature"), _event(id=ID, type="video.asset.ready"), "https://docs.mux.com/core/verify-webhook-signatures", stale=True, dedupe=True),
    P("squarespace", body_mac("Squarespace-Signature", key=bytes.fromhex), _event(topic="order.create", d=ID), "https://developers.squarespace.com/commerce-apis/webhook-subscriptions-api", key=HEX_KEY, old=HEX_OLD, wrong="ab" * 32),
    P("xero", body_mac("x-xero-signature", encoding="base64"), _event(events=[], d=ID), "https://developer.xero.com/documentation/guides/webhooks/overview/"),
    P("intuit", body_mac("intuit-signature", encoding="base64"), _event(eventNotifications=[], d=ID), "https://developer.intuit.com/app/developer/qbo/docs/develop/webhooks"),
    P("mollie", body_mac("X-Mollie-Signature", prefix="sha256="), _event(resource="event", id=ID, type="payment-link.paid"), "https://docs.mollie.com/reference/webhooks-best-practices (next-gen webhooks)", dedupe=True),
    # -- proofs in the body's fields or form ------------------------------------------------------
    P("adyen", no_headers, adyen_body, "Adyen (Adyen.util.generate_notification_sig signs each item)", key=HEX_KEY, old=HEX_OLD, wrong="ab" * 32, tamper=lambda b: b.replace(b'"value": 1130', b'"value": 1')),
    P("braintree", form, braintree_body, "braintree (WebhookTesting.sample_notification signs; WebhookNotification.parse accepts)", tamper=lambda b: b.replace(b"bt_payload=", b"bt_payload=AAAA")),
    P("mandrill", mandrill, mandrill_body, "https://mailchimp.com/developer/transactional/guides/track-respond-activity-webhooks/#authenticating-webhook-requests", tamper=lambda b: b.replace(b"send", b"open")),
    P("figma", no_headers, lambda d, ts, key: _json({"event_type": "PING", "passcode": key, "webhook_id": d}), "https://www.figma.com/developers/api#webhooks-v2-security", signs_body=False),
    # -- delivered through Svix: signed by the svix library -------------------------------------
    P("clerk", svix_sign, _event(type="user.created", d=ID), "svix (Clerk delivers through Svix)", key=SW_SECRET, old=SW_OLD, wrong=SW_WRONG, stale=True, dedupe=True),
    P("resend", svix_sign, _event(type="email.sent", d=ID), "svix (Resend delivers through Svix)", key=SW_SECRET, old=SW_OLD, wrong=SW_WRONG, stale=True, dedupe=True),
]  # fmt: skip
BY_NAME = {p.name: p for p in PROVIDERS}


def _block(p: Provider) -> dict[str, Any]:
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
        }
        for p in PROVIDERS
    ]
    return start_module_gateway(base_config(mappings=mappings))


def test_every_provider_row_is_tested_here_or_with_the_first_providers() -> None:
    from hookwise.engine.signatures.providers import MORE

    assert {s.name for s in MORE} | {"clerk", "resend"} == set(BY_NAME)


@pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.name)
def test_a_valid_delivery_is_accepted_and_stored(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    r = deliver(gw, p)
    assert r.status_code == 200, r.text
    assert events_of(gw, p.name) == before + 1


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.extra["signs_body"]], ids=lambda p: p.name)
def test_a_tampered_body_is_401_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    refused(deliver(gw, p, tamper=True), p, "tampered")
    assert events_of(gw, p.name) == before


@pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.name)
def test_a_wrong_secret_is_401_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    before = events_of(gw, p.name)
    refused(deliver(gw, p, key=p.wrong), p, "wrong secret")
    assert events_of(gw, p.name) == before


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.stale], ids=lambda p: p.name)
def test_a_stale_timestamp_is_401(gw: GatewayProcess, p: Provider) -> None:
    r = deliver(gw, p, ts=int(time.time()) - 3600)
    refused(r, p, "stale")
    assert "s old, more than the" in r.json()["error"]


@pytest.mark.parametrize("p", PROVIDERS, ids=lambda p: p.name)
def test_the_previous_secret_of_a_rotation_is_accepted(gw: GatewayProcess, p: Provider) -> None:
    r = deliver(gw, p, key=p.old)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("p", [p for p in PROVIDERS if p.replay == "dedupe"], ids=lambda p: p.name)
def test_a_retried_delivery_is_a_replay_and_stores_nothing(gw: GatewayProcess, p: Provider) -> None:
    delivery = f"retry-{p.name}-{time.time_ns()}"
    first = deliver(gw, p, delivery=delivery, ts=int(time.time()) - 2)
    assert first.status_code == 200, first.text
    count = events_of(gw, p.name)
    again = deliver(gw, p, delivery=delivery)  # re-signed now, as the provider's retry is
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert events_of(gw, p.name) == count


def test_okta_and_auth0_need_auth_signature() -> None:
    from hookwise.engine.config.convert import structure
    from hookwise.engine.config.mapping import VerifyConfig
    from hookwise.engine.errors import ConfigError
    from hookwise.engine.signatures import compile_verifier
    from tests.support.gateway import REPO

    with pytest.raises(ConfigError, match="auth: signature"):
        compile_verifier(structure({"scheme": "okta", "secret": "x"}, VerifyConfig), REPO, "v")


def test_encoded_secrets_that_do_not_decode_fail_at_load() -> None:
    from hookwise.engine.config.convert import structure
    from hookwise.engine.config.mapping import VerifyConfig
    from hookwise.engine.errors import ConfigError
    from hookwise.engine.signatures import compile_verifier
    from tests.support.gateway import REPO

    for scheme, bad in (("airtable", "not base64!"), ("close", "not-hex")):
        with pytest.raises(ConfigError, match=f"the {scheme} secret is"):
            compile_verifier(structure({"scheme": scheme, "secret": bad}, VerifyConfig), REPO, "v")


def test_okta_one_time_verification_is_answered_with_its_challenge(gw: GatewayProcess) -> None:
    # https://developer.okta.com/docs/concepts/event-hooks/#one-time-verification-request
    p = BY_NAME["okta"]
    assert gw.client is not None
    headers = {"x-okta-verification-challenge": "chal-123", "Authorization": p.key}
    r = gw.client.get("/hooks/okta", headers=headers)
    assert (r.status_code, r.json()) == (200, {"verification": "chal-123"})
    r = gw.client.get("/hooks/okta", headers={**headers, "Authorization": p.wrong})
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"
    assert gw.client.get("/hooks/okta", headers={"Authorization": p.key}).status_code == 405


def test_mollie_during_a_rotation_and_without_the_prefix(gw: GatewayProcess) -> None:
    # Mollie sends one X-Mollie-Signature per secret for 24 h after a rotation (a repeated header
    # arrives joined by commas); its own example compares the bare hex
    # (https://docs.mollie.com/reference/webhooks-best-practices)
    p = BY_NAME["mollie"]
    assert gw.client is not None
    for form in ("sha256={other}, sha256={sig}", "{sig}"):
        body = p.body(f"event_{time.time_ns()}", 0, p.key)
        value = form.format(
            other=_hmac("a-secret-not-configured", body).hex(), sig=_hmac(p.key, body).hex()
        )
        headers = {"X-Mollie-Signature": value, "Authorization": f"Bearer {HOOK_TOKEN}"}
        r = gw.client.post("/hooks/mollie", content=body, headers=headers)
        assert r.status_code == 200, r.text
