"""In-process cost of signature verification per scheme (CPU time per verified request).

Run: `.venv/bin/python bench/signatures.py [--n 2000]`. For every shared-secret scheme, a 4 KiB
JSON body is signed with `hookwise.engine.signatures.sign.sign` and verified `n` times; Discord
(Ed25519) and SendGrid (ECDSA P-256) are signed with their private keys. Prints CPU µs per verify
(process time, so other load on the machine disturbs it less than wall time) and the ratio to the
cheapest scheme. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import VerifyConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.signatures import NAMES, compile_verifier
from hookwise.engine.signatures.sign import sign

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BODY = json.dumps(
    {"id": "evt_1", "webhookTimestamp": int(NOW.timestamp() * 1000), "data": "x" * 4000}
).encode()
URL = "https://hooks.example.com/hooks/x?token=t"


def _shared(scheme: str) -> tuple[Any, dict[str, str], str]:
    block: dict[str, Any] = {"scheme": scheme, "secret": "a-shared-secret-for-the-bench"}
    if scheme in ("standard-webhooks", "svix"):
        block["secret"] = "whsec_" + base64.b64encode(b"k" * 32).decode()
    if scheme in ("hmac", "hmac-sha256"):
        block["header"] = "X-Sig"
    verifier = compile_verifier(structure(block, VerifyConfig), Path.cwd(), "v")
    signed = sign(verifier, BODY, now=NOW, delivery_id="d-1", url=URL)
    return verifier, signed.headers, signed.url or URL


def _discord() -> tuple[Any, dict[str, str], str]:
    key = ed25519.Ed25519PrivateKey.from_private_bytes(b"p" * 32)
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    block = {"scheme": "discord", "publicKey": public.hex()}
    verifier = compile_verifier(structure(block, VerifyConfig), Path.cwd(), "v")
    ts = str(int(NOW.timestamp()))
    sig = key.sign(ts.encode() + BODY).hex()
    return verifier, {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": ts}, URL


def _sendgrid() -> tuple[Any, dict[str, str], str]:
    key = ec.derive_private_key(12345, ec.SECP256R1())
    der = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    block = {"scheme": "sendgrid", "publicKey": base64.b64encode(der).decode()}
    verifier = compile_verifier(structure(block, VerifyConfig), Path.cwd(), "v")
    ts = str(int(NOW.timestamp()))
    sig = base64.b64encode(key.sign(ts.encode() + BODY, ec.ECDSA(hashes.SHA256()))).decode()
    headers = {
        "X-Twilio-Email-Event-Webhook-Signature": sig,
        "X-Twilio-Email-Event-Webhook-Timestamp": ts,
    }
    return verifier, headers, URL


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    cases: dict[str, tuple[Any, dict[str, str], str]] = {}
    for scheme in NAMES:
        if scheme in ("discord", "sendgrid", "mailgun", "msgraph"):
            continue
        cases[scheme] = _shared(scheme)
    cases["discord"] = _discord()
    cases["sendgrid"] = _sendgrid()
    figures: dict[str, float] = {}
    for scheme, (verifier, headers, url) in cases.items():
        request = InboundRequest(
            path="x",
            payload={},
            headers={k.lower(): v for k, v in headers.items()},
            raw_body=BODY,
            now=NOW,
            url=url,
        )
        verifier.verify(request)  # warm, and a check that it verifies
        start = time.process_time()
        for _ in range(n):
            verifier.verify(request)
        figures[scheme] = (time.process_time() - start) / n * 1e6
    cheapest = min(figures.values())
    print(f"signature verification, {len(BODY)} B body, {n} verifies each (CPU µs per verify)")
    for scheme, us in sorted(figures.items(), key=lambda kv: kv[1]):
        print(f"  {scheme:<18} {us:8.1f} µs   x{us / cheapest:5.1f}")
    print("BENCH_JSON " + json.dumps({k: round(v, 2) for k, v in figures.items()}))


if __name__ == "__main__":
    main()
