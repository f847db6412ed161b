"""Amazon SNS through the real server: messages signed with a certificate's private key, the
certificate fetched from the URL the message names, the topic checked, and the
`SubscriptionConfirmation` handshake confirmed by visiting its `SubscribeURL`.

AWS publishes no verifier for Python, and its certificates cannot be fetched here: the
messages are signed as AWS documents it (https://docs.aws.amazon.com/sns/latest/dg/
sns-verify-signature-of-message.html: the type's fields, `name\\nvalue\\n` each, RSA with
SHA-1 for SignatureVersion 1 and SHA-256 for 2) with a certificate made for the test, served
by a local server that the block's `keysUrl` names (in place of `https://sns.<region>.amazonaws.com/`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from hookwise.engine.config.convert import structure
from hookwise.engine.config.mapping import VerifyConfig
from hookwise.engine.request import InboundRequest
from hookwise.engine.signatures import SignatureError, compile_verifier
from hookwise.engine.signatures.sns import certificate
from tests.support.documents import serving
from tests.support.gateway import REPO, GatewayProcess, base_config
from tests.support.wait import eventually

TOPIC = "arn:aws:sns:us-east-1:123456789012:alerts"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _cert(key: Any) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


HITS: dict[str, int] = {}


def _route(path: str) -> tuple[int, bytes, dict[str, str]]:
    return 200, _cert(KEY) if path == "/cert.pem" else b"<ConfirmSubscriptionResponse/>", {}


@pytest.fixture(scope="module")
def sns_url() -> Iterator[str]:
    with serving(_route, HITS) as url:
        yield url + "/"


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess], sns_url: str) -> GatewayProcess:
    verify = {"scheme": "sns", "topics": [TOPIC], "keysUrl": sns_url, "auth": "signature"}
    mapping = {"id": "sns", "match": {"path": "sns"}, "action": "wake",
               "textTemplate": "{{ payload.Subject }}", "verify": verify}  # fmt: skip
    return start_module_gateway(base_config(mappings=[mapping]))


FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
    ),
}  # fmt: skip


def message(
    sns_url: str,
    kind: str = "Notification",
    *,
    key: Any = KEY,
    version: str = "2",
    topic: str = TOPIC,
    cert_url: str | None = None,
    **fields: str,
) -> dict[str, str]:
    """A message as SNS sends it, signed as AWS documents."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    data = {
        "Type": kind,
        "MessageId": f"mid-{time.time_ns()}",
        "TopicArn": topic,
        "Subject": "disk full",
        "Message": '{"host": "db-1"}',
        "Timestamp": stamp,
        "SignatureVersion": version,
        "SigningCertURL": cert_url or sns_url + "cert.pem",
        **fields,
    }
    if kind != "Notification":
        data.pop("Subject")
        data.setdefault("Token", "tok-123")
        data.setdefault("SubscribeURL", f"{sns_url}confirm?Action=ConfirmSubscription&Token=t")
    signed = "".join(f"{k}\n{data[k]}\n" for k in FIELDS[kind] if k in data).encode()
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()
    data["Signature"] = base64.b64encode(key.sign(signed, padding.PKCS1v15(), digest)).decode()
    return data


def post(gw: GatewayProcess, data: dict[str, str]) -> Any:
    headers = {
        "Content-Type": "text/plain; charset=UTF-8",  # as SNS sends it
        "x-amz-sns-message-type": data["Type"],
        "x-amz-sns-message-id": data["MessageId"],
        "x-amz-sns-topic-arn": data["TopicArn"],
    }
    assert gw.client is not None
    return gw.client.post("/hooks/sns", content=json.dumps(data).encode(), headers=headers)


def events(gw: GatewayProcess) -> int:
    return sum(1 for e in gw.admin("/api/events", limit=500)["items"] if e["source"] == "hook:sns")


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_signed_notification_is_accepted_and_a_retry_replayed(
    gw: GatewayProcess, sns_url: str, version: str
) -> None:
    before = events(gw)
    data = message(sns_url, version=version)
    r = post(gw, data)
    assert r.status_code == 200, r.text
    assert events(gw) == before + 1
    again = post(gw, data)  # SNS retries with the same message id
    assert again.headers["idempotent-replayed"] == "true" and events(gw) == before + 1


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: {**d, "Message": "forged"}, "does not match"),
        (lambda d: {**d, "Subject": "other"}, "does not match"),
        (lambda d: {**d, "SignatureVersion": "3"}, "SignatureVersion"),
        (lambda d: {**d, "SigningCertURL": "http://127.0.0.2/cert.pem"}, "SigningCertURL"),
    ],
    ids=["message", "subject", "version", "cert-url"],
)
def test_a_changed_message_is_401(gw: GatewayProcess, sns_url: str, change: Any, why: str) -> None:
    before = events(gw)
    r = post(gw, change(message(sns_url)))
    assert r.status_code == 401 and why in r.json()["error"], r.text
    assert events(gw) == before


def test_another_key_or_topic_is_401(gw: GatewayProcess, sns_url: str) -> None:
    r = post(gw, message(sns_url, key=OTHER))
    assert r.status_code == 401 and "does not match" in r.json()["error"]
    r = post(gw, message(sns_url, topic="arn:aws:sns:us-east-1:999999999999:theirs"))
    assert r.status_code == 401 and "topic" in r.json()["error"]


def test_the_certificate_is_fetched_once(gw: GatewayProcess, sns_url: str) -> None:
    assert post(gw, message(sns_url)).status_code == 200
    fetched = HITS["/cert.pem"]
    for _ in range(3):
        assert post(gw, message(sns_url)).status_code == 200
    assert HITS["/cert.pem"] == fetched


def test_a_subscription_confirmation_is_confirmed_by_visiting_its_url(
    gw: GatewayProcess, sns_url: str
) -> None:
    before = HITS.get("/confirm", 0)
    forged = message(sns_url, "SubscriptionConfirmation", key=OTHER)
    assert post(gw, forged).status_code == 401
    assert HITS.get("/confirm", 0) == before  # nothing visited for a forged one
    other_topic = message(sns_url, "SubscriptionConfirmation", topic=TOPIC + "-x")
    assert post(gw, other_topic).status_code == 401
    assert HITS.get("/confirm", 0) == before
    count = events(gw)
    r = post(gw, message(sns_url, "SubscriptionConfirmation"))
    assert r.status_code == 200, r.text
    assert HITS["/confirm"] == before + 1
    assert events(gw) == count  # a handshake is answered, never dispatched

    def confirmations() -> list[dict[str, Any]]:
        items = gw.admin("/api/requests", limit=500)["items"]
        return [i for i in items if i["action"] == "handshake" and i["path"] == "/hooks/sns"]

    entry = eventually(confirmations, what="the confirmation in the request log")[0]
    assert entry["code"] == "sns_subscription_confirmation"


def _verifier(**block: Any) -> Any:
    config = structure({"scheme": "sns", "topics": [TOPIC], **block}, VerifyConfig)
    return compile_verifier(config, REPO, "v")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem", True),
        ("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-abc.pem", True),
        ("https://sns.us-east-1.amazonaws.com.evil.example/x.pem", False),
        ("http://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem", False),
        ("https://evil.example/sns.us-east-1.amazonaws.com/x.pem", False),
        ("https://sns.us-east-1.amazonaws.com/x.pem?redirect=https://evil.example", False),
        ("https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-abc.pem", True),
        ("https://sns.ap-southeast-2.amazonaws.com/SimpleNotificationService-abc.pem", True),
        # S3 bucket hosts: whoever owns a bucket named `sns` could sign for any topic
        ("https://sns.s3.amazonaws.com/x.pem", False),
        ("https://sns.s3-us-west-2.amazonaws.com/x.pem", False),
        ("https://sns.s3.us-west-2.amazonaws.com/x.pem", False),
        # the partition's suffix goes with its regions
        ("https://sns.cn-north-1.amazonaws.com/x.pem", False),
        ("https://sns.us-east-1.amazonaws.com.cn/x.pem", False),
        # what parsers read differently: userinfo, ports, control characters, spaces
        ("https://sns.us-east-1.amazonaws.com@evil.example/x.pem", False),
        ("https://evil.example@sns.us-east-1.amazonaws.com/x.pem", False),
        ("https://sns.us-east-1.amazonaws.com:8443/x.pem", False),
        ("https://sns.us-east-1.amazonaws.com/x.pem\n", False),
        ("https://sns.us-east-1.amazonaws.com/x\r\n.pem", False),
        ("https://sns.us-east-1.amazonaws.com/x .pem", False),
        ("https://sns.us-east-1.amazonaws.com\\@evil.example/x.pem", False),
    ],
)
def test_only_sns_certificate_urls_are_fetched_by_default(url: str, ok: bool) -> None:
    data = json.dumps({"Type": "Notification", "SigningCertURL": url}).encode()
    request = InboundRequest(path="sns", payload={}, raw_body=data)
    if ok:
        assert certificate(_verifier(), request) == (url,)
    else:
        with pytest.raises(SignatureError, match="SigningCertURL"):
            certificate(_verifier(), request)


@pytest.mark.parametrize(
    ("keys_url", "url", "ok"),
    [
        ("https://keys.example.test", "https://keys.example.test/x.pem", True),
        ("https://keys.example.test", "https://keys.example.test.evil.test/x.pem", False),
        ("https://keys.example.test", "https://keys.example.test@127.0.0.1:8443/x.pem", False),
        ("https://keys.example.test", "https://keys.example.test:8443/x.pem", False),
        ("https://keys.example.test", "http://keys.example.test/x.pem", False),
        ("https://keys.example.test/sns", "https://keys.example.test/sns/x.pem", True),
        ("https://keys.example.test/sns", "https://keys.example.test/sns-evil/x.pem", False),
        ("https://keys.example.test/sns/", "https://keys.example.test/sns/../x.pem", False),
        ("https://keys.example.test/sns/", "https://keys.example.test/sns/%2e%2e/x.pem", False),
        ("https://KEYS.example.test", "https://keys.EXAMPLE.test/x.pem", True),
        ("https://keys.example.test:443", "https://keys.example.test/x.pem", True),
        ("http://127.0.0.1:4567", "http://127.0.0.1:45671/x.pem", False),
    ],
)
def test_a_keys_url_is_compared_part_by_part_never_as_a_prefix(
    keys_url: str, url: str, ok: bool
) -> None:
    data = json.dumps({"Type": "Notification", "SigningCertURL": url}).encode()
    request = InboundRequest(path="sns", payload={}, raw_body=data)
    if ok:
        assert certificate(_verifier(keysUrl=keys_url), request) == (url,)
    else:
        with pytest.raises(SignatureError, match="SigningCertURL"):
            certificate(_verifier(keysUrl=keys_url), request)


@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\x00", "\t"])
def test_a_control_character_in_the_cert_url_is_a_json_401_not_a_500(
    gw: GatewayProcess, sns_url: str, suffix: str
) -> None:
    before = dict(HITS)
    r = post(gw, message(sns_url, cert_url=sns_url + "cert.pem" + suffix))
    assert r.status_code == 401, r.text
    body = r.json()
    assert body["ok"] is False and body["code"] == "invalid_signature"
    assert "SigningCertURL" in body["error"]
    assert HITS.get("/cert.pem", 0) == before.get("/cert.pem", 0)


def test_sns_needs_its_topics() -> None:
    from hookwise.engine.errors import ConfigError

    with pytest.raises(ConfigError, match="topics"):
        compile_verifier(structure({"scheme": "sns"}, VerifyConfig), REPO, "v")
