"""Providers whose proof sits in the body's fields or form rather than in one header: Adyen
(an HMAC per notification item over its fields), Braintree (a form of `bt_signature` and
`bt_payload`), Mandrill (the URL and the sorted form fields, as Twilio) and Figma (a passcode in
the body). A few lines of code each (`parts`, or a whole `check` for Adyen)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from urllib.parse import parse_qsl

from ...request import InboundRequest
from ..core import (
    Options,
    Parts,
    Scheme,
    SignatureError,
    SignatureFormat,
    Verifier,
    header,
    json_body,
    malformed,
    request_url,
)

_ADYEN_FIELDS = (
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "value",
    "currency",
    "eventCode",
    "success",
)


def _form(request: InboundRequest) -> list[tuple[str, str]]:
    return parse_qsl(request.raw_body.decode("utf-8", "replace"), keep_blank_values=True)


def adyen_signed(item: dict[str, object]) -> bytes:
    """What Adyen signs for one NotificationRequestItem: its fields joined by `:`."""
    amount = item.get("amount")
    amount = amount if isinstance(amount, dict) else {}
    fields = {**item, "value": amount.get("value", ""), "currency": amount.get("currency", "")}
    return ":".join(str(fields.get(name, "")) for name in _ADYEN_FIELDS).encode("utf-8")


def _adyen(v: Verifier, request: InboundRequest) -> None:
    scheme = v.scheme
    data = json_body(request)
    items = data.get("notificationItems") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise malformed(scheme, "the body has no notificationItems")
    for entry in items[:100]:
        item = entry.get("NotificationRequestItem") if isinstance(entry, dict) else None
        extra = item.get("additionalData") if isinstance(item, dict) else None
        presented = extra.get("hmacSignature") if isinstance(extra, dict) else None
        if not isinstance(item, dict) or not isinstance(presented, str):
            raise malformed(scheme, "a notification item has no additionalData.hmacSignature")
        try:
            signature = base64.b64decode(presented, validate=True)
        except (binascii.Error, ValueError):
            raise malformed(scheme, "an hmacSignature is not base64") from None
        message = adyen_signed(item)
        ok = False
        for key in v.keys.secrets:  # no early exit
            ok |= hmac.compare_digest(hmac.new(key, message, hashlib.sha256).digest(), signature)
        if not ok:
            raise SignatureError(
                "adyen signature check failed: an item's hmacSignature does not match its"
                " fields and the configured HMAC key"
            )
    if len(items) > 100:
        raise malformed(scheme, "more than 100 notification items")


def _braintree_parts(scheme: Scheme, request: InboundRequest, _: Options) -> Parts:
    """`bt_signature` is `public_key|hex` pairs joined by `&`; `bt_payload` (base64 XML, with
    or without its final newline) is signed with HMAC-SHA1 under SHA-1(private key)."""
    form = dict(_form(request))
    signature, payload = form.get("bt_signature"), form.get("bt_payload")
    if not signature or not payload:
        raise malformed(scheme, "the form has no bt_signature and bt_payload")
    pairs = [p.split("|", 1)[1] for p in signature.split("&") if "|" in p]
    raw = payload.encode("utf-8")
    return Parts((raw, raw + b"\n"), tuple(pairs))


def _mandrill_parts(scheme: Scheme, request: InboundRequest, options: Options) -> Parts:
    """The URL, then each form field's name and value, sorted by name."""
    signature = header(request, scheme.signature.header, scheme)
    tail = "".join(k + v for k, v in sorted(_form(request), key=lambda kv: kv[0]))
    return Parts(((request_url(request, options) + tail).encode("utf-8"),), (signature,))


def _figma_parts(scheme: Scheme, request: InboundRequest, _: Options) -> Parts:
    data = json_body(request)
    passcode = data.get("passcode") if isinstance(data, dict) else None
    if not isinstance(passcode, str) or not passcode:
        raise malformed(scheme, "the body has no passcode")
    return Parts((b"",), (passcode,))


FIELDS = [
    Scheme(
        "adyen",
        SignatureFormat("hmacSignature"),
        encoding="base64",
        key="hex-secret",
        check=_adyen,
        doc="each item's additionalData.hmacSignature: <base64 HMAC-SHA256(hex key, its fields)>",
    ),
    Scheme(
        "braintree",
        SignatureFormat("bt_signature"),
        algorithm="sha1",
        key="sha1-secret",
        parts=_braintree_parts,
        doc="form bt_signature=<public key>|<hex HMAC-SHA1(SHA-1(private key), bt_payload)>",
    ),
    Scheme(
        "mandrill",
        SignatureFormat("X-Mandrill-Signature"),
        algorithm="sha1",
        encoding="base64",
        needs_url=True,
        parts=_mandrill_parts,
        doc="X-Mandrill-Signature: <base64 HMAC-SHA1(key, URL + sorted form names and values)>",
    ),
    Scheme(
        "figma",
        SignatureFormat("passcode"),
        algorithm="token",
        encoding="raw",
        parts=_figma_parts,
        doc="body passcode: <the webhook's passcode>",
    ),
]
