"""Payments and shops."""

from __future__ import annotations

from ...request import InboundRequest
from ..core import (
    DEFAULT_TOLERANCE,
    MAX_SIGNATURES,
    Options,
    Parts,
    Scheme,
    SignatureFormat,
    header,
)


def _mollie_parts(scheme: Scheme, request: InboundRequest, _: Options) -> Parts:
    """`sha256=<hex>`, one per signing secret while one is rotated (a repeated header arrives
    joined by commas); Mollie's own example compares the bare hex, so the prefix is optional."""
    value = header(request, scheme.signature.header, scheme)
    items = value.split(",")[:MAX_SIGNATURES]
    return Parts((request.raw_body,), tuple(i.strip().removeprefix("sha256=") for i in items))


COMMERCE = [
    Scheme(
        "woocommerce",
        SignatureFormat("X-WC-Webhook-Signature"),
        encoding="base64",
        delivery_id="X-WC-Webhook-Delivery-ID",
        doc="X-WC-Webhook-Signature: <base64 HMAC-SHA256(secret, body)>",
    ),
    Scheme(
        "razorpay",
        SignatureFormat("X-Razorpay-Signature"),
        delivery_id="X-Razorpay-Event-Id",
        doc="X-Razorpay-Signature: <hex HMAC-SHA256(webhook secret, body)>",
    ),
    Scheme(
        "coinbase",
        SignatureFormat("X-CC-Webhook-Signature"),
        delivery_id="$.id",
        doc="X-CC-Webhook-Signature: <hex HMAC-SHA256(shared secret, body)> (Coinbase Commerce)",
    ),
    Scheme(
        "paystack",
        SignatureFormat("x-paystack-signature"),
        algorithm="sha512",
        doc="x-paystack-signature: <hex HMAC-SHA512(secret key, body)>",
    ),
    Scheme(
        "lemonsqueezy",
        SignatureFormat("X-Signature"),
        doc="X-Signature: <hex HMAC-SHA256(signing secret, body)>",
    ),
    Scheme(
        "flutterwave",
        SignatureFormat("verif-hash"),
        algorithm="token",
        encoding="raw",
        doc="verif-hash: <the secret hash>",
    ),
    Scheme(
        "gocardless",
        SignatureFormat("Webhook-Signature"),
        doc="Webhook-Signature: <hex HMAC-SHA256(endpoint secret, body)>",
    ),
    Scheme(
        "mux",
        SignatureFormat("Mux-Signature", separator=",", timestamp_label="t"),
        signed="{timestamp}.{body}",
        timestamp="label",
        tolerance=DEFAULT_TOLERANCE,
        delivery_id="$.id",
        doc="Mux-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, t.body)>",
    ),
    Scheme(
        "squarespace",
        SignatureFormat("Squarespace-Signature"),
        key="hex-secret",
        doc="Squarespace-Signature: <hex HMAC-SHA256(hex-decoded secret, body)>",
    ),
    Scheme(
        "xero",
        SignatureFormat("x-xero-signature"),
        encoding="base64",
        doc="x-xero-signature: <base64 HMAC-SHA256(webhook key, body)>",
    ),
    Scheme(
        "intuit",
        SignatureFormat("intuit-signature"),
        encoding="base64",
        doc="intuit-signature: <base64 HMAC-SHA256(verifier token, body)> (QuickBooks)",
    ),
    Scheme(
        "mollie",
        SignatureFormat("X-Mollie-Signature", prefix="sha256="),
        delivery_id="$.id",
        parts=_mollie_parts,
        doc="X-Mollie-Signature: sha256=<hex HMAC-SHA256(webhook secret, body)> (next-gen webhooks)",
    ),
]
