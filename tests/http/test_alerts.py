"""Alerts through the real gateway, on both stores: a channel that keeps failing opens one alert,
which is told once (a durable delivery to another channel's fake), stays one while the failures
go on, is acknowledged, has the failed deliveries behind it retried in bulk, and resolves itself
(told again) when the channel recovers. The admin API, the metric and the console's page read
the same rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.channel_servers import FakeServer, start
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, REPO, GatewayProcess
from tests.support.wait import eventually

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
RULE = "deliveries_failing:slack"


@pytest.fixture
def slack() -> Iterator[FakeServer]:
    server = start("slack")
    server.channel_names["ops"] = "C0OPS000001"  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture
def telegram() -> Iterator[FakeServer]:
    server = start("telegram")
    yield server
    server.stop()


def config(slack: FakeServer, telegram: FakeServer, **alerts: Any) -> dict[str, Any]:
    relay = {
        "id": "relay",
        "match": {"path": "relay"},
        "action": "notify",
        "channel": "slack",
        "to": "#ops",
        "textTemplate": "{{ title }}",
    }
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": [relay]},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "channels": {"slack": slack.config(), "telegram": telegram.config()},
        "delivery": {"maxAttempts": 3, "baseDelaySeconds": 0.2, "maxDelaySeconds": 0.5},
        "alerts": {
            "interval": "0.3s",
            "notify": ["telegram:4242"],
            "rules": [{"kind": "deliveries_failing", "channel": "slack", "threshold": 2}],
            **alerts,
        },
    }


def post(gw: GatewayProcess, path: str, **headers: str) -> httpx.Response:
    return httpx.post(gw.url + path, headers={**AUTH, **headers}, timeout=10)


def alerts(gw: GatewayProcess, **params: Any) -> list[dict[str, Any]]:
    return list(gw.admin("/api/alerts", **params)["items"])


def relay(gw: GatewayProcess, title: str) -> str:
    r = gw.hook("relay", {"title": title})
    assert r.status_code == 202, r.text
    [delivery_id] = r.json()["deliveryIds"]
    return str(delivery_id)


def delivery(gw: GatewayProcess, delivery_id: str) -> dict[str, Any]:
    items = gw.admin("/api/deliveries", limit=200)["items"]
    return next(d for d in items if d["deliveryId"] == delivery_id)


def cli(gw: GatewayProcess, *args: str) -> str:
    """`hookwise alerts ...` against the gateway, as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOOKWISE_URL",)}
    env["HOOKWISE_ADMIN_TOKEN"] = ADMIN_TOKEN
    done = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "alerts", *args, "--url", gw.url],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def open_gauge(gw: GatewayProcess) -> float:
    r = httpx.get(gw.url + "/metrics", headers=AUTH, timeout=10)
    assert r.status_code == 200
    line = next(x for x in r.text.splitlines() if x.startswith("hookwise_alerts_open{"))
    assert f'rule="{RULE}"' in line
    return float(line.rsplit(" ", 1)[1])


def test_a_failing_channel_opens_one_alert_told_once_resolved_when_it_recovers(
    start_gateway, slack, telegram
) -> None:
    slack.fail(times=100_000)
    gw = start_gateway(config(slack, telegram))
    first = relay(gw, "one")
    # one failing delivery is under the threshold (2): no alert yet
    eventually(lambda: delivery(gw, first)["attempts"] >= 1, what="a failed attempt")
    assert alerts(gw) == []
    second = relay(gw, "two")
    [opened] = eventually(lambda: alerts(gw, state="open"), what="an open alert")
    assert (opened["rule"], opened["kind"], opened["key"]) == (RULE, "deliveries_failing", "slack")
    assert opened["threshold"] == 2 and opened["value"] >= 2
    assert {first, second} <= set(opened["deliveryIds"])
    # told once, through the telegram channel's delivery machinery
    [note] = opened["notificationIds"]
    eventually(lambda: delivery(gw, note)["state"] == "sent", what="the notification sent")
    [told] = telegram.sends
    assert told.json["chat_id"] in (4242, "4242")
    assert told.json["text"].startswith(f"[ALERT] {RULE} (slack):")
    assert opened["alertId"] in told.json["text"]
    assert "two" not in told.json["text"]  # a summary, not the payload
    assert open_gauge(gw) == 1

    # the failures go on: still one alert, counted, nobody told again
    third = relay(gw, "three")
    eventually(
        lambda: third in alerts(gw)[0]["deliveryIds"] and alerts(gw)[0]["seen"] >= 3,
        what="the alert seen again with the new failure",
    )
    assert len(alerts(gw)) == 1 and len(telegram.sends) == 1

    # acknowledged: still active (no second alert), and it says who
    alert_id = opened["alertId"]
    r = post(gw, f"/api/alerts/{alert_id}/ack", **{"X-Hookwise-Actor": "oncall"})
    assert r.status_code == 200, r.text
    acked = r.json()["alert"]
    assert acked["state"] == "acknowledged" and acked["ackedBy"].startswith("oncall@")
    again = json.loads(cli(gw, "ack", alert_id, "--json"))  # a second ack changes nothing
    assert again["alert"]["ackedBy"] == acked["ackedBy"]
    listed = cli(gw, "list", "--state", "acknowledged")
    assert alert_id in listed and RULE in listed
    missing = post(gw, "/api/alerts/nope/ack")
    assert missing.status_code == 404 and missing.json()["code"] == "alert_not_found"
    assert [a["state"] for a in alerts(gw)] == ["acknowledged"]

    # the deliveries behind it fail for good; the alert shows them
    ids = [first, second, third]
    eventually(lambda: all(delivery(gw, d)["state"] == "failed" for d in ids), what="dead letters")
    detail = gw.admin(f"/api/alerts/{alert_id}")["alert"]
    assert {d["deliveryId"] for d in detail["deliveries"]} >= set(ids)
    assert all(d["channel"] == "slack" for d in detail["deliveries"])
    assert [n["deliveryId"] for n in detail["notifications"]] == [note]

    # the channel recovers; the bulk retry sends the failed deliveries again
    slack.recover()
    shown = cli(gw, "show", alert_id)
    assert all(d in shown for d in ids) and "channel_not_found" not in shown
    retried = json.loads(cli(gw, "retry", alert_id, "--json"))
    assert (retried["deliveries"], retried["runs"], retried["notRetryable"]) == (3, 0, 0)
    eventually(lambda: all(delivery(gw, d)["state"] == "sent" for d in ids), what="all sent")
    resolved = eventually(lambda: alerts(gw, state="resolved"), what="the alert resolved")
    assert [a["alertId"] for a in resolved] == [alert_id]
    eventually(lambda: len(telegram.sends) == 2, what="the resolve notification")
    assert telegram.sends[1].json["text"].startswith(f"[RESOLVED] {RULE} (slack):")
    assert alerts(gw, state="open") == [] and open_gauge(gw) == 0
    # a resolved alert cannot be acknowledged... but this one was: 200, unchanged
    assert post(gw, f"/api/alerts/{alert_id}/ack").json()["alert"]["state"] == "resolved"


def test_alert_routes_refuse_bad_input_with_stable_codes(start_gateway, slack, telegram) -> None:
    gw = start_gateway(config(slack, telegram))
    bad = httpx.get(gw.url + "/api/alerts", params={"state": "gone"}, headers=AUTH, timeout=10)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_query"
    missing = httpx.get(gw.url + "/api/alerts/nope", headers=AUTH, timeout=10)
    assert missing.status_code == 404 and missing.json()["code"] == "alert_not_found"
    retry = post(gw, "/api/alerts/nope/retry")
    assert retry.status_code == 404 and retry.json()["code"] == "alert_not_found"
    anonymous = httpx.get(gw.url + "/api/alerts", timeout=10)
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized"


def test_a_gateway_whose_alerts_tell_an_unconfigured_channel_does_not_start(
    start_gateway, slack, telegram
) -> None:
    cfg = config(slack, telegram, notify=["discord:123456789012345678"])
    with pytest.raises(RuntimeError, match="hookwise did not start") as e:
        start_gateway(cfg)
    assert "alerts.notify[0]: names no configured channel" in str(e.value)


def test_failing_runs_and_a_signature_spike_each_open_an_alert_with_what_is_behind_it(
    start_gateway, slack, telegram
) -> None:
    from tests.fakes.model_server import ModelServer

    with ModelServer() as models:
        build = {
            "id": "build",
            "match": {"path": "build"},
            "action": "agent",
            "messageTemplate": "build {{ n }}",
            "deliver": False,
        }
        pushes = {
            "id": "pushes",
            "match": {"path": "github"},
            "action": "wake",
            "textTemplate": "push",
        }
        cfg = config(
            slack,
            telegram,
            rules=[
                {"kind": "runs_failing", "mapping": "build", "threshold": 2},
                {"kind": "signature_failures", "path": "github", "threshold": 3},
            ],
        )
        cfg["hooks"]["mappings"] = [build, pushes]
        secret = "alerts-github-secret-0123456789"
        cfg["hooks"]["verify"] = {
            "github": {"scheme": "github", "secret": secret, "auth": "signature"}
        }
        cfg["agents"]["defaults"]["model"] = "fake/m"
        cfg["models"] = {"providers": {"fake": models.provider()}}
        gw = start_gateway(cfg)

        # more failures than runs: a heartbeat of the leader may take one
        models.fail(400, message="This model does not exist", times=10)
        runs = [gw.hook("build", {"n": n}).json()["runId"] for n in range(2)]
        for run_id in runs:
            eventually(
                lambda run_id=run_id: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "failed",
                what="the run failed",
            )
        for n in range(3):
            r = gw.hook(
                "github", {"n": n}, token=None, headers={"X-Hub-Signature-256": "sha256=00"}
            )
            assert r.status_code == 401 and r.json()["code"] == "invalid_signature"

        found = eventually(
            lambda: len(alerts(gw, state="open")) == 2 and alerts(gw), what="two alerts open"
        )
        by_rule = {a["rule"]: a for a in found}
        failing = by_rule["runs_failing:build"]
        assert set(failing["runIds"]) == set(runs)
        spike = by_rule["signature_failures:github"]
        assert spike["key"] == "/hooks/github" and len(spike["requestIds"]) == 3
        detail = gw.admin(f"/api/alerts/{spike['alertId']}")["alert"]
        assert {r["code"] for r in detail["requests"]} == {"invalid_signature"}
        assert {r["path"] for r in detail["requests"]} == {"/hooks/github"}
        eventually(lambda: len(telegram.sends) == 2, what="both alerts told")

        # the failed runs behind the alert go back to the queue and succeed this time
        models.reset()
        r = post(gw, f"/api/alerts/{failing['alertId']}/retry", **{"X-Hookwise-Actor": "oncall"})
        assert r.status_code == 200, r.text
        assert (r.json()["runs"], r.json()["deliveries"]) == (2, 0)
        for run_id in runs:
            eventually(
                lambda run_id=run_id: (
                    gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded"
                ),
                what="the retried run",
            )
            [retry] = gw.admin(f"/api/runs/{run_id}")["run"]["retries"]
            assert retry["by"].startswith("oncall@")
        eventually(
            lambda: [a["rule"] for a in alerts(gw, state="resolved")] == ["runs_failing:build"],
            what="the runs alert resolved",
        )
        # a second retry finds nothing to send back
        again = post(gw, f"/api/alerts/{failing['alertId']}/retry").json()
        assert (again["runs"], again["notRetryable"]) == (0, 2)
