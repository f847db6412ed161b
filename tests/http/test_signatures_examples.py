"""The worked provider examples (rules/examples: Slack events, Shopify orders, Twilio SMS, Discord
interactions) with their commented `verify` blocks switched on, through the real server, signed by
the providers' own libraries; and the tools: `hookwise webhooks sign` output accepted by the
server, `hookwise rules test --sign` running a sample through verification.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl

import nacl.signing
import pytest
import yaml
from slack_sdk.signature import SignatureVerifier
from twilio.request_validator import RequestValidator

from tests.support.gateway import HOOK_TOKEN, REPO, GatewayProcess, base_config

EXAMPLES = REPO / "rules" / "examples"
NAMES = ("slack", "shopify", "twilio", "discord")
DISCORD_KEY = nacl.signing.SigningKey(b"e" * 32)
ENV = {
    "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
    "SHOPIFY_WEBHOOK_SECRET": "shpss_0123456789abcdef",
    "TWILIO_AUTH_TOKEN": "0123456789abcdef0123456789abcdef",
    "DISCORD_PUBLIC_KEY": bytes(DISCORD_KEY.verify_key).hex(),
}
TWILIO_PUBLIC = "https://hooks.example.com/hooks/twilio"  # the example's publicUrl


def uncommented(path: Path) -> str:
    """The rule file with its commented `verify:` block switched on."""
    out, inside = [], False
    for line in path.read_text().splitlines():
        m = re.match(r"^(\s*)# (verify:.*)$", line)
        sub = re.match(r"^(\s*)#   (\S.*)$", line)
        if m:
            out.append(m.group(1) + m.group(2))
            inside = True
        elif inside and sub:
            out.append(sub.group(1) + "  " + sub.group(2))
        else:
            out.append(line)
            inside = False
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("provider-examples")
    for name in NAMES:
        text = uncommented(EXAMPLES / f"{name}.yaml")
        assert "\n  verify:\n" in text, name
        (folder / f"{name}.yaml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def gw(workdir: Path, start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = base_config(rules=[f"{n}.yaml" for n in NAMES])
    return start_module_gateway(config, env=ENV, workdir=workdir)


def slack_headers(body: bytes, secret: str = ENV["SLACK_SIGNING_SECRET"]) -> dict[str, str]:
    ts = str(int(time.time()))
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert sig is not None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig}


def test_slack_example(gw: GatewayProcess) -> None:
    event = json.loads((EXAMPLES / "slack-app-mention.json").read_text())
    event["event_id"] = f"Ev{time.time_ns()}"
    body = json.dumps(event).encode()
    headers = {"Content-Type": "application/json", **slack_headers(body)}
    r = gw.hook("slack", content=body, token=None, headers=headers)  # auth: signature
    assert (r.status_code, r.json()) == (200, {"ok": True})
    runs = [x for x in gw.admin("/api/runs", limit=100)["items"] if x["rule"] == "slack-mention"]
    assert [x["sessionKey"] for x in runs] == ["hook:slack:C123ABC456"]
    # Slack's retry (X-Slack-Retry-Num, re-signed) of the same event_id runs nothing again
    retry = gw.hook(
        "slack", content=body, token=None, headers={**headers, "X-Slack-Retry-Num": "1"}
    )
    assert retry.headers["idempotent-replayed"] == "true"
    assert (
        len([x for x in gw.admin("/api/runs", limit=100)["items"] if x["rule"] == "slack-mention"])
        == 1
    )
    challenge = json.dumps({"type": "url_verification", "challenge": "c-123"}).encode()
    r = gw.hook("slack", content=challenge, token=None, headers=slack_headers(challenge))
    assert (r.status_code, r.text) == (200, "c-123")
    bad = gw.hook("slack", content=body, token=None, headers=slack_headers(body, "wrong"))
    assert bad.status_code == 401


def test_shopify_example(gw: GatewayProcess) -> None:
    body = (EXAMPLES / "shopify-order.json").read_bytes()
    mac = hmac.new(ENV["SHOPIFY_WEBHOOK_SECRET"].encode(), body, hashlib.sha256).digest()
    headers = {
        "Content-Type": "application/json",
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Hmac-Sha256": base64.b64encode(mac).decode(),
        "X-Shopify-Webhook-Id": f"b54557e4-{time.time_ns()}",
    }
    r = gw.hook("shopify", content=body, headers=headers)
    assert r.status_code == 202, r.text
    [run] = [
        x for x in gw.admin("/api/runs", limit=100)["items"] if x["runId"] == r.json()["runId"]
    ]
    assert run["sessionKey"] == "hook:shopify:115310627314723954"
    r = gw.hook("shopify", content=body.replace(b"403.00", b"4.03"), headers=headers)
    assert r.status_code == 401


def test_twilio_example(gw: GatewayProcess) -> None:
    body = (EXAMPLES / "twilio-sms.txt").read_bytes()
    params = dict(parse_qsl(body.decode(), keep_blank_values=True))  # Twilio signs empty ones too
    # behind the proxy, Twilio calls the public URL (with the token); publicUrl says which
    signed_url = f"{TWILIO_PUBLIC}?token={HOOK_TOKEN}"
    sig = RequestValidator(ENV["TWILIO_AUTH_TOKEN"]).compute_signature(signed_url, params)
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Twilio-Signature": sig,
        "I-Twilio-Idempotency-Token": f"tw-{time.time_ns()}",
    }
    assert gw.client is not None
    r = gw.client.post("/hooks/twilio", params={"token": HOOK_TOKEN}, content=body, headers=headers)
    assert r.status_code == 204, r.text
    runs = [x for x in gw.admin("/api/runs", limit=100)["items"] if x["rule"] == "twilio-sms"]
    assert [x["sessionKey"] for x in runs] == ["hook:sms:+15551234567"]
    forged = body.replace(b"deploy", b"delete")
    r = gw.client.post(
        "/hooks/twilio", params={"token": HOOK_TOKEN}, content=forged, headers=headers
    )
    assert r.status_code == 401


def test_discord_example(gw: GatewayProcess) -> None:
    def signed(payload: dict[str, object]) -> tuple[bytes, dict[str, str]]:
        body = json.dumps(payload).encode()
        ts = str(int(time.time()))
        sig = DISCORD_KEY.sign(ts.encode() + body).signature.hex()
        return body, {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": ts}

    body, headers = signed({"type": 1, "id": "1", "application_id": "2", "version": 1})
    r = gw.hook("discord", content=body, token=None, headers=headers)
    assert (r.status_code, r.json()) == (200, {"type": 1})
    interaction = json.loads((EXAMPLES / "discord-interaction.json").read_text())
    body, headers = signed(interaction)
    r = gw.hook("discord", content=body, token=None, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {"type": 4, "data": {"content": "Working on it, ada."}}
    r = gw.hook(
        "discord", content=body, token=None, headers={**headers, "X-Signature-Timestamp": "1"}
    )
    assert r.status_code == 401


def _cli(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_webhooks_sign_output_is_accepted_by_the_server(gw: GatewayProcess, tmp_path: Path) -> None:
    (tmp_path / "secret").write_text(ENV["SHOPIFY_WEBHOOK_SECRET"] + "\n")
    payload = EXAMPLES / "shopify-order.json"
    r = _cli("webhooks", "sign", "--scheme", "shopify", "--secret-file", str(tmp_path / "secret"),
             "--payload", str(payload))  # fmt: skip
    assert r.returncode == 0, r.stderr
    headers = dict(line.split(": ", 1) for line in r.stdout.splitlines())
    assert set(headers) == {"X-Shopify-Hmac-Sha256", "X-Shopify-Webhook-Id"}
    assert ENV["SHOPIFY_WEBHOOK_SECRET"] not in r.stdout
    sent = {"Content-Type": "application/json", "X-Shopify-Topic": "orders/create", **headers}
    assert gw.hook("shopify", content=payload.read_bytes(), headers=sent).status_code == 202
    again = gw.hook("shopify", content=payload.read_bytes(), headers=sent)
    assert again.headers["idempotent-replayed"] == "true"


def test_webhooks_sign_reads_the_secret_from_the_environment_and_refuses_private_keys(
    tmp_path: Path,
) -> None:
    (tmp_path / "p.json").write_text('{"id":"evt_1"}')
    r = _cli("webhooks", "sign", "--scheme", "stripe", "--payload", str(tmp_path / "p.json"),
             env={"HOOKWISE_SIGN_SECRET": "whsec_x"})  # fmt: skip
    assert r.returncode == 0 and re.fullmatch(
        r"Stripe-Signature: t=\d+,v1=[0-9a-f]{64}\n", r.stdout
    )
    r = _cli(
        "webhooks",
        "sign",
        "--scheme",
        "discord",
        "--secret",
        "x",
        "--payload",
        str(tmp_path / "p.json"),
    )
    assert r.returncode != 0 and "private key" in r.stderr
    r = _cli("webhooks", "sign", "--scheme", "stripe", "--payload", str(tmp_path / "p.json"),
             env={"HOOKWISE_SIGN_SECRET": ""})  # fmt: skip
    assert r.returncode != 0 and "--secret-file" in r.stderr


def test_rules_test_sign_runs_the_sample_through_verification(workdir: Path) -> None:
    config = workdir / "cli.yaml"
    config.write_text(yaml.safe_dump(base_config(rules=[f"{n}.yaml" for n in NAMES])))
    sample = str(EXAMPLES / "slack-app-mention.json")
    args = ("rules", "test", "--config", str(config), "--path", "slack", "--payload", sample)
    unsigned = _cli(*args, env=ENV)
    report = json.loads(unsigned.stdout)
    assert unsigned.returncode == 1 and report["error"]["code"] == "invalid_signature"
    signed = _cli(*args, "--sign", env=ENV)
    assert signed.returncode == 0, signed.stdout + signed.stderr
    assert json.loads(signed.stdout)["status"] == 200
    twilio = _cli("rules", "test", "--config", str(config), "--path", "twilio", "--payload",
                  str(EXAMPLES / "twilio-sms.txt"), "--header",
                  "Content-Type:application/x-www-form-urlencoded", "--sign", env=ENV)  # fmt: skip
    assert twilio.returncode == 0, twilio.stdout + twilio.stderr
    assert json.loads(twilio.stdout)["status"] == 204
