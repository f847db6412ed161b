"""`hookwise webhooks sign --private-key-file`: the private-key schemes signed with a key pair
made for the test, checked by the providers' own verifiers (PyNaCl for Discord's Ed25519, the
sendgrid library's EventWebhook helper) and by hookwise's verifier for Standard Webhooks v1a."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import attrs
import nacl.signing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from sendgrid.helpers.eventwebhook import EventWebhook

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import VerifyConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.signatures import compile_verifier
from tests.cli.support import run

BODY = b'{"type":2,"id":"1"}'


def _pem(key: object, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(  # type: ignore[attr-defined]
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _sign(tmp_path: Path, scheme: str, key_file: Path) -> dict[str, str]:
    (tmp_path / "body.json").write_bytes(BODY)
    r = run("webhooks", "sign", "--scheme", scheme, "--private-key-file", str(key_file),
            "--payload", str(tmp_path / "body.json"), "--id", "msg_1", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return dict(line.split(": ", 1) for line in r.stdout.splitlines())


def test_discord_is_signed_with_an_ed25519_key(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    headers = _sign(tmp_path, "discord", _pem(key, tmp_path / "k.pem"))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    verify_key = nacl.signing.VerifyKey(raw)
    stamp = headers["X-Signature-Timestamp"].encode()
    verify_key.verify(stamp + BODY, bytes.fromhex(headers["X-Signature-Ed25519"]))


def test_sendgrid_is_signed_with_an_ecdsa_p256_key(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    headers = _sign(tmp_path, "sendgrid", _pem(key, tmp_path / "k.pem"))
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    helper = EventWebhook()
    public = helper.convert_public_key_to_ecdsa(base64.b64encode(der).decode())
    sig = headers["X-Twilio-Email-Event-Webhook-Signature"]
    stamp = headers["X-Twilio-Email-Event-Webhook-Timestamp"]
    assert helper.verify_signature(BODY.decode(), sig, stamp, public)
    assert not helper.verify_signature(BODY.decode() + " ", sig, stamp, public)


def test_standard_webhooks_v1a_is_signed_with_an_ed25519_key(tmp_path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    headers = _sign(tmp_path, "standard-webhooks", _pem(key, tmp_path / "k.pem"))
    assert headers["webhook-id"] == "msg_1" and headers["webhook-signature"].startswith("v1a,")
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    block = {"scheme": "standard-webhooks", "publicKey": "whpk_" + base64.b64encode(raw).decode()}
    verifier = compile_verifier(structure(block, VerifyConfig), tmp_path, "v")
    request = InboundRequest(
        path="x",
        payload=json.loads(BODY),
        headers={k.lower(): v for k, v in headers.items()},
        raw_body=BODY,
        now=datetime.now(UTC),
    )
    verifier.verify(request)
    other = ed25519.Ed25519PrivateKey.generate()
    forged = _sign(tmp_path, "standard-webhooks", _pem(other, tmp_path / "o.pem"))
    import pytest

    from hookwise.engine.signatures import SignatureError

    with pytest.raises(SignatureError):
        verifier.verify(attrs.evolve(request, headers={k.lower(): v for k, v in forged.items()}))


def test_a_private_key_scheme_without_a_key_says_how_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "body.json").write_bytes(BODY)
    r = run("webhooks", "sign", "--scheme", "sendgrid", "--secret", "x",
            "--payload", str(tmp_path / "body.json"), cwd=tmp_path)  # fmt: skip
    assert r.returncode != 0 and "--private-key-file" in r.stderr
