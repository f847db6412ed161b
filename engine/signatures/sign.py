"""What a provider would send: the headers of a signed delivery, from a scheme's description.

`sign(verifier, body, now=..., delivery_id=..., url=...)` builds the signature header (plain, or
the labelled list of Stripe, Paddle, PagerDuty and Standard Webhooks), the timestamp header, the
delivery id header and the headers the signed template names, signing with the block's first
(current) secret. It is the inverse of `Verifier.verify` for every shared-secret scheme; Twilio
adds `bodySHA256` to the URL of a JSON body (`Signed.url`). Schemes that sign with a private key
(Discord, SendGrid, Standard Webhooks v1a) are signed with one given (a pair made for a test);
the JWT schemes (Netlify, monday.com, Atlassian Connect) get a token valid for 3 minutes;
those that sign inside the body (Mailgun, Microsoft Graph) cannot be signed here (`SignError`).
Pure: the time, the delivery id and the key are arguments.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import attrs

from ..request import InboundRequest
from .apps import query_string_hash
from .core import DIGESTS, Verifier, render, request_url

_UNSIGNABLE = {
    "mailgun": "signs inside the body (its signature object)",
    "msgraph": "carries its clientState inside the body",
    "adyen": "signs inside the body (each item's hmacSignature)",
    "braintree": "signs inside its form (bt_signature)",
    "figma": "carries its passcode inside the body",
}


_ASYMMETRIC = ("ed25519", "ecdsa-p256")


class SignError(Exception):
    """The scheme cannot be signed by hookwise (a private key, or a signature in the body)."""


@attrs.frozen
class Signed:
    """The headers to send, and the URL when signing changed it (Twilio's bodySHA256)."""

    headers: dict[str, str]
    url: str | None = None


def _stamp(unit: str, now: datetime) -> str:
    if unit == "rfc3339":
        return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return str(int(now.timestamp() * (1000 if unit == "ms" else 1)))


def _encode(digest: bytes, encoding: str) -> str:
    if encoding == "base64url":
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
    return digest.hex() if encoding == "hex" else base64.b64encode(digest).decode()


def _twilio(v: Verifier, body: bytes, url: str, form: bool) -> Signed:
    if not url and v.options.public_url is None:
        raise SignError("the twilio scheme signs the URL: give the URL the provider calls")
    url = request_url(InboundRequest(path="", payload={}, url=url), v.options)
    tail = ""
    if form:
        grouped: dict[str, set[str]] = {}
        for key, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
            grouped.setdefault(key, set()).add(value)
        tail = "".join(k + v for k in sorted(grouped) for v in sorted(grouped[k]))
    else:
        digest = hashlib.sha256(body).hexdigest()
        url += ("&" if urlsplit(url).query else "?") + f"bodySHA256={digest}"
    mac = hmac.new(v.keys.secrets[0], (url + tail).encode(), hashlib.sha1).digest()
    return Signed({"X-Twilio-Signature": base64.b64encode(mac).decode()}, None if form else url)


def _jwt(v: Verifier, body: bytes, now: datetime, url: str) -> Signed:
    """Netlify's JWT names the body's digest; monday.com's expires (and names the block's
    audience); Atlassian Connect's hashes the method and URL (`qsh`)."""
    import jwt

    name = v.scheme.name
    stamp = int(now.timestamp())
    claims: dict[str, Any] = {"iat": stamp, "exp": stamp + 180}
    if name == "netlify":
        claims = {"iss": "netlify", "sha256": hashlib.sha256(body).hexdigest()}
    elif name == "monday" and v.options.audience is not None:
        claims["aud"] = v.options.audience
    elif name == "atlassian-connect":
        if not url and v.options.public_url is None:
            raise SignError("the atlassian-connect scheme signs the URL: give the URL it calls")
        target = request_url(InboundRequest(path="", payload={}, url=url), v.options)
        claims.update(iss="hookwise-sign", qsh=query_string_hash("POST", target))
    token = jwt.encode(claims, v.keys.secrets[0], algorithm="HS256")
    value = f"JWT {token}" if name == "atlassian-connect" else token
    return Signed({v.scheme.signature.header: value})


def _signature(verifier: Verifier, message: bytes, private_key: Any) -> bytes:
    algorithm = verifier.scheme.algorithm
    if algorithm == "ed25519":
        return bytes(private_key.sign(message))
    if algorithm == "ecdsa-p256":
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec

        return bytes(private_key.sign(message, ec.ECDSA(hashes.SHA256())))
    return hmac.new(verifier.keys.secrets[0], message, DIGESTS[algorithm]).digest()


def sign(
    verifier: Verifier,
    body: bytes,
    *,
    now: datetime,
    delivery_id: str,
    url: str = "",
    form: bool = False,
    private_key: Any = None,
) -> Signed:
    """The headers a provider using `verifier`'s scheme and secret would send with `body`; the
    schemes that sign with a private key (Discord, SendGrid, Standard Webhooks v1a) take it as
    `private_key` (a cryptography private key, e.g. a pair made for a test)."""
    scheme = verifier.scheme
    if scheme.name in _UNSIGNABLE:
        raise SignError(f"the {scheme.name} scheme {_UNSIGNABLE[scheme.name]}")
    if scheme.key == "fetched":
        raise SignError(f"the {scheme.name} scheme is signed by the provider's own keys")
    if scheme.algorithm == "jwt-hs256":
        return _jwt(verifier, body, now, url)
    if scheme.algorithm in _ASYMMETRIC and private_key is None:
        raise SignError(
            f"the {scheme.name} scheme signs with the provider's private key: give one"
            " (--private-key-file)"
        )
    if scheme.algorithm not in _ASYMMETRIC and not verifier.keys.secrets:
        raise SignError(f"the {scheme.name} scheme needs a secret")
    if scheme.name == "twilio":
        return _twilio(verifier, body, url, form)
    if scheme.name == "mandrill":
        if not url and verifier.options.public_url is None:
            raise SignError("the mandrill scheme signs the URL: give the URL the provider calls")
        url = request_url(InboundRequest(path="", payload={}, url=url), verifier.options)
        fields = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
        signed = url + "".join(k + v for k, v in sorted(fields, key=lambda kv: kv[0]))
        mac = hmac.new(verifier.keys.secrets[0], signed.encode(), hashlib.sha1).digest()
        return Signed({scheme.signature.header: base64.b64encode(mac).decode()})
    if "{url}" in scheme.signed and not (url or verifier.options.public_url):
        raise SignError(f"the {scheme.name} scheme signs the URL: give the URL the provider calls")
    fmt = scheme.signature
    headers: dict[str, str] = {}
    id_header = scheme.delivery_id
    if id_header is not None and not id_header.startswith("$"):
        headers[id_header] = delivery_id
    for name in ("webhook-id", "Twitch-Eventsub-Message-Id"):
        if f"{{header:{name}}}" in scheme.signed:
            headers[name] = delivery_id
    stamp = _stamp(scheme.timestamp_unit, now) if scheme.timestamped else ""
    if scheme.timestamp is not None and scheme.timestamp.startswith("header:"):
        headers[scheme.timestamp[7:]] = stamp
    if scheme.algorithm == "token":
        headers[fmt.header] = fmt.prefix + verifier.keys.secrets[0].decode(
            "utf-8", "surrogateescape"
        )
        return Signed(headers)
    request = InboundRequest(
        path="",
        payload={},
        headers={k.lower(): v for k, v in headers.items()},
        raw_body=body,
        url=url,
    )
    message = render(
        scheme.signed, request, scheme, timestamp=stamp, url=request_url(request, verifier.options)
    )
    signature = _encode(_signature(verifier, message, private_key), scheme.encoding)
    if fmt.separator is None:
        value = fmt.prefix + signature
    else:
        value = f"{fmt.label}{fmt.assign}{signature}"
        if fmt.timestamp_label is not None:
            value = f"{fmt.timestamp_label}{fmt.assign}{stamp}{fmt.separator}{value}"
    headers[fmt.header] = value
    return Signed(headers)
