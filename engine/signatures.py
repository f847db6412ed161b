"""Signature verification of mapped hooks: the providers' HMAC schemes, compiled once per rule.

A mapping's `verify` block (`hookwise.engine.mapping.VerifyConfig`) names a scheme and a secret; at load,
`compile_verifier` resolves the secret (`secret`, or `secretFile` relative to the folder of the
file that holds the rule) and checks the options. Per request, `Verifier.verify` checks the raw
body exactly as received, before templates and transforms, and raises `SignatureError` when the
signature is missing, malformed or wrong, or its signed timestamp is outside the tolerance.

Schemes (each as its provider documents it; every comparison is `hmac.compare_digest`):
- `github`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>`.
- `stripe`: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` over `"{t}.{body}"`, the whole
  `whsec_...` string being the key; any `v1` may match (other schemes such as `v0` are ignored).
- `standard-webhooks` (standardwebhooks.com, Svix and others): `webhook-id`,
  `webhook-timestamp`, `webhook-signature: v1,<base64>[ v1,<base64>...]` over
  `"{id}.{timestamp}.{body}"`, the key being the base64 after `whsec_`; any `v1` may match.
- `hmac-sha256`: a header of the operator's choice holding `prefix + hex|base64(HMAC-SHA256(secret,
  body))`.

Timestamps (stripe, standard-webhooks) must lie within `tolerance` (default 5 minutes) of the
request's `now`, in the past or in the future. Messages name the scheme, the header and what is
wrong; they never contain the secret, a signature or the body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

import attrs

from hookwise.engine.errors import ConfigError, ConfigIssue
from hookwise.engine.mapping import VerifyConfig

SCHEMES = ("github", "stripe", "standard-webhooks", "hmac-sha256")
DEFAULT_TOLERANCE = 300.0
_DIGEST_SIZE = hashlib.sha256().digest_size
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_UNIX_TIME = re.compile(r"[0-9]{1,12}")
_TIMESTAMPED = ("stripe", "standard-webhooks")

Headers = Mapping[str, str]


class SignatureError(Exception):
    """A request whose signature does not verify; the message is safe to show to the caller."""


def _mac(key: bytes, *parts: bytes) -> bytes:
    return hmac.new(key, b"".join(parts), hashlib.sha256).digest()


def _any_equal(expected: bytes, candidates: list[bytes]) -> bool:
    # Compare against every candidate (no early exit), each in constant time.
    found = False
    for candidate in candidates:
        found |= hmac.compare_digest(expected, candidate)
    return found


def _header(headers: Headers, name: str, scheme: str) -> str:
    value = headers.get(name.lower())
    if value is None or not value.strip():
        raise SignatureError(f"{scheme} signature check failed: the {name} header is missing")
    return value.strip()


def _hex(value: str) -> bytes | None:
    return bytes.fromhex(value) if _HEX_DIGEST.fullmatch(value) else None


def _b64(value: str) -> bytes | None:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == _DIGEST_SIZE else None


def _check_age(scheme: str, timestamp: int, now: datetime | None, tolerance: float) -> None:
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


def verify_github(secret: bytes, headers: Headers, body: bytes) -> None:
    """GitHub: `X-Hub-Signature-256: sha256=<hex>` over the raw body."""
    value = _header(headers, "X-Hub-Signature-256", "github")
    digest = _hex(value[7:]) if value.startswith("sha256=") else None
    if digest is None:
        raise SignatureError(
            "github signature check failed: the X-Hub-Signature-256 header is not of the form "
            "sha256=<64 hex digits>"
        )
    if not hmac.compare_digest(_mac(secret, body), digest):
        raise SignatureError(
            "github signature check failed: the X-Hub-Signature-256 signature does not match "
            "the body and the configured secret"
        )


def verify_stripe(
    secret: bytes, headers: Headers, body: bytes, now: datetime | None, tolerance: float
) -> None:
    """Stripe: `Stripe-Signature: t=<unix>,v1=<hex>...` over `"{t}.{body}"`, then the age of t."""
    value = _header(headers, "Stripe-Signature", "stripe")
    stamps: list[str] = []
    signatures: list[bytes | None] = []
    for item in value.split(","):
        key, sep, part = item.strip().partition("=")
        if sep and key == "t":
            stamps.append(part.strip())
        elif sep and key == "v1":
            signatures.append(_hex(part.strip()))
    if len(stamps) != 1 or not _UNIX_TIME.fullmatch(stamps[0]) or not signatures:
        raise SignatureError(
            "stripe signature check failed: the Stripe-Signature header is not of the form "
            "t=<unix time>,v1=<hex>"
        )
    valid = [s for s in signatures if s is not None]
    if not valid:
        raise SignatureError(
            "stripe signature check failed: no v1 signature in the Stripe-Signature header is "
            "64 hex digits"
        )
    if not _any_equal(_mac(secret, stamps[0].encode("ascii"), b".", body), valid):
        raise SignatureError(
            "stripe signature check failed: no v1 signature in the Stripe-Signature header "
            "matches the body and the configured secret"
        )
    _check_age("stripe", int(stamps[0]), now, tolerance)


def verify_standard_webhooks(
    key: bytes, headers: Headers, body: bytes, now: datetime | None, tolerance: float
) -> None:
    """Standard Webhooks: `webhook-signature: v1,<base64>...` over `"{id}.{timestamp}.{body}"`."""
    scheme = "standard-webhooks"
    msg_id = _header(headers, "webhook-id", scheme)
    stamp = _header(headers, "webhook-timestamp", scheme)
    value = _header(headers, "webhook-signature", scheme)
    if not _UNIX_TIME.fullmatch(stamp):
        raise SignatureError(
            f"{scheme} signature check failed: the webhook-timestamp header is not a unix time"
        )
    signatures: list[bytes | None] = []
    for item in value.split():
        version, sep, part = item.partition(",")
        if sep and version == "v1":
            signatures.append(_b64(part))
    if not signatures:
        raise SignatureError(
            f"{scheme} signature check failed: the webhook-signature header holds no "
            "v1,<base64> signature"
        )
    valid = [s for s in signatures if s is not None]
    if not valid:
        raise SignatureError(
            f"{scheme} signature check failed: no v1 signature in the webhook-signature header "
            "is valid base64 of 32 bytes"
        )
    signed = _mac(key, msg_id.encode("utf-8", "surrogatepass"), b".", stamp.encode(), b".", body)
    if not _any_equal(signed, valid):
        raise SignatureError(
            f"{scheme} signature check failed: no v1 signature in the webhook-signature header "
            "matches the body and the configured secret"
        )
    _check_age(scheme, int(stamp), now, tolerance)


def verify_hmac_sha256(
    secret: bytes, headers: Headers, body: bytes, *, header: str, prefix: str, encoding: str
) -> None:
    """Generic: `header` holds `prefix + hex|base64(HMAC-SHA256(secret, body))`."""
    value = _header(headers, header, "hmac-sha256")
    form = "64 hex digits" if encoding == "hex" else "base64 of 32 bytes"
    digest = None
    if value.startswith(prefix):
        rest = value[len(prefix) :].strip()
        digest = _hex(rest) if encoding == "hex" else _b64(rest)
    if digest is None:
        shown = f"{prefix!r} followed by " if prefix else ""
        raise SignatureError(
            f"hmac-sha256 signature check failed: the {header} header is not {shown}{form}"
        )
    if not hmac.compare_digest(_mac(secret, body), digest):
        raise SignatureError(
            f"hmac-sha256 signature check failed: the {header} signature does not match the "
            "body and the configured secret"
        )


Check = Callable[[Headers, bytes, "datetime | None"], None]


@attrs.frozen
class Verifier:
    """One rule's compiled signature check; holds the key, never shows it."""

    scheme: str
    _check: Check = attrs.field(repr=False)

    def verify(self, headers: Headers, body: bytes, now: datetime | None) -> None:
        """Raise `SignatureError` unless `body` carries a valid signature in `headers`."""
        self._check(headers, body, now)


def _secret(config: VerifyConfig, base_dir: Path, fail: Callable[[str, str], None]) -> str | None:
    if config.secret is not None and config.secret_file is not None:
        fail("secretFile", "give verify.secret or verify.secretFile, not both")
        return None
    if config.secret_file is not None:
        path = Path(config.secret_file).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            fail("secretFile", f"cannot read {path}: {exc.strerror or exc}")
            return None
        if not value:
            fail("secretFile", f"{path} is empty")
            return None
        return value
    if config.secret is None:
        fail("secret", "is required (or verify.secretFile)")
        return None
    if not config.secret.strip():
        fail("secret", "must not be empty (is its environment variable set to an empty value?)")
        return None
    return config.secret


def _whsec_key(secret: str, key: str, fail: Callable[[str, str], None]) -> bytes | None:
    if not secret.startswith("whsec_"):
        fail(key, "a standard-webhooks secret must start with whsec_ followed by base64")
        return None
    try:
        raw = base64.b64decode(secret[len("whsec_") :], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not raw:
        fail(key, "a standard-webhooks secret must be whsec_ followed by non-empty base64")
        return None
    return raw


def compile_verifier(config: VerifyConfig, base_dir: Path, where: str) -> Verifier:
    """Check a `verify` block and resolve its secret; `where` is the block's key path prefix
    (`hooks.mappings[0].verify`). Raises `ConfigError` with every problem (never the secret)."""
    issues: list[ConfigIssue] = []

    def fail(key: str, message: str) -> None:
        issues.append(ConfigIssue(f"{where}.{key}", message))

    scheme = config.scheme
    if scheme not in SCHEMES:
        fail("scheme", "must be one of " + ", ".join(SCHEMES))
    elif scheme == "hmac-sha256":
        if not config.header or not config.header.strip():
            fail("header", "is required for the hmac-sha256 scheme (the header that holds it)")
    else:
        for key, value in (
            ("header", config.header),
            ("prefix", config.prefix),
            ("encoding", config.encoding),
        ):
            if value is not None:
                fail(key, f"applies to the hmac-sha256 scheme only, not {scheme}")
    if scheme in _TIMESTAMPED:
        if config.tolerance is not None and config.tolerance <= 0:
            fail("tolerance", "must be positive")
    elif config.tolerance is not None:
        fail("tolerance", f"the {scheme} scheme signs no timestamp; remove tolerance")
    secret = _secret(config, base_dir, fail)
    secret_key = "secretFile" if config.secret_file is not None else "secret"
    key = _whsec_key(secret, secret_key, fail) if secret and scheme == "standard-webhooks" else None
    if issues or secret is None or scheme not in SCHEMES:
        raise ConfigError(issues)

    tolerance = float(config.tolerance) if config.tolerance is not None else DEFAULT_TOLERANCE
    raw = secret.encode("utf-8")
    check: Check
    if scheme == "github":
        check = lambda h, b, _: verify_github(raw, h, b)  # noqa: E731
    elif scheme == "stripe":
        check = lambda h, b, now: verify_stripe(raw, h, b, now, tolerance)  # noqa: E731
    elif scheme == "standard-webhooks":
        assert key is not None
        check = lambda h, b, now: verify_standard_webhooks(key, h, b, now, tolerance)  # noqa: E731
    else:
        header = (config.header or "").strip()
        prefix, encoding = config.prefix or "", config.encoding or "hex"
        check = lambda h, b, _: verify_hmac_sha256(  # noqa: E731
            raw, h, b, header=header, prefix=prefix, encoding=encoding
        )
    return Verifier(scheme, check)
