"""Delivery end to end: a hook's run reply reaches a channel's API through the real gateway."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.channel_servers import FakeServer, start
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually


@pytest.fixture
def fakes() -> Iterator[dict[str, FakeServer]]:
    servers: dict[str, FakeServer] = {}

    class Lazy(dict):
        def __missing__(self, name: str) -> FakeServer:
            servers[name] = start(name)
            return servers[name]

    yield Lazy()
    for s in servers.values():
        s.stop()


def config(channels: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "delivery": {"baseDelaySeconds": 0.2, "maxDelaySeconds": 2, "maxAttempts": 3},
        "channels": channels,
        **extra,
    }


def delivery_of(gw: GatewayProcess, run_id: str, *states: str) -> dict:
    def probe() -> dict | None:
        run = gw.admin(f"/api/runs/{run_id}")["run"]
        ds = run["deliveries"]
        return ds[0] if ds and ds[0]["state"] in states else None

    return eventually(probe, timeout=20, what=f"the delivery of {run_id} to reach {states}")


def agent(gw: GatewayProcess, **payload: Any) -> str:
    r = gw.hook("agent", {"wakeMode": "next-heartbeat", **payload})
    assert r.status_code == 202, r.text
    return r.json()["runId"]


def test_a_reply_is_sent_to_telegram(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    gw = start_gateway(config({"telegram": tg.config()}))
    run_id = agent(gw, message="deploy finished", channel="telegram", to="-1001234567890")
    d = delivery_of(gw, run_id, "sent", "failed")
    assert d["state"] == "sent" and d["attempts"] == 1 and d["messageIds"] == ["1"]
    [send] = tg.sends
    assert send.path.endswith("/sendMessage")
    assert send.json["chat_id"] == "-1001234567890"
    assert "deploy finished" in send.json["text"]
    listed = gw.admin("/api/deliveries")["items"]
    assert [x["deliveryId"] for x in listed] == [d["deliveryId"]]


def test_a_successful_delivery_becomes_the_last_route(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    gw = start_gateway(config({"telegram": tg.config()}))
    delivery_of(gw, agent(gw, message="one", channel="telegram", to="-100111"), "sent")
    d = delivery_of(gw, agent(gw, message="two"), "sent", "failed")  # channel: last
    assert (d["channel"], d["to"], d["state"]) == ("telegram", "-100111", "sent")
    assert [s.json["chat_id"] for s in tg.sends] == ["-100111", "-100111"]


def test_to_overrides_the_recipient_of_last(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    cfg = config(
        {"telegram": tg.config()}, session={"lastRoute": {"channel": "telegram", "to": "-100111"}}
    )
    gw = start_gateway(cfg)
    d = delivery_of(gw, agent(gw, message="hi", to="-100222"), "sent", "failed")
    assert d["to"] == "-100222" and tg.sends[0].json["chat_id"] == "-100222"


def test_rate_limits_are_retried_after_retry_after(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    tg.rate_limit(times=1, retry_after=1)
    gw = start_gateway(config({"telegram": tg.config()}))
    d = delivery_of(gw, agent(gw, message="x", channel="telegram", to="-100123"), "sent", "failed")
    assert d["state"] == "sent" and d["attempts"] == 2
    assert len(tg.sends) == 2


def test_server_errors_are_retried_then_given_up(start_gateway, fakes) -> None:
    slack = fakes["slack"]
    slack.fail(times=10)
    gw = start_gateway(config({"slack": slack.config()}))
    d = delivery_of(gw, agent(gw, message="x", channel="slack", to="channel:C0123456789"), "failed")
    assert d["attempts"] == 3 and "gave up after 3 attempts" in d["lastError"]
    assert len(slack.sends) == 3


def test_a_permanent_error_fails_at_once_with_the_channel_text(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    tg.missing.add("-100404")
    gw = start_gateway(config({"telegram": tg.config()}))
    d = delivery_of(gw, agent(gw, message="x", channel="telegram", to="-100404"), "failed")
    assert d["attempts"] == 1 and "chat not found" in d["lastError"]
    assert tg.config()["botToken"] not in d["lastError"]


def test_a_failed_delivery_falls_back_to_the_fallback_channel(start_gateway, fakes) -> None:
    tg, slack = fakes["telegram"], fakes["slack"]
    tg.missing.add("-100404")
    gw = start_gateway(
        config(
            {
                "telegram": tg.config(),
                "slack": {**slack.config(), "defaultTo": "channel:C0999999999"},
            }
        )
    )
    run_id = agent(
        gw, message="important", channel="telegram", to="-100404", fallbackChannel="slack"
    )
    d = delivery_of(gw, run_id, "sent", "failed")
    assert (d["state"], d["channel"], d["to"]) == ("sent", "slack", "channel:C0999999999")
    assert "falling back to slack" in d["lastError"]
    assert slack.sends[0].json["channel"] == "C0999999999"


def test_long_replies_are_split_under_the_channel_limit(start_gateway, fakes) -> None:
    discord = fakes["discord"]
    gw = start_gateway(config({"discord": discord.config()}))
    message = "\n\n".join(f"paragraph {i} " + "word " * 80 for i in range(12))
    d = delivery_of(
        gw, agent(gw, message=message, channel="discord", to="channel:123456"), "sent", "failed"
    )
    assert d["state"] == "sent"
    assert len(d["messageIds"]) == len(discord.sends) > 1
    assert all(len(s.json["content"]) <= 2000 for s in discord.sends)


def test_pending_deliveries_survive_a_restart_and_are_sent_once(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    tg.fail(times=100)
    cfg = config({"telegram": tg.config()})
    cfg["delivery"] = {"baseDelaySeconds": 1, "maxAttempts": 50}
    gw = start_gateway(cfg)
    run_id = agent(gw, message="keep me", channel="telegram", to="-100123")
    eventually(lambda: tg.sends, what="a first failed attempt")
    gw.stop()
    with tg._lock:
        tg._script.clear()
    gw.start()
    d = delivery_of(gw, run_id, "sent")
    ok = [s for s in tg.sends if s.json.get("text", "").find("keep me") >= 0]
    assert d["state"] == "sent" and len(ok) >= 2
    sent_before = len(tg.sends)
    gw.restart()
    import time

    time.sleep(1.5)
    assert len(tg.sends) == sent_before, "a delivery marked sent was sent again"


def test_the_mattermost_plugin_delivers(start_gateway, fakes) -> None:
    mm = fakes["mattermost"]
    gw = start_gateway(config({"mattermost": mm.config()}))
    channel_id = "a" * 26
    d = delivery_of(
        gw,
        agent(gw, message="from the plugin", channel="mattermost", to=channel_id),
        "sent",
        "failed",
    )
    assert d["state"] == "sent"
    assert mm.sends[0].json["channel_id"] == channel_id


def test_an_invalid_recipient_is_refused_at_the_door(start_gateway, fakes) -> None:
    gw = start_gateway(config({"whatsapp": fakes["whatsapp"].config()}))
    r = gw.hook("agent", {"message": "x", "channel": "whatsapp", "to": "not-a-phone"})
    assert r.status_code == 400 and r.json()["field"] == "to"
    assert gw.admin("/api/runs")["items"] == []


def test_no_channel_token_reaches_the_log(start_gateway, fakes) -> None:
    tg = fakes["telegram"]
    gw = start_gateway(config({"telegram": tg.config()}))
    delivery_of(gw, agent(gw, message="x", channel="telegram", to="-100123"), "sent")
    gw.stop()
    assert tg.config()["botToken"] not in gw.stderr()
