"""Amazon SNS: a message signed with the private key of a certificate that SNS publishes, and
the subscription handshake (`hookwise.engine.signatures.handshakes`: the gateway confirms a
`SubscriptionConfirmation` by visiting its `SubscribeURL`, once its signature and topic check).

The signed string is the message's fields, each name and value on its own line, in the order
SNS documents for its type; `SignatureVersion` 1 is RSA with SHA-1, 2 with SHA-256. The
certificate is fetched by the server from `SigningCertURL`, which must be an Amazon SNS host
(`https://sns.<region>.amazonaws.com/...pem`, `.amazonaws.com.cn` in China, never an S3 bucket
host), or lie under the block's `keysUrl` (a mirror, a test's server), compared part by part. Anyone with an AWS account can make SNS sign a message, so the block names the
topics it accepts (`topics`), and a message from any other topic is refused.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..request import InboundRequest
from . import urls
from .core import (
    Scheme,
    SignatureError,
    SignatureFormat,
    Verifier,
    check_age,
    json_body,
    malformed,
    parse_time,
)

_CONFIRMATION = ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type")
FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": _CONFIRMATION,
    "UnsubscribeConfirmation": _CONFIRMATION,
}


def allowed(v: Verifier, url: object, *, pem: bool = True) -> bool:
    """Whether SNS (or the block's `keysUrl`) may be asked for `url`: Amazon's host rule, or
    under `keysUrl` part by part (`hookwise.engine.signatures.urls`); a `SigningCertURL` (`pem`)
    names a `.pem` file with no query."""
    if not isinstance(url, str):
        return False
    if v.options.keys_url is not None:
        return urls.under(url, v.options.keys_url)
    return urls.sns_url(url, pem=pem)


def _message(v: Verifier, request: InboundRequest) -> dict[str, Any]:
    data = json_body(request)
    if not isinstance(data, dict) or data.get("Type") not in FIELDS:
        raise malformed(v.scheme, "the body is not an SNS message")
    return data


def certificate(v: Verifier, request: InboundRequest) -> tuple[str, ...]:
    """The certificate a message's check needs: its `SigningCertURL`, when SNS's."""
    url = _message(v, request).get("SigningCertURL")
    if not allowed(v, url):
        raise malformed(v.scheme, "the SigningCertURL is not an Amazon SNS certificate URL")
    assert isinstance(url, str)
    return (url,)


def string_to_sign(data: dict[str, Any]) -> bytes:
    """The fields SNS signs for the message's type, `name\\nvalue\\n` each."""
    out = []
    for name in FIELDS[data["Type"]]:
        value = data.get(name)
        if name == "Subject" and value is None:
            continue
        if not isinstance(value, str):
            raise SignatureError(f"sns signature check failed: the message has no {name}")
        out.append(f"{name}\n{value}\n")
    return "".join(out).encode("utf-8")


def _check(v: Verifier, request: InboundRequest) -> None:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    scheme = v.scheme
    data = _message(v, request)
    digest = {"1": hashes.SHA1(), "2": hashes.SHA256()}.get(str(data.get("SignatureVersion")))
    if digest is None:
        raise malformed(scheme, "the SignatureVersion is neither 1 nor 2")
    try:
        signature = base64.b64decode(str(data.get("Signature", "")), validate=True)
    except (binascii.Error, ValueError):
        signature = b""
    if not signature:
        raise malformed(scheme, "the Signature is not base64")
    url = certificate(v, request)[0]
    document = request.fetched.get(url)
    if document is None:
        raise SignatureError("sns signature check failed: the certificate was not fetched")
    try:
        cert = x509.load_pem_x509_certificate(document)
    except ValueError:
        raise SignatureError("sns signature check failed: unreadable certificate") from None
    key = cert.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        raise SignatureError("sns signature check failed: the certificate's key is not RSA")
    if request.now is not None and not (
        cert.not_valid_before_utc <= request.now <= cert.not_valid_after_utc
    ):
        raise malformed(scheme, "the signing certificate is not valid now")
    try:
        key.verify(signature, string_to_sign(data), padding.PKCS1v15(), digest)
    except InvalidSignature:
        raise malformed(scheme, "the Signature does not match the message") from None
    if data.get("TopicArn") not in v.options.topics:
        raise malformed(scheme, "the message is from a topic this block does not accept")
    tolerance = v.tolerance
    if tolerance is not None:
        stamp = parse_time(str(data.get("Timestamp", "")), "rfc3339")
        if stamp is None:
            raise malformed(scheme, "the Timestamp is not a valid time")
        check_age(scheme.name, stamp, request.now, tolerance)


SNS = Scheme(
    "sns",
    SignatureFormat("x-amz-sns-message-type"),
    algorithm="rsa-sha256",
    encoding="base64",
    timestamp="$.Timestamp",
    timestamp_unit="rfc3339",
    key="fetched",
    delivery_id="x-amz-sns-message-id",
    handshake="sns",
    check=_check,
    fetch=certificate,
    doc="body Signature: <base64 RSA-SHA1/SHA256 of the type's fields> (SigningCertURL: SNS)",
)
