"""The providers' signature schemes, as data, registered by name (`SCHEMES`, `ALIASES`).

Each entry follows the provider's documentation: headers, signed string, encoding, timestamp
and its default tolerance, the delivery id that stays the same across retries, and the
handshake the provider performs (`hookwise.engine.signatures.handshakes`). The generic `hmac`
scheme is built from a verify block's own keys (`generic_hmac`). Three providers need a few
lines of code (`parts`): Twilio (the URL and sorted form parameters, or `bodySHA256`), Mailgun
(the signature is inside the body) and Microsoft Graph (a `clientState` per notification).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ..request import InboundRequest
from .apps import APP_SCHEMES
from .core import (
    DEFAULT_TOLERANCE,
    Options,
    Parts,
    Scheme,
    SignatureFormat,
    header,
    json_body,
    malformed,
    request_url,
)
from .jwts import JWT_SCHEMES
from .paypal import PAYPAL
from .plaid import PLAID
from .providers import MORE
from .sns import SNS

_FORM = "application/x-www-form-urlencoded"


def _is_form(request: InboundRequest) -> bool:
    ctype = request.headers.get("content-type", "")
    return ctype.split(";", 1)[0].strip().lower() == _FORM


def _form(request: InboundRequest) -> list[tuple[str, str]]:
    return parse_qsl(request.raw_body.decode("utf-8", "replace"), keep_blank_values=True)


def _port_variants(url: str) -> tuple[str, ...]:
    # Twilio signs the URL with or without the default port; its own validator tries both.
    parts = urlsplit(url)
    default = {"https": 443, "http": 80}.get(parts.scheme)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if default is None:
        return (url,)
    if parts.port is None:
        other = urlunsplit(parts._replace(netloc=f"{host}:{default}"))
    elif parts.port == default:
        other = urlunsplit(parts._replace(netloc=host))
    else:
        return (url,)
    return (url, other)


TWILIO_SETTINGS = "X-Twilio-Webhooks-Signature-Settings"
_TWILIO_DIGESTS: dict[str, Literal["sha1", "sha256"]] = {
    "HMAC_SHA1": "sha1",
    "HMAC_SHA256": "sha256",
}


def twilio_digest(settings: str | None) -> Literal["sha1", "sha256"] | None:
    """The HMAC's digest `X-Twilio-Webhooks-Signature-Settings` names (`key=...,algorithm=
    HMAC_SHA256`, when a Webhooks Rule signs with its SharedKey); SHA-1 without the header;
    None when it names another."""
    for part in (settings or "").split(","):
        name, sep, value = part.partition("=")
        if sep and name.strip() == "algorithm" and value.strip():
            return _TWILIO_DIGESTS.get(value.strip().upper())
    return "sha1"


def _twilio_parts(scheme: Scheme, request: InboundRequest, options: Options) -> Parts:
    """The full URL, then each form parameter's name and value sorted (form bodies); for JSON
    bodies the URL carries `bodySHA256`, the hex SHA-256 of the body, and only the URL is signed.
    HMAC-SHA1 with the Auth Token, or the digest the signature settings header names (the
    Webhooks Rule's SharedKey secret is then one of the block's `secrets`)."""
    signature = header(request, scheme.signature.header, scheme)
    digest = twilio_digest(request.headers.get(TWILIO_SETTINGS.lower()))
    if digest is None:
        raise malformed(scheme, f"the {TWILIO_SETTINGS} header names an unknown algorithm")
    url = request_url(request, options)
    if _is_form(request):
        grouped: dict[str, set[str]] = {}
        for key, value in _form(request):
            grouped.setdefault(key, set()).add(value)
        tail = "".join(k + v for k in sorted(grouped) for v in sorted(grouped[k]))
    else:
        query = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
        presented = query.get("bodySHA256")
        if presented is None:
            raise malformed(scheme, "a non-form body needs the bodySHA256 query parameter")
        actual = hashlib.sha256(request.raw_body).hexdigest()
        if not hmac.compare_digest(actual.encode(), presented.strip().lower().encode()):
            raise malformed(scheme, "the bodySHA256 query parameter does not match the body")
        tail = ""
    messages = tuple((u + tail).encode("utf-8") for u in _port_variants(url))
    return Parts(messages, (signature,), algorithm=digest)


def _mailgun_parts(scheme: Scheme, request: InboundRequest, _: Options) -> Parts:
    """`signature: {timestamp, token, signature}` in a JSON body, or the three form fields;
    the hex HMAC-SHA256 is over timestamp + token."""
    data = json_body(request) if not _is_form(request) else None
    fields = data.get("signature") if isinstance(data, dict) else None
    if not isinstance(fields, dict):
        fields = dict(_form(request)) if _is_form(request) else {}
    stamp, token, signature = (fields.get(k) for k in ("timestamp", "token", "signature"))
    if not all(isinstance(v, str) and v for v in (stamp, token, signature)):
        raise malformed(scheme, "the body has no signature with timestamp, token and signature")
    assert isinstance(stamp, str) and isinstance(token, str) and isinstance(signature, str)
    return Parts(((stamp + token).encode("utf-8"),), (signature,), stamp)


def _graph_parts(scheme: Scheme, request: InboundRequest, _: Options) -> Parts:
    """Every notification in `value` carries the subscription's `clientState`."""
    data = json_body(request)
    items = data.get("value") if isinstance(data, dict) else None
    items = items if isinstance(items, list) else []
    states = [i.get("clientState") for i in items if isinstance(i, dict)]
    if not items or not all(isinstance(s, str) and s for s in states):
        raise malformed(scheme, "every notification in value must carry a clientState")
    return Parts((b"",), tuple(s for s in states if isinstance(s, str)))


_HUB = SignatureFormat("X-Hub-Signature-256", prefix="sha256=")
_SW_HEADERS = {
    "webhook-id": "svix-id",
    "webhook-timestamp": "svix-timestamp",
    "webhook-signature": "svix-signature",
}

_ALL = [
    Scheme(
        "github",
        _HUB,
        delivery_id="X-GitHub-Delivery",
        handshake="github",
        event_type="X-GitHub-Event",
        doc="X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "stripe",
        SignatureFormat("Stripe-Signature", separator=",", timestamp_label="t"),
        signed="{timestamp}.{body}",
        timestamp="label",
        tolerance=DEFAULT_TOLERANCE,
        delivery_id="$.id",
        event_type="$.type",
        doc="Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t.body)>[,v1=...]",
    ),
    Scheme(
        "standard-webhooks",
        SignatureFormat("webhook-signature", separator=" ", assign=","),
        signed="{header:webhook-id}.{timestamp}.{body}",
        encoding="base64",
        timestamp="header:webhook-timestamp",
        tolerance=DEFAULT_TOLERANCE,
        key="whsec",
        delivery_id="webhook-id",
        header_aliases=_SW_HEADERS,
        asymmetric="standard-webhooks-v1a",
        doc="webhook-signature: v1,<base64 HMAC-SHA256(key, id.timestamp.body)> (or svix-*)",
    ),
    Scheme(
        "standard-webhooks-v1a",
        SignatureFormat("webhook-signature", separator=" ", assign=",", label="v1a"),
        signed="{header:webhook-id}.{timestamp}.{body}",
        algorithm="ed25519",
        encoding="base64",
        timestamp="header:webhook-timestamp",
        tolerance=DEFAULT_TOLERANCE,
        key="whpk",
        delivery_id="webhook-id",
        header_aliases=_SW_HEADERS,
        doc="webhook-signature: v1a,<base64 Ed25519(id.timestamp.body)> (publicKey whpk_...)",
    ),
    Scheme(
        "slack",
        SignatureFormat("X-Slack-Signature", prefix="v0="),
        signed="v0:{timestamp}:{body}",
        timestamp="header:X-Slack-Request-Timestamp",
        tolerance=DEFAULT_TOLERANCE,
        delivery_id="$.event_id",
        event_type="$.event.type",
        handshake="slack",
        doc="X-Slack-Signature: v0=<hex HMAC-SHA256(secret, v0:timestamp:body)>",
    ),
    Scheme(
        "shopify",
        SignatureFormat("X-Shopify-Hmac-Sha256"),
        encoding="base64",
        delivery_id="X-Shopify-Webhook-Id",
        event_type="X-Shopify-Topic",
        doc="X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "twilio",
        SignatureFormat("X-Twilio-Signature"),
        algorithm="sha1",
        encoding="base64",
        delivery_id="I-Twilio-Idempotency-Token",
        needs_url=True,
        parts=_twilio_parts,
        doc="X-Twilio-Signature: <base64 HMAC-SHA1(auth token, URL + sorted form params)>"
        " (HMAC-SHA256 with a SharedKey when X-Twilio-Webhooks-Signature-Settings says so)",
    ),
    Scheme(
        "gitlab",
        SignatureFormat("X-Gitlab-Token"),
        algorithm="token",
        encoding="raw",
        delivery_id="X-Gitlab-Event-UUID",
        event_type="X-Gitlab-Event",
        doc="X-Gitlab-Token: <the secret token>",
    ),
    Scheme(
        "linear",
        SignatureFormat("Linear-Signature"),
        timestamp="$.webhookTimestamp",
        timestamp_unit="ms",
        tolerance=60.0,
        delivery_id="Linear-Delivery",
        doc="Linear-Signature: <hex HMAC-SHA256(secret, body)>, webhookTimestamp within 60 s",
    ),
    Scheme(
        "zoom",
        SignatureFormat("x-zm-signature", prefix="v0="),
        signed="v0:{timestamp}:{body}",
        timestamp="header:x-zm-request-timestamp",
        tolerance=DEFAULT_TOLERANCE,
        handshake="zoom",
        doc="x-zm-signature: v0=<hex HMAC-SHA256(secret token, v0:timestamp:body)>",
    ),
    Scheme(
        "twitch",
        SignatureFormat("Twitch-Eventsub-Message-Signature", prefix="sha256="),
        signed="{header:Twitch-Eventsub-Message-Id}{timestamp}{body}",
        timestamp="header:Twitch-Eventsub-Message-Timestamp",
        timestamp_unit="rfc3339",
        tolerance=600.0,
        delivery_id="Twitch-Eventsub-Message-Id",
        handshake="twitch",
        doc="Twitch-Eventsub-Message-Signature: sha256=<hex HMAC-SHA256(secret, id+timestamp+body)>",
    ),
    Scheme(
        "paddle",
        SignatureFormat("Paddle-Signature", separator=";", label="h1", timestamp_label="ts"),
        signed="{timestamp}:{body}",
        timestamp="label",
        tolerance=5.0,
        delivery_id="$.event_id",
        doc="Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256(secret, ts:body)>",
    ),
    Scheme(
        "square",
        SignatureFormat("x-square-hmacsha256-signature"),
        signed="{url}{body}",
        encoding="base64",
        delivery_id="$.event_id",
        needs_url=True,
        doc="x-square-hmacsha256-signature: <base64 HMAC-SHA256(key, notification URL + body)>",
    ),
    Scheme(
        "mailgun",
        SignatureFormat("signature"),
        timestamp="body",
        delivery_id="$['event-data'].id",
        parts=_mailgun_parts,
        doc="body signature: {timestamp, token, signature: hex HMAC-SHA256(key, timestamp+token)}",
    ),
    Scheme(
        "sendgrid",
        SignatureFormat("X-Twilio-Email-Event-Webhook-Signature"),
        signed="{timestamp}{body}",
        algorithm="ecdsa-p256",
        encoding="base64",
        timestamp="header:X-Twilio-Email-Event-Webhook-Timestamp",
        key="ecdsa-spki",
        doc="X-Twilio-Email-Event-Webhook-Signature: <base64 ECDSA P-256(timestamp + body)>",
    ),
    Scheme(
        "discord",
        SignatureFormat("X-Signature-Ed25519"),
        signed="{timestamp}{body}",
        algorithm="ed25519",
        timestamp="header:X-Signature-Timestamp",
        key="ed25519-hex",
        delivery_id="$.id",
        handshake="discord",
        doc="X-Signature-Ed25519: <hex Ed25519(timestamp + body)>, publicKey in hex",
    ),
    Scheme(
        "meta",
        _HUB,
        handshake="meta",
        doc="X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, body)>; GET hub.challenge",
    ),
    Scheme(
        "pagerduty",
        SignatureFormat("X-PagerDuty-Signature", separator=","),
        delivery_id="$.event.id",
        doc="X-PagerDuty-Signature: v1=<hex HMAC-SHA256(secret, body)>[,v1=...]",
    ),
    Scheme(
        "sentry",
        SignatureFormat("Sentry-Hook-Signature"),
        doc="Sentry-Hook-Signature: <hex HMAC-SHA256(client secret, body)>",
    ),
    Scheme(
        "dropbox",
        SignatureFormat("X-Dropbox-Signature"),
        handshake="dropbox",
        doc="X-Dropbox-Signature: <hex HMAC-SHA256(app secret, body)>; GET ?challenge=",
    ),
    Scheme(
        "msgraph",
        SignatureFormat("clientState"),
        algorithm="token",
        encoding="raw",
        parts=_graph_parts,
        handshake="msgraph",
        doc="every value[].clientState equals the secret; POST ?validationToken=",
    ),
]

SCHEMES: dict[str, Scheme] = {
    s.name: s for s in (*_ALL, *MORE, *JWT_SCHEMES, *APP_SCHEMES, SNS, PAYPAL, PLAID)
}
ALIASES = {
    "whatsapp": "meta",
    "instagram": "meta",
    "messenger": "meta",
    "svix": "standard-webhooks",
    # providers that deliver through Svix (Standard Webhooks' headers, svix-* or webhook-*)
    "clerk": "standard-webhooks",
    "resend": "standard-webhooks",
}
GENERIC = ("hmac", "hmac-sha256")
# Names a verify block may give (the v1a variant is chosen by giving a publicKey).
NAMES = tuple(sorted([*(n for n in SCHEMES if n != "standard-webhooks-v1a"), *ALIASES, *GENERIC]))


def generic_hmac(
    name: str,
    *,
    header_name: str,
    algorithm: str,
    encoding: str,
    prefix: str,
    signed: str,
    timestamp_header: str | None,
) -> Scheme:
    """The scheme a generic `hmac` (or `hmac-sha256`) block describes."""
    return Scheme(
        name,
        SignatureFormat(header_name, prefix=prefix),
        signed=signed,
        algorithm=algorithm,  # type: ignore[arg-type]
        encoding=encoding,  # type: ignore[arg-type]
        timestamp=f"header:{timestamp_header}" if timestamp_header else None,
        tolerance=DEFAULT_TOLERANCE if timestamp_header else None,
    )
