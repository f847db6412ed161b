"""Signed callbacks and the `webhook` channel, through the real server and a loopback receiver.

Every POST is verified with the `standardwebhooks` library (the reference implementation): the
signature, the timestamp and the id. Callbacks are deliveries: retried until the receiver
recovers (delivered once: one id on every attempt), recorded, visible in the admin API. A URL
from the payload is judged at the door (its `allow` prefixes, no literal private address) and
again when sent (the host's addresses); redirects are never followed.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from tests.fakes.fake_http import Recorded
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

#: a provider nothing answers: its runs fail
DOWN = {
    "providers": {
        "down": {"api": "openai", "baseUrl": "http://127.0.0.1:9", "apiKey": "k", "maxRetries": 0}
    }
}
SECRET = "whsec_" + base64.b64encode(b"callback-secret-0123456789abcdef").decode()


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    fake = WebhookReceiver().start()
    yield fake
    fake.stop()


def config(callback: dict[str, Any], **more: Any) -> dict[str, Any]:
    mapping = {
        "id": "ci",
        "match": {"path": "ci"},
        "action": "agent",
        "messageTemplate": "build {{ build }} finished: {{ status }}",
        "wakeMode": "next-heartbeat",
        "callback": {"secret": SECRET, **callback},
    }
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": [mapping]},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "delivery": {"baseDelaySeconds": 0.2, "maxDelaySeconds": 1},
        **more,
    }


def verified(req: Recorded) -> dict[str, Any]:
    """The payload of a POST whose Standard Webhooks signature verifies (or an exception)."""
    headers = {k: req.headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    return Webhook(SECRET).verify(req.body, headers)


def deliveries(gw: GatewayProcess, run_id: str) -> list[dict]:
    return gw.admin(f"/api/runs/{run_id}")["run"]["deliveries"]


def callback_state(gw: GatewayProcess, run_id: str, *states: str) -> dict:
    return eventually(
        lambda: next(
            (
                d
                for d in deliveries(gw, run_id)
                if d["channel"] == "callback:ci" and d["state"] in states
            ),
            None,
        ),
        what=f"the callback to reach {states}",
    )


def test_a_run_that_ends_posts_its_outcome_signed(start_gateway, receiver) -> None:
    gw = start_gateway(config({"url": receiver.url + "/hook-result"}))
    r = gw.hook("ci", {"build": 42, "status": "red"})
    assert r.status_code == 202
    run_id = r.json()["runId"]
    d = callback_state(gw, run_id, "sent")
    [req] = receiver.sends
    assert req.path == "/hook-result" and req.headers["content-type"] == "application/json"
    event = verified(req)
    assert event["type"] == "run.succeeded"
    assert event["data"]["runId"] == run_id and event["data"]["rule"] == "ci"
    assert event["data"]["reply"] == "echo: build 42 finished: red"
    assert event["data"]["model"] == "echo/echo" and event["data"]["state"] == "succeeded"
    assert req.headers["webhook-id"] == d["deliveryId"] and d["to"] == receiver.url + "/hook-result"
    # a wrong secret does not verify: the signature is over this body with this key
    with pytest.raises(WebhookVerificationError):
        other = "whsec_" + base64.b64encode(b"another-secret-0123456789abcdef!").decode()
        Webhook(other).verify(req.body, dict(req.headers))


def test_a_receiver_that_fails_then_recovers_gets_it_once(start_gateway, receiver) -> None:
    gw = start_gateway(config({"url": receiver.url + "/cb"}))
    receiver.fail(times=2)
    run_id = gw.hook("ci", {"build": 7, "status": "green"}).json()["runId"]
    d = callback_state(gw, run_id, "sent")
    assert d["attempts"] == 3
    sends = receiver.sends
    assert len(sends) == 3
    assert len({s.headers["webhook-id"] for s in sends}) == 1  # one message, tried three times
    assert [a[1].status for a in receiver.answers] == [503, 503, 200]
    assert all(verified(s)["data"]["runId"] == run_id for s in sends)


def test_a_redirect_is_not_followed(start_gateway, receiver) -> None:
    elsewhere = WebhookReceiver().start()
    try:
        gw = start_gateway(config({"url": receiver.url + "/cb"}))
        receiver.redirect(elsewhere.url + "/stolen")
        run_id = gw.hook("ci", {"build": 1, "status": "x"}).json()["runId"]
        d = callback_state(gw, run_id, "failed")
        assert "redirect, not followed" in d["lastError"]
        assert len(receiver.sends) == 1 and elsewhere.requests == []
        # a dead letter is replayable: sent again, with the same id, once the receiver answers
        assert gw.client is not None
        retry = gw.client.post(
            f"/api/deliveries/{d['deliveryId']}/retry",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert retry.status_code == 202, retry.text
        callback_state(gw, run_id, "sent")
        assert [s.headers["webhook-id"] for s in receiver.sends] == [d["deliveryId"]] * 2
        assert verified(receiver.sends[1])["data"]["runId"] == run_id
    finally:
        elsewhere.stop()


def url_from(receiver: WebhookReceiver, **more: Any) -> dict[str, Any]:
    return {"urlFrom": "$.callback_url", "allow": [receiver.url + "/cb"], **more}


@pytest.mark.parametrize(
    "url",
    [
        "{base}/cb",  # under the prefix, but a literal loopback address
        "{base}/cbx",  # not under /cb on a segment boundary
        "{base}/other",
        "http://127.0.0.1.evil.example/cb",
        "ftp://127.0.0.1/cb",
        "not a url",
        None,
    ],
)
def test_a_url_from_the_payload_outside_the_rules_is_refused_at_the_door(
    start_gateway, receiver, url: str | None
) -> None:
    gw = start_gateway(config(url_from(receiver)))
    payload: dict[str, Any] = {"build": 1, "status": "x"}
    if url is not None:
        payload["callback_url"] = url.format(base=receiver.url)
    r = gw.hook("ci", payload)
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "callback_url_refused" and r.json()["rule"] == "ci"
    assert gw.admin("/api/runs")["items"] == []
    assert receiver.requests == []


def test_a_host_allowed_by_name_may_be_private(start_gateway, receiver) -> None:
    port = receiver.url.rsplit(":", 1)[1]
    allowed = f"http://localhost:{port}/cb"
    gw = start_gateway(
        config({"urlFrom": "$.callback_url", "allow": [allowed], "allowHosts": ["localhost"]})
    )
    r = gw.hook("ci", {"build": 3, "status": "ok", "callback_url": allowed + "/job/3"})
    assert r.status_code == 202, r.text
    callback_state(gw, r.json()["runId"], "sent")
    assert verified(receiver.sends[0])["data"]["reply"] == "echo: build 3 finished: ok"
    assert receiver.sends[0].path == "/cb/job/3"


def test_a_name_that_resolves_to_a_private_address_is_refused_when_sent(
    start_gateway, receiver
) -> None:
    port = receiver.url.rsplit(":", 1)[1]
    name = socket.gethostname()  # resolves to a loopback or private address here
    target = f"http://{name}:{port}/cb"
    gw = start_gateway(config({"urlFrom": "$.callback_url", "allow": [target]}))
    r = gw.hook("ci", {"build": 4, "status": "ok", "callback_url": target})
    assert r.status_code == 202, r.text
    d = callback_state(gw, r.json()["runId"], "failed")
    assert "loopback, private or link-local" in d["lastError"]
    assert receiver.requests == []


def test_a_failed_run_is_called_back_too(start_gateway, receiver) -> None:
    cfg = config({"url": receiver.url + "/cb"})
    cfg["models"] = DOWN
    cfg["hooks"]["mappings"][0]["model"] = "down/m"
    gw = start_gateway(cfg)
    run_id = gw.hook("ci", {"build": 5, "status": "x"}).json()["runId"]
    callback_state(gw, run_id, "sent")
    event = verified(receiver.sends[0])
    assert event["type"] == "run.failed" and event["data"]["state"] == "failed"
    assert event["data"]["reply"] is None and event["data"]["error"]


def test_the_webhook_channel_delivers_replies_signed(start_gateway, receiver) -> None:
    cfg = config({"url": receiver.url + "/cb"})
    cfg["hooks"]["mappings"] = []
    cfg["channels"] = {"webhook": {"url": receiver.url + "/replies", "secret": SECRET}}
    gw = start_gateway(cfg)
    r = gw.hook("agent", {"message": "hello", "channel": "webhook", "wakeMode": "next-heartbeat"})
    run_id = r.json()["runId"]
    d = eventually(
        lambda: next((d for d in deliveries(gw, run_id) if d["state"] == "sent"), None),
        what="the reply to be sent",
    )
    assert d["channel"] == "webhook"
    [req] = receiver.sends
    assert req.path == "/replies"
    event = verified(req)
    assert event["type"] == "message.reply" and event["data"] == {"text": "echo: hello"}
    assert req.headers["webhook-id"] == d["deliveryId"]


@pytest.mark.parametrize(
    ("callback", "problem"),
    [
        ({}, "give exactly one of url and urlFrom"),
        (
            {"url": "http://x.example/a", "urlFrom": "$.u", "allow": ["http://x.example"]},
            "exactly one",
        ),
        ({"urlFrom": "$.u"}, "needs the prefixes"),
        ({"url": "ftp://x.example/a"}, "absolute http"),
        ({"url": "http://x.example/a", "secret": "plain"}, "whsec_"),
    ],
)
def test_a_broken_callback_fails_at_load(tmp_path, callback: dict[str, Any], problem: str) -> None:
    import yaml

    from hookwise.engine.config.load import load_config
    from hookwise.engine.errors import ConfigError
    from hookwise.server.lifecycle.gateway import compile_rules

    cfg = config({**callback})
    cfg["hooks"]["mappings"][0]["callback"] = {"secret": SECRET, **callback}
    path = tmp_path / "hookwise.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as err:
        compile_rules(load_config(path))
    assert problem in str(err.value)


def test_lifecycle_events_go_to_subscribers_signed(start_gateway, receiver) -> None:
    cfg = config({"url": receiver.url + "/cb"})
    cfg["hooks"]["mappings"] = []
    cfg["events"] = {
        "subscribers": [
            {"url": receiver.url + "/all", "secret": SECRET},  # run.finished by default
            {"url": receiver.url + "/failures", "secret": SECRET, "types": ["run.failed"]},
        ]
    }
    cfg["models"] = DOWN
    gw = start_gateway(cfg)
    ok = gw.hook("agent", {"message": "fine", "deliver": False, "wakeMode": "next-heartbeat"})
    bad = gw.hook(
        "agent", {"message": "x", "deliver": False, "wakeMode": "next-heartbeat", "model": "down/m"}
    )
    ok_id, bad_id = ok.json()["runId"], bad.json()["runId"]
    eventually(lambda: len(receiver.sends) == 3, what="three lifecycle events")
    seen = sorted(
        (s.path, verified(s)["type"], verified(s)["data"]["runId"]) for s in receiver.sends
    )
    assert seen == sorted(
        [
            ("/all", "run.finished", ok_id),
            ("/all", "run.finished", bad_id),
            ("/failures", "run.failed", bad_id),
        ]
    )
    channels = {d["channel"] for d in deliveries(gw, bad_id)}
    assert {"event:0", "event:1"} <= channels
    # the receiver has them: their deliveries are marked sent just after its answer
    eventually(
        lambda: all(
            d["state"] == "sent"
            for d in deliveries(gw, bad_id)
            if d["channel"].startswith("event:")
        ),
        what="the event deliveries marked sent",
    )


def test_an_unknown_event_type_fails_at_load(tmp_path) -> None:
    import yaml

    from hookwise.engine.config.load import load_config
    from hookwise.engine.errors import ConfigError

    cfg = config({"url": "http://x.example/cb"})
    cfg["events"] = {
        "subscribers": [{"url": "http://x.example/e", "secret": SECRET, "types": ["run.started"]}]
    }
    path = tmp_path / "hookwise.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "events.subscribers[0]" in str(err.value) and "run.started" in str(err.value)


def test_a_delivery_that_fails_for_good_is_a_signed_delivery_failed_event(
    start_gateway, receiver
) -> None:
    from tests.fakes.fake_http import Reply

    cfg = config({"url": receiver.url + "/cb"})
    cfg["events"] = {
        "subscribers": [
            {"url": receiver.url + "/failed", "secret": SECRET, "types": ["delivery.failed"]},
            {"url": receiver.url + "/runs", "secret": SECRET},  # run.finished only
        ]
    }
    # the callback's receiver refuses it for good (a 4xx is not retried)
    receiver.script(Reply(400, {"error": "no"}), when=lambda r: r.path == "/cb")
    gw = start_gateway(cfg)
    run_id = gw.hook("ci", {"build": 7, "status": "green"}).json()["runId"]
    failed = callback_state(gw, run_id, "failed")
    event = eventually(
        lambda: next((s for s in receiver.sends if s.path == "/failed"), None),
        what="the delivery.failed event",
    )
    body = verified(event)
    assert body["type"] == "delivery.failed"
    assert body["data"]["deliveryId"] == failed["deliveryId"]
    assert body["data"]["runId"] == run_id
    assert body["data"]["channel"] == "callback:ci"
    assert "400" in body["data"]["error"]
    # the run.finished subscriber got its run event and nothing about the delivery
    eventually(lambda: any(s.path == "/runs" for s in receiver.sends), what="the run event")
    assert {verified(s)["type"] for s in receiver.sends if s.path == "/runs"} == {"run.finished"}
    assert sum(s.path == "/failed" for s in receiver.sends) == 1
