"""Signed mapped hooks through the real server: a valid signature is dispatched, a bad one is
401 `invalid_signature` naming the rule and stores nothing, and no secret reaches the log.

The GitHub mapping is in `hooks.mappings` (its `${ENV}` secret resolved by the config loader);
the Stripe and Standard Webhooks rules are in a rule file (its `${ENV}` resolved by the rule
compiler from the environment the server was started with, its `secretFile` next to it)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.support.gateway import GatewayProcess, base_config
from tests.support.wait import eventually

GITHUB_SECRET = "gh-webhook-secret-3b8f1c7d2e"
STRIPE_SECRET = "whsec_stripe-test-9a4e6b2c1d"
SW_KEY = b"hookwise-standard-webhooks-key-0"
SW_SECRET = "whsec_" + base64.b64encode(SW_KEY).decode()

RULES = [
    {
        "id": "stripe",
        "match": {"path": "stripe"},
        "messageTemplate": "Stripe {{type}}",
        "verify": {"scheme": "stripe", "secret": "${STRIPE_WEBHOOK_SECRET}", "tolerance": "5m"},
    },
    {
        "id": "svix",
        "match": {"path": "svix"},
        "action": "wake",
        "textTemplate": "Svix {{type}}",
        "verify": {"scheme": "standard-webhooks", "secretFile": "secrets/svix"},
    },
]


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, start_module_gateway: Callable[..., GatewayProcess]
) -> GatewayProcess:
    workdir = tmp_path_factory.mktemp("signatures")
    (workdir / "rules" / "secrets").mkdir(parents=True)
    (workdir / "rules" / "secrets" / "svix").write_text(SW_SECRET + "\n")
    (workdir / "rules" / "signed.yaml").write_text(yaml.safe_dump(RULES))
    config = base_config(
        rules=["rules/signed.yaml"],
        mappings=[
            {
                "id": "github",
                "match": {"path": "github"},
                "sessionKey": "hook:github:{{repository.full_name}}",
                "messageTemplate": "{{action}} in {{repository.full_name}}",
                "verify": {"scheme": "github", "secret": "${GITHUB_WEBHOOK_SECRET}"},
            }
        ],
    )
    env = {"GITHUB_WEBHOOK_SECRET": GITHUB_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}
    return start_module_gateway(config, env=env, workdir=workdir)


def _mac(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).digest()


def _body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def post(gw: GatewayProcess, name: str, body: bytes, headers: dict[str, str]) -> Any:
    return gw.hook(name, content=body, headers={"Content-Type": "application/json", **headers})


def github_headers(body: bytes, secret: str = GITHUB_SECRET) -> dict[str, str]:
    return {
        "X-GitHub-Event": "issues",
        "X-Hub-Signature-256": "sha256=" + _mac(secret.encode(), body).hex(),
    }


def stripe_headers(body: bytes, t: int) -> dict[str, str]:
    v1 = _mac(STRIPE_SECRET.encode(), f"{t}.".encode() + body).hex()
    return {"Stripe-Signature": f"t={t},v1={v1}"}


def svix_headers(body: bytes, msg_id: str, ts: int) -> dict[str, str]:
    sig = base64.b64encode(_mac(SW_KEY, f"{msg_id}.{ts}.".encode() + body)).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": f"v1,{sig}"}


def runs_of(gw: GatewayProcess, rule: str) -> list[dict[str, Any]]:
    return [r for r in gw.admin("/api/runs", limit=500)["items"] if r["rule"] == rule]


def events_of(gw: GatewayProcess, rule: str) -> list[dict[str, Any]]:
    return [e for e in gw.admin("/api/events", limit=500)["items"] if e["source"] == f"hook:{rule}"]


def stored(gw: GatewayProcess) -> int:
    """Runs and events created by hooks (not the summaries the runtime adds after each run)."""
    runs = gw.admin("/api/runs", limit=500)["items"]
    events = gw.admin("/api/events", limit=500)["items"]
    return len(runs) + sum(1 for e in events if e["source"].startswith("hook"))


GITHUB_PAYLOAD = {"action": "opened", "repository": {"full_name": "acme/gateway"}}


def test_a_github_signed_request_is_accepted_and_its_run_stored(gw: GatewayProcess) -> None:
    body = _body(GITHUB_PAYLOAD)
    r = post(gw, "github", body, github_headers(body))
    assert r.status_code == 202, r.text
    assert r.json()["rule"] == "github"
    [run] = [x for x in runs_of(gw, "github") if x["runId"] == r.json()["runId"]]
    assert run["sessionKey"] == "hook:github:acme/gateway"


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"X-GitHub-Event": "issues"}, "the X-Hub-Signature-256 header is missing"),
        (
            {"X-Hub-Signature-256": "sha256=" + "0" * 64},
            "the X-Hub-Signature-256 signature does not match the body and the configured secret",
        ),
        (
            {"X-Hub-Signature-256": "sha1=abc"},
            "the X-Hub-Signature-256 header is not of the form sha256=<64 hex digits>",
        ),
    ],
    ids=["missing", "wrong", "malformed"],
)
def test_a_bad_github_signature_is_401_and_stores_nothing(
    gw: GatewayProcess, headers: dict[str, str], problem: str
) -> None:
    before = stored(gw)
    r = post(gw, "github", _body(GITHUB_PAYLOAD), headers)
    assert r.status_code == 401, r.text
    assert r.json() == {
        "ok": False,
        "code": "invalid_signature",
        "rule": "github",
        "error": f"rule 'github': github signature check failed: {problem}",
    }
    assert stored(gw) == before


def test_a_body_changed_after_signing_is_401(gw: GatewayProcess) -> None:
    before = len(runs_of(gw, "github"))
    signed = _body(GITHUB_PAYLOAD)
    tampered = _body({**GITHUB_PAYLOAD, "action": "deleted"})
    r = post(gw, "github", tampered, github_headers(signed))
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"
    assert len(runs_of(gw, "github")) == before


def test_a_refused_signature_is_in_the_request_log_with_its_rule(gw: GatewayProcess) -> None:
    r = post(gw, "github", b"{}", github_headers(b"{}", secret="not-the-secret"))
    assert r.status_code == 401

    def refused() -> list[dict[str, Any]]:
        items = gw.admin("/api/requests", limit=500)["items"]
        return [e for e in items if e["path"] == "/hooks/github" and e["status"] == 401]

    entry = eventually(refused, what="the refused request in the log")[0]
    assert (entry["code"], entry["rule"]) == ("invalid_signature", "github")


def test_stripe_with_a_valid_signature_is_accepted(gw: GatewayProcess) -> None:
    body = _body({"type": "invoice.payment_failed"})
    r = post(gw, "stripe", body, stripe_headers(body, int(time.time())))
    assert r.status_code == 202, r.text
    assert r.json()["runId"] in [x["runId"] for x in runs_of(gw, "stripe")]


def test_stripe_with_a_stale_timestamp_is_401(gw: GatewayProcess) -> None:
    before = stored(gw)
    body = _body({"type": "invoice.payment_failed"})
    r = post(gw, "stripe", body, stripe_headers(body, int(time.time()) - 600))
    assert r.status_code == 401, r.text
    body_json = r.json()
    assert (body_json["code"], body_json["rule"]) == ("invalid_signature", "stripe")
    assert "stripe signature check failed: the signed timestamp is" in body_json["error"]
    assert "more than the 300 s tolerance" in body_json["error"]
    assert stored(gw) == before


def test_standard_webhooks_with_a_valid_signature_is_accepted(gw: GatewayProcess) -> None:
    body = _body({"type": "user.created"})
    r = post(
        gw, "svix", body, svix_headers(body, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", int(time.time()))
    )
    assert r.status_code == 200, r.text
    [event] = [e for e in events_of(gw, "svix") if e["eventId"] == r.json()["eventId"]]
    assert event["text"] == "Svix user.created"


def test_standard_webhooks_signed_with_another_key_is_401(gw: GatewayProcess) -> None:
    before = len(events_of(gw, "svix"))
    body = _body({"type": "user.created"})
    headers = svix_headers(body, "msg_1", int(time.time()))
    headers["webhook-signature"] = (
        "v1," + base64.b64encode(_mac(b"another-key", b"msg_1." + body)).decode()
    )
    r = post(gw, "svix", body, headers)
    assert r.status_code == 401
    assert r.json()["rule"] == "svix" and r.json()["code"] == "invalid_signature"
    assert len(events_of(gw, "svix")) == before


def test_no_secret_or_signature_reaches_the_log(gw: GatewayProcess) -> None:
    body = _body(GITHUB_PAYLOAD)
    good = github_headers(body)["X-Hub-Signature-256"]
    bad = github_headers(body, secret="wrong-secret-value")["X-Hub-Signature-256"]
    assert post(gw, "github", body, {"X-Hub-Signature-256": good}).status_code == 202
    assert post(gw, "github", body, {"X-Hub-Signature-256": bad}).status_code == 401
    log = gw.stderr()
    assert "startup complete" in log  # the server's real log, not an empty file
    for secret in (GITHUB_SECRET, STRIPE_SECRET, SW_SECRET, good[7:], bad[7:]):
        assert secret not in log


def test_a_bad_verify_block_stops_the_server_at_start_with_its_key_path(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    secret = "not-a-whsec-secret-5d2a9c"
    config = base_config(
        mappings=[
            {
                "id": "svix",
                "messageTemplate": "m",
                "verify": {"scheme": "standard-webhooks", "secret": secret},
            }
        ]
    )
    with pytest.raises(RuntimeError) as caught:
        start_gateway(config)
    log = str(caught.value)
    assert "rule 'svix': hooks.mappings[0].verify.secret: a standard-webhooks secret must " in log
    assert secret not in log
