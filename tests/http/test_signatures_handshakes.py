"""Verification handshakes through the real server, each in the exact wire form the provider
sends and answered in the exact form it expects (status, content type, body); each is recorded
in the request log as a handshake and dispatches nothing. GET stays 405 where no handshake is
configured; a handshake is authenticated like any request on its path.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import nacl.signing
import pytest
from slack_sdk.signature import SignatureVerifier

from tests.support.gateway import HOOK_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually

SLACK = "slack-signing-secret-0123"
ZOOM = "zoom-secret-token-4567"
TWITCH = "twitch-eventsub-secret-89ab"
META_APP = "meta-app-secret-cdef"
VERIFY_TOKEN = "meta-verify-token-0f1e2d"
DROPBOX = "dropbox-app-secret-3c4b"
GRAPH = "graph-client-state-5a6b"
DISCORD = nacl.signing.SigningKey(b"k" * 32)


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    def rule(name: str) -> dict[str, Any]:
        return {"id": name, "match": {"path": name}, "action": "wake", "textTemplate": name}

    config = base_config(
        verify={
            # path-level blocks: every rule on these paths requires them
            "slack": {"scheme": "slack", "secret": SLACK, "auth": "signature"},
            "zoom": {"scheme": "zoom", "secret": ZOOM, "auth": "signature"},
            "twitch": {"scheme": "twitch", "secret": TWITCH, "auth": "signature"},
            "whatsapp": {
                "scheme": "whatsapp",
                "secret": META_APP,
                "verifyToken": VERIFY_TOKEN,
                "auth": "signature",
            },
            "meta-token": {"scheme": "meta", "secret": META_APP, "verifyToken": VERIFY_TOKEN},
            "dropbox": {"scheme": "dropbox", "secret": DROPBOX},
            "graph": {"scheme": "msgraph", "secret": GRAPH},
        },
        mappings=[
            *(rule(n) for n in ("slack", "zoom", "twitch", "whatsapp", "meta-token", "dropbox")),
            rule("graph"),
            {
                **rule("discord"),
                "verify": {
                    "scheme": "discord",
                    "publicKey": bytes(DISCORD.verify_key).hex(),
                    "auth": "signature",
                },
            },
            rule("plain"),
            {**rule("github"), "verify": {"scheme": "github", "secret": "gh"}},
        ],
    )
    return start_module_gateway(config)


def handshakes(gw: GatewayProcess, path: str) -> list[dict[str, Any]]:
    items = gw.admin("/api/requests", limit=500)["items"]
    return [e for e in items if e["path"] == path and e["action"] == "handshake"]


def stored(gw: GatewayProcess) -> int:
    items = gw.admin("/api/events", limit=500)["items"]
    return sum(1 for e in items if e["source"].startswith("hook"))


def _exact(r: Any, status: int, ctype: str, body: bytes) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == ctype
    assert r.content == body
    # the body echoes the caller's text: never sniffed as markup
    assert r.headers["x-content-type-options"] == "nosniff"


def test_meta_subscription_handshake(gw: GatewayProcess) -> None:
    before = stored(gw)
    assert gw.client is not None
    params = {
        "hub.mode": "subscribe",
        "hub.verify_token": VERIFY_TOKEN,
        "hub.challenge": "1158201444",
    }
    r = gw.client.get("/hooks/whatsapp", params=params)  # no hook token: auth: signature
    _exact(r, 200, "text/plain; charset=utf-8", b"1158201444")
    entry = eventually(lambda: handshakes(gw, "/hooks/whatsapp"), what="the handshake in the log")
    assert (entry[0]["status"], entry[0]["code"]) == (200, "meta_subscribe")
    assert stored(gw) == before


def test_meta_handshake_with_a_wrong_verify_token_is_403(gw: GatewayProcess) -> None:
    assert gw.client is not None
    params = {"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"}
    r = gw.client.get("/hooks/whatsapp", params=params)
    assert r.status_code == 403
    assert r.json() == {
        "ok": False,
        "code": "invalid_verify_token",
        "error": "hub.verify_token does not match the configured verifyToken",
    }


def test_meta_handshake_on_a_token_path_needs_the_token_in_the_url(gw: GatewayProcess) -> None:
    assert gw.client is not None
    params = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "77"}
    r = gw.client.get("/hooks/meta-token", params=params)
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    r = gw.client.get("/hooks/meta-token", params={**params, "token": HOOK_TOKEN})
    _exact(r, 200, "text/plain; charset=utf-8", b"77")


def test_a_meta_delivery_on_a_signature_path_is_checked_and_accepted(gw: GatewayProcess) -> None:
    body = json.dumps({"object": "whatsapp_business_account", "entry": []}).encode()
    sig = "sha256=" + hmac.new(META_APP.encode(), body, hashlib.sha256).hexdigest()
    r = gw.hook("whatsapp", content=body, token=None, headers={"X-Hub-Signature-256": sig})
    assert r.status_code == 200, r.text
    r = gw.hook("whatsapp", content=body + b" ", token=None, headers={"X-Hub-Signature-256": sig})
    assert r.status_code == 401
    assert r.json()["error"].startswith("hooks.verify.whatsapp: meta signature check failed")


def slack_headers(body: bytes, secret: str = SLACK) -> dict[str, str]:
    ts = str(int(time.time()))
    sig = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert sig is not None
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": sig,
    }


SLACK_CHALLENGE = {
    "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
    "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
    "type": "url_verification",
}


def test_slack_url_verification(gw: GatewayProcess) -> None:
    before = stored(gw)
    body = json.dumps(SLACK_CHALLENGE).encode()
    r = gw.hook("slack", content=body, token=None, headers=slack_headers(body))
    _exact(r, 200, "text/plain; charset=utf-8", SLACK_CHALLENGE["challenge"].encode())
    entry = eventually(lambda: handshakes(gw, "/hooks/slack"), what="the handshake in the log")
    assert entry[0]["code"] == "slack_url_verification"
    assert stored(gw) == before


def test_slack_url_verification_with_a_bad_signature_is_401(gw: GatewayProcess) -> None:
    body = json.dumps(SLACK_CHALLENGE).encode()
    r = gw.hook("slack", content=body, token=None, headers=slack_headers(body, "not-slack"))
    assert r.status_code == 401
    assert r.json()["code"] == "invalid_signature"
    assert SLACK_CHALLENGE["challenge"] not in r.text


def zoom_headers(body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    mac = hmac.new(ZOOM.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "x-zm-request-timestamp": ts,
        "x-zm-signature": f"v0={mac}",
    }


def test_zoom_endpoint_url_validation(gw: GatewayProcess) -> None:
    payload = {
        "payload": {"plainToken": "qgg8vlvZRS6UYooatFL8Aw"},
        "event_ts": 1654503849680,
        "event": "endpoint.url_validation",
    }
    body = json.dumps(payload).encode()
    r = gw.hook("zoom", content=body, token=None, headers=zoom_headers(body))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    expected = hmac.new(ZOOM.encode(), b"qgg8vlvZRS6UYooatFL8Aw", hashlib.sha256).hexdigest()
    assert r.json() == {"plainToken": "qgg8vlvZRS6UYooatFL8Aw", "encryptedToken": expected}
    bad = {**zoom_headers(body), "x-zm-signature": "v0=" + "0" * 64}
    assert gw.hook("zoom", content=body, token=None, headers=bad).status_code == 401


def test_twitch_webhook_callback_verification(gw: GatewayProcess) -> None:
    payload = {
        "challenge": "pogchamp-kappa-360noscope-vohiyo",
        "subscription": {
            "id": "f1c2a387-161a-49f9-a165-0f21d7a4e1c4",
            "status": "webhook_callback_verification_pending",
            "type": "channel.follow",
            "version": "1",
        },
    }
    body = json.dumps(payload).encode()
    msg_id = "e76c6bd4-55c9-4987-8304-da1588d8988b"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + ".634234626Z"
    mac = hmac.new(TWITCH.encode(), (msg_id + stamp).encode() + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "Twitch-Eventsub-Message-Id": msg_id,
        "Twitch-Eventsub-Message-Retry": "0",
        "Twitch-Eventsub-Message-Type": "webhook_callback_verification",
        "Twitch-Eventsub-Message-Signature": f"sha256={mac}",
        "Twitch-Eventsub-Message-Timestamp": stamp,
        "Twitch-Eventsub-Subscription-Type": "channel.follow",
        "Twitch-Eventsub-Subscription-Version": "1",
    }
    r = gw.hook("twitch", content=body, token=None, headers=headers)
    _exact(r, 200, "text/plain; charset=utf-8", b"pogchamp-kappa-360noscope-vohiyo")
    tampered = gw.hook("twitch", content=body + b" ", token=None, headers=headers)
    assert tampered.status_code == 401


def test_microsoft_graph_validation_token(gw: GatewayProcess) -> None:
    token = "Validation: Testing client application reachability for subscription Request-Id: 1"
    assert gw.client is not None
    r = gw.client.post(
        "/hooks/graph",
        params={"validationToken": token, "token": HOOK_TOKEN},
        headers={"Content-Type": "text/plain; charset=utf-8"},
    )
    _exact(r, 200, "text/plain; charset=utf-8", token.encode())
    entry = eventually(lambda: handshakes(gw, "/hooks/graph"), what="the handshake in the log")
    assert entry[0]["code"] == "msgraph_validation"


def test_dropbox_challenge(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/hooks/dropbox", params={"challenge": "7hS1vQ", "token": HOOK_TOKEN})
    _exact(r, 200, "text/plain; charset=utf-8", b"7hS1vQ")
    assert r.headers["x-content-type-options"] == "nosniff"
    r = gw.client.get("/hooks/dropbox", params={"challenge": "7hS1vQ"})
    assert r.status_code == 401  # the path authenticates by token


def test_discord_ping(gw: GatewayProcess) -> None:
    body = json.dumps({"id": "1", "application_id": "2", "type": 1, "version": 1}).encode()
    ts = str(int(time.time()))
    sig = DISCORD.sign(ts.encode() + body).signature.hex()
    headers = {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": ts}
    r = gw.hook("discord", content=body, token=None, headers=headers)
    _exact(r, 200, "application/json", b'{"type":1}')
    # Discord checks that a bad signature is refused before it saves the endpoint
    bad = {"X-Signature-Ed25519": "00" * 64, "X-Signature-Timestamp": ts}
    assert gw.hook("discord", content=body, token=None, headers=bad).status_code == 401


@pytest.mark.parametrize("path", ["plain", "github", "slack", "zoom", "wake", "agent"])
def test_get_stays_405_where_no_handshake_is_configured(gw: GatewayProcess, path: str) -> None:
    assert gw.client is not None
    r = gw.client.get(f"/hooks/{path}", params={"challenge": "x", "token": HOOK_TOKEN})
    assert r.status_code == 405
    assert r.json()["code"] == "method_not_allowed"


def test_a_get_that_is_no_handshake_is_405(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/hooks/dropbox", params={"token": HOOK_TOKEN})
    assert r.status_code == 405


def test_a_challenge_that_is_not_printable_is_refused(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/hooks/dropbox", params={"challenge": "a\r\nb", "token": HOOK_TOKEN})
    assert r.status_code == 400 and r.json()["code"] == "invalid_handshake"
    r = gw.client.get("/hooks/dropbox", params={"challenge": "x" * 2000, "token": HOOK_TOKEN})
    assert r.status_code == 400


def test_a_path_level_block_guards_every_rule_on_the_path(gw: GatewayProcess) -> None:
    # the slack rule has no verify of its own: the path-level block still applies
    body = json.dumps({"type": "event_callback", "event_id": "Ev1"}).encode()
    r = gw.hook("slack", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 401 and r.json()["code"] == "invalid_signature"
    r = gw.hook("slack", content=body, token=None, headers=slack_headers(body))
    assert r.status_code == 200


def test_failed_signatures_on_a_signature_path_lock_the_client_out(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    config = base_config(
        verify={"slack": {"scheme": "slack", "secret": SLACK, "auth": "signature"}},
        mappings=[{"match": {"path": "slack"}, "action": "wake", "textTemplate": "s"}],
        authThrottle={"maxFailures": 3, "windowSeconds": 60, "lockoutSeconds": 60},
    )
    g = start_gateway(config)
    body = b'{"type":"event_callback"}'
    for _ in range(3):
        r = g.hook("slack", content=body, token=None, headers=slack_headers(body, "guess"))
        assert r.status_code == 401
    r = g.hook("slack", content=body, token=None, headers=slack_headers(body))
    assert r.status_code == 429 and r.json()["code"] == "locked_out"
    assert "hook signature authentication failed from" in g.stderr()
