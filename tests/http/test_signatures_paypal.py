"""PayPal through the real server: a delivery signed with a certificate's private key, the
certificate fetched from the `PAYPAL-CERT-URL` the delivery names, as PayPal documents its
self-verification (https://developer.paypal.com/api/rest/webhooks/rest/#link-selfverificationmethod:
`transmission id|transmission time|webhook id|CRC32 of the body`, SHA256withRSA). PayPal's
certificates cannot be fetched here, and its Python SDKs verify by calling PayPal's API: the
certificate is made for the test and served locally (the block's `keysUrl`)."""

from __future__ import annotations

import base64
import json
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import VerifyConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.signatures import SignatureError, compile_verifier
from hookwise.engine.signatures.paypal import certificate
from tests.http.test_signatures_sns import KEY, OTHER, _cert
from tests.support.documents import serving
from tests.support.gateway import REPO, GatewayProcess, base_config

WEBHOOK_ID = "1JE4291016473214C"
HITS: dict[str, int] = {}


@pytest.fixture(scope="module")
def cert_url() -> Iterator[str]:
    with serving(lambda path: (200, _cert(KEY), {}), HITS) as url:
        yield url + "/v1/notifications/certs/CERT-360caa42"


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess], cert_url: str) -> GatewayProcess:
    verify = {"scheme": "paypal", "webhookId": WEBHOOK_ID, "keysUrl": cert_url.rsplit("/v1", 1)[0],
              "auth": "signature"}  # fmt: skip
    mapping = {"id": "paypal", "match": {"path": "paypal"}, "action": "wake",
               "textTemplate": "{{ payload.event_type }}", "verify": verify}  # fmt: skip
    return start_module_gateway(base_config(mappings=[mapping]))


def deliver(
    gw: GatewayProcess, cert_url: str, *, key: Any = KEY, webhook_id: str = WEBHOOK_ID,
    body: bytes | None = None, event: str | None = None, sent: bytes | None = None,
) -> Any:  # fmt: skip
    event = event or f"WH-{time.time_ns()}"
    body = body or json.dumps({"id": event, "event_type": "PAYMENT.CAPTURE.COMPLETED"}).encode()
    tid = f"t-{time.time_ns()}"
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    signed = f"{tid}|{stamp}|{webhook_id}|{zlib.crc32(body)}".encode()
    sig = base64.b64encode(key.sign(signed, padding.PKCS1v15(), hashes.SHA256())).decode()
    headers = {
        "Content-Type": "application/json",
        "PAYPAL-TRANSMISSION-ID": tid,
        "PAYPAL-TRANSMISSION-TIME": stamp,
        "PAYPAL-TRANSMISSION-SIG": sig,
        "PAYPAL-CERT-URL": cert_url,
        "PAYPAL-AUTH-ALGO": "SHA256withRSA",
    }
    assert gw.client is not None
    return gw.client.post("/hooks/paypal", content=sent or body, headers=headers)


def test_a_signed_delivery_is_accepted_and_a_retry_replayed(
    gw: GatewayProcess, cert_url: str
) -> None:
    event = f"WH-{time.time_ns()}"
    assert deliver(gw, cert_url, event=event).status_code == 200
    again = deliver(gw, cert_url, event=event)  # a retry: new transmission, same event id
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"


@pytest.mark.parametrize(
    "change",
    [
        {"key": OTHER},
        {"webhook_id": "ANOTHER-WEBHOOK"},
        {"sent": b'{"id": "WH-1", "event_type": "PAYMENT.CAPTURE.REFUNDED"}'},
    ],
    ids=["other-key", "other-webhook", "other-body"],
)
def test_a_delivery_that_does_not_check_is_401(
    gw: GatewayProcess, cert_url: str, change: dict[str, Any]
) -> None:
    r = deliver(gw, cert_url, **change)
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"


def _verifier() -> Any:
    config = structure({"scheme": "paypal", "webhookId": WEBHOOK_ID}, VerifyConfig)
    return compile_verifier(config, REPO, "v")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fc2c3b8c", True),
        ("https://api-m.sandbox.paypal.com/v1/notifications/certs/CERT-1", True),
        ("https://api.paypal.com.evil.example/certs/CERT-1", False),
        ("http://api.paypal.com/v1/notifications/certs/CERT-1", False),
        ("https://evil.example/api.paypal.com/", False),
    ],
)
def test_only_paypal_certificate_urls_are_fetched_by_default(url: str, ok: bool) -> None:
    request = InboundRequest(path="p", payload={}, headers={"paypal-cert-url": url})
    if ok:
        assert certificate(_verifier(), request) == (url,)
    else:
        with pytest.raises(SignatureError, match="PAYPAL-CERT-URL"):
            certificate(_verifier(), request)
