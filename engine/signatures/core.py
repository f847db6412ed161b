"""The generic machinery of signature checks: a scheme is data, this module runs any of them.

A `Scheme` describes how one provider proves a delivery: where the signature is
(`SignatureFormat`: a header holding `prefix + signature`, or a list of labelled items such as
Stripe's `t=...,v1=...`), what is signed (a template over `{body}`, `{timestamp}`, `{url}` and
`{header:Name}`), the algorithm (HMAC with sha1/sha256/sha512, a plain shared `token`, `ed25519`,
`ecdsa-p256`), the encoding of the signature, where the signed timestamp is and its tolerance,
the delivery id used to deduplicate retries, and the handshake the provider performs. The few
schemes that cannot be described this way (Twilio's URL and form parameters, Mailgun's signature
inside the body) give a `parts` function of a few lines instead.

`Verifier` is one compiled check: a scheme, its keys (several while a secret is rotated; any may
match) and options. `Verifier.verify(request)` raises `SignatureError` when the signature is
missing, malformed or wrong, or the signed timestamp is outside the tolerance. Every comparison
is constant-time; messages name the scheme, the header and what is wrong, never a key, a
signature or the body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

import attrs

from ..request import InboundRequest
from ..rules.extract import JsonPath, JsonPathError, compile_jsonpath

Algorithm = Literal[
    "sha1",
    "sha256",
    "sha512",
    "token",
    "ed25519",
    "ecdsa-p256",
    "jwt-hs256",
    "jwt-rs256",
    "jwt-es256",
    "rsa-sha256",
]
Encoding = Literal["hex", "base64", "base64url", "raw"]
TimeUnit = Literal["s", "ms", "rfc3339"]
DEFAULT_TOLERANCE = 300.0
MAX_SIGNATURES = 16  # signatures considered per request (a header may list several)
DIGESTS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}
_UNIX = {"s": re.compile(r"[0-9]{1,12}"), "ms": re.compile(r"[0-9]{1,15}")}
_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\{(body|timestamp|url|header:[A-Za-z0-9_-]+)\}")


class SignatureError(Exception):
    """A request whose signature does not verify; the message is safe to show to the caller."""


@attrs.frozen
class SignatureFormat:
    """Where the signature is: `header` holds `prefix + signature`, or, with `separator`, a list
    of items `label<assign>value` of which those labelled `label` are signatures (any may match)
    and the one labelled `timestamp_label` is the signed timestamp."""

    header: str
    prefix: str = ""
    separator: str | None = None
    assign: str = "="
    label: str = "v1"
    timestamp_label: str | None = None

    def describe(self, shape: str) -> str:
        """The header's form, `shape` being how one signature is written (`64 hex digits`)."""
        if self.separator is None:
            shown = f"{self.prefix}<{shape}>"
        else:
            shown = f"{self.label}{self.assign}<{shape}>"
            if self.timestamp_label:
                shown = f"{self.timestamp_label}{self.assign}<unix time>{self.separator}{shown}"
        return shown


@attrs.frozen
class Parts:
    """What a request presents: the candidate messages that may have been signed (usually one),
    the encoded signatures, the signed timestamp as sent (or None), and the HMAC's digest when
    the request names it (Twilio's signature settings; None: the scheme's)."""

    messages: tuple[bytes, ...]
    signatures: tuple[str, ...]
    timestamp: str | None = None
    algorithm: Literal["sha1", "sha256", "sha512"] | None = None


@attrs.frozen
class Options:
    """A verify block's options the schemes read (none of them secret)."""

    public_url: str | None = None
    tolerance: float | None = None
    verify_token: str | None = attrs.field(default=None, repr=False)
    audience: str | None = None  # the `aud` a signed JWT must carry (Google Pub/Sub push)
    service_account: str | None = None  # the `email` it must carry, when given
    keys_url: str | None = None  # where the provider's public keys are, instead of its own
    topics: tuple[str, ...] = ()  # the SNS topics accepted
    webhook_id: str | None = None  # the id PayPal gave the subscription (it is signed)
    client_id: str | None = None  # Plaid's API client id (its key endpoint asks for it)


@attrs.frozen
class KeyRequest:
    """A document a check needs that is asked for with a POST (Plaid's key endpoint): the URL,
    the JSON body (it holds the block's API credentials: never shown), and the name it is
    cached and found under in `InboundRequest.fetched`."""

    url: str
    body: bytes = attrs.field(repr=False)
    name: str


PartsFn = Callable[["Scheme", InboundRequest, Options], Parts]
#: a whole check, for schemes whose proof is not a signature over a message (a signed JWT)
CheckFn = Callable[["Verifier", InboundRequest], None]
#: what a request's check needs fetched first (keys, certificates), each one allowed: a URL to
#: GET, or a `KeyRequest` to POST
FetchFn = Callable[["Verifier", InboundRequest], tuple["str | KeyRequest", ...]]


@attrs.frozen
class Scheme:
    """One provider's way of signing, as data (see the module docstring)."""

    name: str
    signature: SignatureFormat
    signed: str = "{body}"
    algorithm: Algorithm = "sha256"
    encoding: Encoding = "hex"
    timestamp: str | None = None  # "header:<name>", "label" (in the signature header), "$.path"
    timestamp_unit: TimeUnit = "s"
    tolerance: float | None = None  # default; None: the age is checked only when configured
    # how the configured secret becomes the key: as text, Standard Webhooks' whsec_, decoded
    # from base64 (Airtable) or hex (Close, Squarespace); or a public key
    key: Literal[
        "secret",
        "whsec",
        "base64-secret",
        "hex-secret",
        "sha1-secret",  # the SHA-1 digest of the secret (Braintree's private key)
        "ed25519-hex",
        "whpk",
        "ecdsa-spki",
        "fetched",  # the provider's published keys, fetched by the server (Google)
    ] = "secret"
    delivery_id: str | None = None  # a header name, or a JSONPath into the payload
    event_type: str | None = None  # where the provider names the event: a header or a JSONPath
    handshake: str | None = None
    header_aliases: Mapping[str, str] = attrs.field(factory=dict)  # name -> the other name
    asymmetric: str | None = None  # the scheme to use when a publicKey is configured
    needs_url: bool = False
    parts: PartsFn | None = None
    check: CheckFn | None = None
    fetch: FetchFn | None = None
    doc: str = ""

    @property
    def timestamped(self) -> bool:
        return self.timestamp is not None


def header(request: InboundRequest, name: str, scheme: Scheme) -> str:
    """A header's stripped value (trying its alias); `SignatureError` when missing or empty."""
    value = request.headers.get(name.lower())
    alias = scheme.header_aliases.get(name.lower())
    if (value is None or not value.strip()) and alias is not None:
        value = request.headers.get(alias.lower())
    if value is None or not value.strip():
        raise SignatureError(f"{scheme.name} signature check failed: the {name} header is missing")
    return value.strip()


def malformed(scheme: Scheme, what: str) -> SignatureError:
    return SignatureError(f"{scheme.name} signature check failed: {what}")


def json_body(request: InboundRequest) -> Any:
    """The raw body parsed as JSON, or None (the checks never trust the server's parse)."""
    try:
        return json.loads(request.raw_body)
    except (ValueError, RecursionError):
        return None


def render(template: str, request: InboundRequest, scheme: Scheme, **values: str) -> bytes:
    """The signed message: the template with `{body}` (raw bytes), `{timestamp}`, `{url}` and
    `{header:Name}` filled in."""
    out: list[bytes] = []
    last = 0
    for m in _PLACEHOLDER.finditer(template):
        out.append(template[last : m.start()].encode("utf-8"))
        name = m.group(1)
        if name == "body":
            out.append(request.raw_body)
        elif name.startswith("header:"):
            out.append(header(request, name[7:], scheme).encode("utf-8", "surrogateescape"))
        else:
            out.append(values.get(name, "").encode("utf-8", "surrogateescape"))
        last = m.end()
    out.append(template[last:].encode("utf-8"))
    return b"".join(out)


def template_problem(template: str) -> str | None:
    """Why a `signed` template is unusable, or None."""
    if "{body}" not in template:
        return "must contain {body}"
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        return "knows only {body}, {timestamp}, {url} and {header:Name}"
    return None


def request_url(request: InboundRequest, options: Options) -> str:
    """The URL the provider called: `publicUrl` (plus the request's query string) when set."""
    if options.public_url is None:
        return request.url
    query = request.url.partition("?")[2]
    base = options.public_url
    return f"{base}?{query}" if query and "?" not in base else base


def default_parts(scheme: Scheme, request: InboundRequest, options: Options) -> Parts:
    """Signatures from the signature header, the timestamp, and the message from `signed`."""
    fmt = scheme.signature
    value = header(request, fmt.header, scheme)
    stamp: str | None = None
    if fmt.separator is None:
        signatures = [value[len(fmt.prefix) :].strip()] if value.startswith(fmt.prefix) else []
    else:
        signatures, stamps = [], []
        items = value.split() if fmt.separator == " " else value.split(fmt.separator)
        for item in items[: MAX_SIGNATURES * 2]:
            label, sep, part = item.strip().partition(fmt.assign)
            if sep and label.strip() == fmt.label:
                signatures.append(part.strip())
            elif sep and label.strip() == fmt.timestamp_label:
                stamps.append(part.strip())
        if fmt.timestamp_label is not None:
            if len(stamps) != 1:
                raise malformed(
                    scheme,
                    f"the {fmt.header} header is not of the form {fmt.describe(shape(scheme))}",
                )
            stamp = stamps[0]
    if scheme.timestamp is not None and scheme.timestamp.startswith("header:"):
        stamp = header(request, scheme.timestamp[7:], scheme)
    elif scheme.timestamp is not None and scheme.timestamp.startswith("$"):
        stamp = _body_timestamp(scheme, request)
    url = request_url(request, options) if scheme.needs_url else ""
    message = render(scheme.signed, request, scheme, timestamp=stamp or "", url=url)
    return Parts((message,), tuple(signatures), stamp)


def _body_timestamp(scheme: Scheme, request: InboundRequest) -> str:
    assert scheme.timestamp is not None
    found = _jsonpath(scheme.timestamp).first(json_body(request))
    if isinstance(found, bool) or not isinstance(found, int | str):
        raise malformed(scheme, f"the body has no timestamp at {scheme.timestamp}")
    return str(found)


_PATHS: dict[str, JsonPath] = {}


def _jsonpath(expr: str) -> JsonPath:
    compiled = _PATHS.get(expr)
    if compiled is None:
        compiled = _PATHS[expr] = compile_jsonpath(expr)
    return compiled


def shape(scheme: Scheme) -> str:
    """How one signature of `scheme` is written, for messages."""
    size = DIGESTS[scheme.algorithm]().digest_size if scheme.algorithm in DIGESTS else None
    if scheme.encoding == "raw":
        return "token"
    if scheme.encoding == "hex":
        return f"{size * 2} hex digits" if size else "hex"
    return f"base64 of {size} bytes" if size else "base64"


def decode(value: str, encoding: Encoding) -> bytes | None:
    """A signature's bytes, or None when it is not valid in `encoding`."""
    if encoding == "raw":
        return value.encode("utf-8", "surrogateescape")
    if encoding == "hex":
        try:
            return bytes.fromhex(value) if value else None
        except ValueError:
            return None
    try:
        if encoding == "base64url":  # sent without its padding (Sanity)
            return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)) or None
        return base64.b64decode(value, validate=True) or None
    except (binascii.Error, ValueError):
        return None


def parse_time(value: str, unit: TimeUnit) -> float | None:
    """Seconds since the epoch, or None when `value` is not a time in `unit`."""
    if unit == "rfc3339":
        m = _RFC3339.fullmatch(value)
        if m is None:
            return None
        fraction = (m.group(2) or "")[:7]  # Twitch sends nanoseconds; Python parses micro
        try:
            return datetime.fromisoformat(m.group(1) + fraction + m.group(3).upper()).timestamp()
        except ValueError:
            return None
    if not _UNIX[unit].fullmatch(value):
        return None
    return int(value) / (1000 if unit == "ms" else 1)


@attrs.frozen
class Keys:
    """A verify block's keys: shared secrets (any may match) or a public key. Never shown."""

    secrets: tuple[bytes, ...] = attrs.field(default=(), repr=False)
    public: Any = attrs.field(default=None, repr=False)  # a cryptography public key


def _hmac_ok(
    algorithm: str, keys: Keys, messages: Sequence[bytes], sigs: list[bytes]
) -> int | None:
    """The index of the first secret a signature matches, or None."""
    digest = DIGESTS[algorithm]
    found: int | None = None
    for i, key in enumerate(keys.secrets):
        for message in messages:
            expected = hmac.new(key, message, digest).digest()
            for sig in sigs:  # no early exit: every comparison runs
                if hmac.compare_digest(expected, sig) and found is None:
                    found = i
    return found


def _token_ok(keys: Keys, presented: list[bytes]) -> int | None:
    """The index of the secret the first presented token is, when every presented token is a
    configured one (Graph repeats clientState per item); None otherwise."""
    wanted = [hashlib.sha256(k).digest() for k in keys.secrets]
    ok = bool(presented)
    first: int | None = None
    for token in presented:
        digest = hashlib.sha256(token).digest()
        match = False
        for i, w in enumerate(wanted):
            if hmac.compare_digest(digest, w):
                match = True
                if first is None:
                    first = i
        ok &= match
    return first if ok else None


def _public_ok(algorithm: str, keys: Keys, messages: Sequence[bytes], sigs: list[bytes]) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    for message in messages:
        for sig in sigs:
            try:
                if algorithm == "ed25519":
                    keys.public.verify(sig, message)
                else:
                    keys.public.verify(sig, message, ec.ECDSA(hashes.SHA256()))
                return True
            except (InvalidSignature, ValueError):
                continue
    return False


@attrs.frozen
class Verifier:
    """One compiled verify block: a scheme, its keys and options; holds keys, never shows them."""

    scheme: Scheme
    keys: Keys = attrs.field(repr=False)
    options: Options = attrs.field(factory=Options)
    auth: Literal["token", "signature"] = "token"
    where: str = "verify"  # the block's key path, for messages

    @property
    def name(self) -> str:
        return self.scheme.name

    @property
    def signature_auth(self) -> bool:
        """A valid signature authenticates the request without the hook token."""
        return self.auth == "signature"

    @property
    def tolerance(self) -> float | None:
        return (
            self.options.tolerance if self.options.tolerance is not None else self.scheme.tolerance
        )

    def verify(self, request: InboundRequest) -> str:
        """Raise `SignatureError` unless the request carries a valid signature; who signed it
        (`sender`): the scheme and which configured secret matched, never the secret."""
        scheme = self.scheme
        if scheme.check is not None:
            scheme.check(self, request)
            return self.sender(None)
        parts = (scheme.parts or default_parts)(scheme, request, self.options)
        stamp: float | None = None
        if scheme.timestamped:
            stamp = parse_time(parts.timestamp or "", scheme.timestamp_unit)
            if stamp is None:
                raise malformed(scheme, "the signed timestamp is not a valid time")
        algorithm = parts.algorithm or scheme.algorithm
        size = DIGESTS[algorithm]().digest_size if algorithm in DIGESTS else None
        decoded = [
            d
            for s in parts.signatures[:MAX_SIGNATURES]
            if (d := decode(s, scheme.encoding)) and (size is None or len(d) == size)
        ]
        if not decoded:
            fmt = scheme.signature
            raise malformed(
                scheme, f"the {fmt.header} header is not of the form {fmt.describe(shape(scheme))}"
            )
        index: int | None = None
        if algorithm == "token":
            index = _token_ok(self.keys, decoded)
            ok = index is not None
        elif algorithm in DIGESTS:
            index = _hmac_ok(algorithm, self.keys, parts.messages, decoded)
            ok = index is not None
        else:
            ok = _public_ok(scheme.algorithm, self.keys, parts.messages, decoded)
        if not ok:
            raise malformed(
                scheme,
                f"the {scheme.signature.header} signature does not match the body and the "
                f"configured {'public key' if self.keys.public is not None else 'secret'}",
            )
        tolerance = self.tolerance
        if stamp is not None and tolerance is not None:
            check_age(scheme.name, stamp, request.now, tolerance)
        return self.sender(index)

    def sender(self, index: int | None) -> str:
        """Who a verified request came from, as budgets by sender key it: `<scheme>#<n>`, the
        scheme and the index of the secret that matched in the block's `secrets` (0 for a
        single `secret`), or the scheme alone (a public key, a provider's published keys, and a
        scheme whose `check` is its own, which does not say which secret matched)."""
        return self.scheme.name if index is None else f"{self.scheme.name}#{index}"

    def delivery_id(self, request: InboundRequest) -> str | None:
        """The provider's id of this delivery (the same on every retry), or None."""
        return self._locate(self.scheme.delivery_id, request)

    def event_type(self, request: InboundRequest) -> str | None:
        """The provider's name of the event (`pull_request`, `invoice.paid`), or None."""
        return self._locate(self.scheme.event_type, request)

    def _locate(self, source: str | None, request: InboundRequest) -> str | None:
        """A header's stripped value (or its alias's), or the first value at a JSONPath."""
        if source is None:
            return None
        if source.startswith("$"):
            value = _jsonpath(source).first(request.payload)
            return str(value) if isinstance(value, str | int) and str(value).strip() else None
        value = request.headers.get(source.lower())
        alias = self.scheme.header_aliases.get(source.lower())
        if not value and alias:
            value = request.headers.get(alias)
        return value.strip() if value and value.strip() else None

    def mac(self, message: bytes) -> bytes:
        """HMAC of `message` with the first (current) secret, for handshakes that need one."""
        return hmac.new(self.keys.secrets[0], message, hashlib.sha256).digest()


def check_age(scheme: str, timestamp: float, now: datetime | None, tolerance: float) -> None:
    """Refuse a signed timestamp further than `tolerance` seconds from `now`."""
    if now is None:
        raise ValueError(f"InboundRequest.now is required to verify {scheme} signatures")
    age = now.timestamp() - timestamp
    if age > tolerance:
        raise SignatureError(
            f"{scheme} signature check failed: the signed timestamp is {age:.0f} s old, "
            f"more than the {tolerance:g} s tolerance"
        )
    if -age > tolerance:
        raise SignatureError(
            f"{scheme} signature check failed: the signed timestamp is {-age:.0f} s in the "
            f"future, more than the {tolerance:g} s tolerance"
        )


def valid_jsonpath(expr: str) -> str | None:
    """Why `expr` is not a JSONPath, or None."""
    try:
        compile_jsonpath(expr)
    except JsonPathError as exc:
        return str(exc)
    return None
