"""PayPal: a delivery signed with the private key of a certificate PayPal publishes. The signed
string is `transmission id|transmission time|webhook id|CRC32 of the body` (the webhook id is
the one PayPal gave the subscription: the block's `webhookId`); the signature (base64, RSA
with SHA-256) is in `PAYPAL-TRANSMISSION-SIG` and the certificate's URL in `PAYPAL-CERT-URL`,
which must be PayPal's (`https://api.paypal.com/`, `api-m.`, `api.sandbox.`, `api-m.sandbox.`)
or lie under the block's `keysUrl` (compared part by part). The certificate is fetched by the server."""

from __future__ import annotations

import base64
import binascii
import re
import zlib

from ..request import InboundRequest
from . import urls
from .core import Scheme, SignatureError, SignatureFormat, Verifier, header, malformed

PAYPAL_CERT = re.compile(r"https://api(-m)?(\.sandbox)?\.paypal\.com/[^?#]*")
_SIG = "PAYPAL-TRANSMISSION-SIG"


def certificate(v: Verifier, request: InboundRequest) -> tuple[str, ...]:
    """The certificate the delivery names, when PayPal's (or under `keysUrl`)."""
    url = header(request, "PAYPAL-CERT-URL", v.scheme)
    base = v.options.keys_url
    if not (urls.under(url, base) if base is not None else _paypal(url)):
        raise malformed(v.scheme, "the PAYPAL-CERT-URL is not a PayPal certificate URL")
    return (url,)


def _paypal(url: str) -> bool:
    return urls.plain(url) and PAYPAL_CERT.fullmatch(url) is not None


def signed_string(transmission_id: str, time: str, webhook_id: str, body: bytes) -> bytes:
    """What PayPal signs for a delivery."""
    return f"{transmission_id}|{time}|{webhook_id}|{zlib.crc32(body)}".encode()


def _check(v: Verifier, request: InboundRequest) -> None:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    scheme = v.scheme
    algo = request.headers.get("paypal-auth-algo", "SHA256withRSA").strip()
    if algo != "SHA256withRSA":
        raise malformed(scheme, "the PAYPAL-AUTH-ALGO is not SHA256withRSA")
    try:
        signature = base64.b64decode(header(request, _SIG, scheme), validate=True)
    except (binascii.Error, ValueError):
        raise malformed(scheme, f"the {_SIG} header is not base64") from None
    document = request.fetched.get(certificate(v, request)[0])
    if document is None:
        raise SignatureError("paypal signature check failed: the certificate was not fetched")
    try:
        key = x509.load_pem_x509_certificate(document).public_key()
    except ValueError:
        raise SignatureError("paypal signature check failed: unreadable certificate") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise SignatureError("paypal signature check failed: the certificate's key is not RSA")
    message = signed_string(
        header(request, "PAYPAL-TRANSMISSION-ID", scheme),
        header(request, "PAYPAL-TRANSMISSION-TIME", scheme),
        v.options.webhook_id or "",
        request.raw_body,
    )
    try:
        key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        raise malformed(scheme, f"the {_SIG} does not match the body and webhookId") from None


PAYPAL = Scheme(
    "paypal",
    SignatureFormat(_SIG),
    algorithm="rsa-sha256",
    encoding="base64",
    key="fetched",
    delivery_id="$.id",
    check=_check,
    fetch=certificate,
    doc="PAYPAL-TRANSMISSION-SIG: <base64 RSA-SHA256(id|time|webhookId|crc32(body))>",
)
