"""`action: notify`: a mapping's rendered text delivered to its channel (or callback) with no
model at all: a durable delivery, retried, recorded; no run, no session, no tokens. Through the
real gateway, the Slack fake and a model server that must never be called."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from tests.fakes.channel_servers import FakeServer, start
from tests.fakes.model_server import ModelServer
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess
from tests.support.wait import eventually

EXAMPLE = REPO / "rules" / "examples" / "alertmanager"
SECRET = "whsec_" + base64.b64encode(b"notify-secret-0123456789abcdef!!").decode()


@pytest.fixture
def slack() -> Iterator[FakeServer]:
    server = start("slack")
    server.channel_names["alerts"] = "C0ALERTS001"  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture
def models() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def config(slack: FakeServer, models: ModelServer, **hooks: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "rules": [f"{EXAMPLE}.yaml"], **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        # the only model there is would answer anything: it must never be asked
        "agents": {"defaults": {"model": "fake/m", "heartbeat": {"every": 0}}},
        "models": {"providers": {"fake": models.provider()}},
        "channels": {"slack": slack.config()},
        "delivery": {"baseDelaySeconds": 0.2, "maxDelaySeconds": 1},
    }


def delivery(gw: GatewayProcess, delivery_id: str, *states: str) -> dict:
    def probe() -> dict | None:
        items = gw.admin("/api/deliveries", limit=100)["items"]
        found = next((d for d in items if d["deliveryId"] == delivery_id), None)
        return found if found is not None and found["state"] in states else None

    return eventually(probe, what=f"delivery {delivery_id} to reach {states}")


def test_an_alert_is_relayed_with_no_model(start_gateway, slack, models) -> None:
    gw = start_gateway(config(slack, models))
    payload = json.loads(EXAMPLE.with_suffix(".json").read_text())
    slack.fail(times=1)  # retried like any delivery
    r = gw.hook("alertmanager", payload)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["rule"] == "alertmanager" and set(body) == {"ok", "rule", "deliveryIds"}
    [delivery_id] = body["deliveryIds"]
    d = delivery(gw, delivery_id, "sent")
    assert (d["channel"], d["to"], d["runId"], d["attempts"]) == ("slack", "#alerts", None, 2)
    [sent] = [s.json for s in slack.sends][-1:]
    assert sent["channel"] == "C0ALERTS001" or sent["channel"] == "#alerts"
    assert sent["text"].startswith("[FIRING] HighErrorRate (2)")
    assert "critical: 5xx above 5% for 10 minutes on api-1:8080" in sent["text"]
    # no model, no run, no session, no event, no heartbeat
    assert models.requests == []
    assert gw.admin("/api/runs")["items"] == []
    assert gw.admin("/api/events")["items"] == []
    assert gw.admin("/api/sessions")["items"] == []
    assert gw.admin("/api/heartbeats")["items"] == []
    [logged] = [e for e in gw.admin("/api/requests")["items"] if e["path"] == "/hooks/alertmanager"]
    assert logged["action"] == "notify" and logged["status"] == 202


def test_a_notification_to_a_callback_is_signed(start_gateway, slack, models) -> None:
    receiver = WebhookReceiver().start()
    try:
        mapping = {
            "id": "relay",
            "match": {"path": "relay"},
            "action": "notify",
            "textTemplate": "{{ title }}",
            "callback": {"url": receiver.url + "/in", "secret": SECRET},
        }
        gw = start_gateway(config(slack, models, mappings=[mapping]))
        r = gw.hook("relay", {"title": "disk almost full"})
        assert r.status_code == 202, r.text
        [delivery_id] = r.json()["deliveryIds"]
        delivery(gw, delivery_id, "sent")
        [req] = receiver.sends
        event = Webhook(SECRET).verify(
            req.body,
            {k: req.headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
        )
        assert event["type"] == "notification"
        assert event["data"] == {"rule": "relay", "text": "disk almost full"}
        assert models.requests == [] and slack.requests == []
    finally:
        receiver.stop()


def test_a_notification_to_an_unconfigured_channel_is_refused(start_gateway, slack, models) -> None:
    mapping = {
        "id": "tg",
        "match": {"path": "tg"},
        "action": "notify",
        "channel": "telegram",
        "textTemplate": "{{ title }}",
    }
    gw = start_gateway(config(slack, models, mappings=[mapping]))
    r = gw.hook("tg", {"title": "x"})
    assert r.status_code == 400 and r.json()["code"] == "channel_not_configured"
    assert gw.admin("/api/deliveries")["items"] == []
