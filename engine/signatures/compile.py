"""From a verify block (`hookwise.engine.config.mapping.VerifyConfig`) to a `Verifier`, checked at load.

The scheme is looked up by name (aliases such as `whatsapp` -> `meta`; a `publicKey` on
`standard-webhooks` selects its asymmetric `v1a` variant; `hmac`/`hmac-sha256` build a scheme
from the block's own keys). Keys are resolved and decoded once: `secret`, `secretFile`
(relative to `base_dir`) or `secrets` (rotation), Standard Webhooks' `whsec_` base64 (padding
optional, as its SDK), `publicKey` as the provider gives it (Discord: hex; SendGrid: base64
DER or PEM; Standard Webhooks: `whpk_` base64). Every problem is a `ConfigIssue` naming the key
path; no message contains a secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.mapping import VerifyConfig
from ..errors import ConfigError, ConfigIssue
from .core import Keys, Options, Scheme, Verifier, template_problem
from .schemes import ALIASES, GENERIC, NAMES, SCHEMES, generic_hmac

Fail = Callable[[str, str], None]
_GENERIC_ONLY = ("header", "prefix", "encoding", "algorithm", "signed", "timestampHeader")


def _secrets(config: VerifyConfig, base_dir: Path, fail: Fail) -> list[str]:
    given = [k for k, v in (("secret", config.secret), ("secretFile", config.secret_file),
                            ("secrets", config.secrets)) if v is not None]  # fmt: skip
    if len(given) > 1:
        fail(given[1], "give one of verify.secret, verify.secretFile or verify.secrets")
        return []
    if config.secret_file is not None:
        path = Path(config.secret_file).expanduser()
        if not path.is_absolute():
            path = base_dir / path
        try:
            value = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            fail("secretFile", f"cannot read {path}: {exc.strerror or exc}")
            return []
        if not value:
            fail("secretFile", f"{path} is empty")
            return []
        return [value]
    if config.secrets is not None:
        if not config.secrets:
            fail("secrets", "must list at least one secret")
        for i, value in enumerate(config.secrets):
            if not value.strip():
                fail(f"secrets[{i}]", "must not be empty")
        return list(config.secrets)
    if config.secret is None:
        fail("secret", "is required (or verify.secretFile, or verify.secrets)")
        return []
    if not config.secret.strip():
        fail("secret", "must not be empty (is its environment variable set to an empty value?)")
        return []
    return [config.secret]


def _b64(value: str) -> bytes | None:
    try:
        # Padding is optional, as in the Standard Webhooks SDK (extra padding is ignored).
        return base64.b64decode(value + "==", validate=False) or None
    except (binascii.Error, ValueError):
        return None


def _whsec(secret: str) -> bytes | None:
    body = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    if not body or not all(c.isalnum() or c in "+/=" for c in body):
        return None
    return _b64(body)


_LOOPBACK = ("http://127.0.0.1:", "http://127.0.0.1/", "http://localhost:", "http://[::1]:")


def _fetched_keys(scheme: Scheme, config: VerifyConfig, fail: Fail) -> None:
    """The keys of the schemes that check a provider's published keys (and only theirs)."""
    given = {
        "audience": (config.audience, ("google-pubsub", "monday")),
        "serviceAccount": (config.service_account, ("google-pubsub",)),
        "topics": (config.topics, ("sns",)),
        "webhookId": (config.webhook_id, ("paypal",)),
        "clientId": (config.client_id, ("plaid",)),
        "keysUrl": (config.keys_url, (scheme.name,) if scheme.key == "fetched" else ()),
    }
    for key, (value, owners) in given.items():
        if value is not None and scheme.name not in owners:
            fail(key, f"does not apply to the {config.scheme} scheme")
    if scheme.key != "fetched":
        return
    # Plaid's keys are asked for with the API credentials: its secret is the API secret
    for key in (
        ("publicKey",)
        if scheme.name == "plaid"
        else ("secret", "secretFile", "secrets", "publicKey")
    ):
        if getattr(config, {"secretFile": "secret_file", "publicKey": "public_key"}.get(key, key)):
            fail(key, f"the {config.scheme} scheme checks the keys the provider publishes")
    if scheme.name == "plaid" and not (config.client_id or "").strip():
        fail("clientId", "is required for the plaid scheme: the API client id (with its secret)")
    if scheme.name == "google-pubsub" and not (config.audience or "").strip():
        fail("audience", "is required for the google-pubsub scheme (the push token's audience)")
    if scheme.name == "paypal" and not (config.webhook_id or "").strip():
        fail("webhookId", "is required for the paypal scheme: the id PayPal gave the webhook")
    if scheme.name == "sns" and not [t for t in config.topics or () if t.strip()]:
        fail("topics", "is required for the sns scheme: the TopicArn of each topic accepted")
    url = config.keys_url
    if url is not None and not url.startswith(("https://", *_LOOPBACK)):
        fail("keysUrl", "must be an https:// URL (http:// only on the loopback interface)")


def _hex(value: str) -> bytes | None:
    try:
        return bytes.fromhex(value) or None
    except ValueError:
        return None


def _strict_b64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True) or None
    except (binascii.Error, ValueError):
        return None


#: secrets given encoded: how each is decoded, and what it must be
_DECODED: dict[str, tuple[Callable[[str], bytes | None], str]] = {
    "base64-secret": (_strict_b64, "the base64 the provider gives (macSecretBase64)"),
    "hex-secret": (_hex, "hex digits, as the provider gives it"),
    "sha1-secret": (lambda s: hashlib.sha1(s.encode("utf-8")).digest() if s else None, "set"),
}


def _public_key(scheme: Scheme, value: str) -> Any:
    """A cryptography public key, or None when `value` is not one for `scheme`."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519
    from cryptography.hazmat.primitives.serialization import (
        load_der_public_key,
        load_pem_public_key,
    )

    value = value.strip()
    try:
        if scheme.key == "ed25519-hex":
            return ed25519.Ed25519PublicKey.from_public_bytes(bytes.fromhex(value))
        if scheme.key == "whpk":
            raw = _b64(value.removeprefix("whpk_"))
            return ed25519.Ed25519PublicKey.from_public_bytes(raw or b"")
        if value.startswith("-----BEGIN"):
            key = load_pem_public_key(value.encode())
        else:
            key = load_der_public_key(base64.b64decode(value, validate=True))
    except (ValueError, binascii.Error, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
        return None
    return key


def _scheme(config: VerifyConfig, fail: Fail) -> Scheme | None:
    name = ALIASES.get(config.scheme, config.scheme)
    if name in GENERIC:
        if not config.header or not config.header.strip():
            fail("header", f"is required for the {config.scheme} scheme (the header that holds it)")
        algorithm = config.algorithm or "sha256"
        if name == "hmac-sha256" and algorithm != "sha256":
            fail("algorithm", "hmac-sha256 is sha256; use the hmac scheme for another algorithm")
        signed = config.signed or "{body}"
        problem = template_problem(signed)
        if problem is not None:
            fail("signed", problem)
        if "{timestamp}" in signed and not config.timestamp_header:
            fail("timestampHeader", "is required when signed contains {timestamp}")
        if config.timestamp_header and "{timestamp}" not in signed:
            fail("timestampHeader", "the signed template has no {timestamp}")
        if "{url}" in signed and config.public_url is None:
            pass  # the URL as requested; publicUrl overrides it
        return generic_hmac(
            config.scheme,
            header_name=(config.header or "").strip(),
            algorithm=algorithm,
            encoding=config.encoding or "hex",
            prefix=config.prefix or "",
            signed=signed,
            timestamp_header=(config.timestamp_header or "").strip() or None,
        )
    if name not in SCHEMES:
        fail("scheme", "must be one of " + ", ".join(NAMES))
        return None
    given = {
        "header": config.header,
        "prefix": config.prefix,
        "encoding": config.encoding,
        "algorithm": config.algorithm,
        "signed": config.signed,
        "timestampHeader": config.timestamp_header,
    }
    for key in _GENERIC_ONLY:
        if given[key] is not None:
            fail(key, f"applies to the hmac schemes only, not {config.scheme}")
    scheme = SCHEMES[name]
    if config.public_key is not None and scheme.asymmetric is not None:
        scheme = SCHEMES[scheme.asymmetric]
    return scheme


def compile_verifier(config: VerifyConfig, base_dir: Path, where: str) -> Verifier:
    """Check a `verify` block and resolve its keys; `where` is the block's key path prefix
    (`hooks.mappings[0].verify`). Raises `ConfigError` with every problem (never a secret)."""
    issues: list[ConfigIssue] = []

    def fail(key: str, message: str) -> None:
        issues.append(ConfigIssue(f"{where}.{key}", message))

    scheme = _scheme(config, fail)
    keys = Keys()
    if scheme is not None:
        _fetched_keys(scheme, config, fail)
        if scheme.name == "plaid":
            keys = Keys(secrets=tuple(s.encode() for s in _secrets(config, base_dir, fail)))
        elif scheme.key == "fetched":
            pass
        elif scheme.key in ("ed25519-hex", "whpk", "ecdsa-spki"):
            for key in ("secret", "secretFile", "secrets"):
                if getattr(config, {"secretFile": "secret_file"}.get(key, key)) is not None:
                    fail(key, f"the {config.scheme} scheme checks a publicKey, not a secret")
            if config.public_key is None or not config.public_key.strip():
                fail("publicKey", f"is required for the {config.scheme} scheme")
            else:
                public = _public_key(scheme, config.public_key)
                if public is None:
                    fail("publicKey", _KEY_FORMS[scheme.key])
                keys = Keys(public=public)
        else:
            if config.public_key is not None:
                fail("publicKey", f"the {config.scheme} scheme checks a shared secret")
            secrets = _secrets(config, base_dir, fail)
            shown = (
                "secrets"
                if config.secrets is not None
                else "secretFile"
                if config.secret_file
                else "secret"
            )
            raw: list[bytes] = []
            for secret in secrets:
                if scheme.key == "whsec":
                    decoded = _whsec(secret)
                    if decoded is None:
                        fail(shown, "a standard-webhooks secret must be whsec_ followed by base64")
                    raw.append(decoded or b"")
                elif scheme.key in _DECODED:
                    decoded = _DECODED[scheme.key][0](secret.strip())
                    if decoded is None:
                        fail(shown, f"the {config.scheme} secret is {_DECODED[scheme.key][1]}")
                    raw.append(decoded or b"")
                else:
                    raw.append(secret.encode("utf-8"))
            keys = Keys(secrets=tuple(raw))
        if scheme.signature.header.lower() == "authorization" and config.auth != "signature":
            fail("auth", f"the {config.scheme} scheme reads the Authorization header, where a hook"
                 " token would be: give auth: signature")  # fmt: skip
        if scheme.timestamp is None and config.tolerance is not None:
            fail("tolerance", f"the {config.scheme} scheme signs no timestamp; remove tolerance")
        if config.tolerance is not None and config.tolerance <= 0:
            fail("tolerance", "must be positive")
        if config.verify_token is not None and scheme.handshake != "meta":
            fail("verifyToken", "is for the meta scheme's GET handshake only")
        if config.verify_token is not None and not config.verify_token.strip():
            fail("verifyToken", "must not be empty")
        if config.public_url is not None:
            if not scheme.needs_url and "{url}" not in scheme.signed:
                fail("publicUrl", f"the {config.scheme} scheme does not sign the URL")
            elif not config.public_url.startswith(("https://", "http://")):
                fail("publicUrl", "must be an http:// or https:// URL")
    if issues or scheme is None:
        raise ConfigError(issues)
    options = Options(
        public_url=config.public_url,
        tolerance=float(config.tolerance) if config.tolerance is not None else None,
        verify_token=config.verify_token,
        audience=config.audience,
        service_account=config.service_account,
        keys_url=config.keys_url,
        topics=tuple(t.strip() for t in config.topics or ()),
        webhook_id=(config.webhook_id or "").strip() or None,
        client_id=(config.client_id or "").strip() or None,
    )
    return Verifier(scheme, keys, options, config.auth, where)


_KEY_FORMS = {
    "ed25519-hex": "must be the application's Ed25519 public key, 64 hex digits",
    "whpk": "must be whpk_ followed by the base64 of a 32-byte Ed25519 public key",
    "ecdsa-spki": "must be the base64 (or PEM) of an ECDSA P-256 public key",
}
