"""Every delivery outcome told once, everywhere, through a running gateway on both stores:
with no channel configured (the quick start) a reply is `skipped` with the reason (gmail runs
do not fall back to an unconfigured WhatsApp); a delivery that fails when it is created (no last
route) is logged with its ids, counted in `hookwise_deliveries_total{state="failed"}` exactly as
often as the store holds it, listed by the admin API and the CLI, and its message names what is
missing in words, never `None`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakes.channel_servers import FakeServer
from tests.fakes.channel_servers import start as start_channel
from tests.http.test_admin_cli import ok
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually

GMAIL = {
    "source": "gmail",
    "messages": [{"id": "m-1", "from": "ada@example.com", "subject": "Hi", "snippet": "s"}],
}
NO_CHANNEL = "no channel configured: the reply is kept in the run and its session"


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start_channel("telegram")
    yield server
    server.stop()


def deliveries_total(gw: GatewayProcess) -> dict[str, float]:
    r = httpx.get(gw.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(r.text):
        if family.name == "hookwise_deliveries":
            for s in family.samples:
                if s.name == "hookwise_deliveries_total":
                    found[s.labels["state"]] = found.get(s.labels["state"], 0) + s.value
    return found


def delivery_of(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    return eventually(
        lambda: (d := gw.admin("/api/deliveries", runId=run_id)["items"]) and d[0],
        what=f"the delivery of run {run_id}",
    )


def run_of(gw: GatewayProcess, payload: dict[str, Any], hook: str = "agent") -> str:
    r = gw.hook(hook, payload)
    assert r.status_code == 202, r.text
    return r.json()["runIds"][0] if "runIds" in r.json() else r.json()["runId"]


def test_with_no_channel_replies_are_skipped_with_the_reason_not_failed(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    config = base_config(presets=["gmail"])
    config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    gw = start_gateway(config)
    ids = [run_of(gw, {"message": "hello", "wakeMode": "next-heartbeat"})]
    ids.append(run_of(gw, GMAIL, hook="gmail"))
    for run_id in ids:
        d = delivery_of(gw, run_id)
        assert (d["state"], d["channel"], d["lastError"]) == ("skipped", None, NO_CHANNEL)
    # the gmail run wakes the heartbeat now: its reply is skipped the same way
    listed = eventually(
        lambda: len(d := gw.admin("/api/deliveries", state="skipped")["items"]) == 3 and d,
        what="the heartbeat's reply to be skipped too",
    )
    assert {d["runId"] for d in listed} == {*ids, None}
    assert gw.admin("/api/deliveries", state="failed")["items"] == []
    totals = deliveries_total(gw)
    assert totals.get("skipped") == 3 and totals.get("failed", 0) == 0
    out = ok("deliveries", "list", "--url", gw.url, "--state", "skipped")
    assert all(d["deliveryId"] in out for d in listed)
    log = gw.stderr()
    assert "whatsapp" not in log
    for d in listed:
        owner = f"run {d['runId']}" if d["runId"] else f"heartbeat {d['heartbeatId']}"
        assert f"delivery {d['deliveryId']} ({owner}) skipped: {NO_CHANNEL}" in log


def test_a_delivery_failed_at_creation_is_logged_counted_and_listed_once(
    start_gateway: Callable[..., GatewayProcess], telegram: FakeServer
) -> None:
    config = base_config(presets=["gmail"])
    config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    config["channels"] = {"telegram": telegram.config()}
    gw = start_gateway(config)
    ids = [run_of(gw, {"message": f"m{i}", "wakeMode": "next-heartbeat"}) for i in range(3)]
    ids.append(run_of(gw, GMAIL, hook="gmail"))  # whatsapp is not configured: no fallback to it
    failed = [delivery_of(gw, i) for i in ids]
    assert {d["state"] for d in failed} == {"failed"}
    assert {d["channel"] for d in failed} == {None}
    for d in failed:
        assert d["lastError"].startswith("no last route to deliver to (channel: last)")
    # the store and the metric agree (the gmail run's heartbeat reply fails the same way)
    stored = eventually(
        lambda: (
            (n := len(gw.admin("/api/deliveries", state="failed")["items"])) >= len(ids)
            and deliveries_total(gw).get("failed") == n
            and n
        ),
        what="the metric to count every failed delivery the store holds",
    )
    log = gw.stderr()
    for d in failed:
        assert f"delivery {d['deliveryId']} (run {d['runId']}) failed: no last route" in log
    # tried again from the admin API: it fails again, in words, and is counted once more
    r = httpx.post(
        f"{gw.url}/api/deliveries/{failed[0]['deliveryId']}/retry",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert r.status_code == 202, r.text
    again = eventually(
        lambda: (d := delivery_of(gw, ids[0]))["attempts"] > 0 and d["state"] == "failed" and d,
        what="the retried delivery to fail again",
    )
    assert "None" not in again["lastError"]
    assert again["lastError"].startswith("no channel to deliver to")
    eventually(  # one of them failed twice
        lambda: (
            deliveries_total(gw).get("failed")
            == len(gw.admin("/api/deliveries", state="failed")["items"]) + 1
            >= stored + 1
        ),
        what="the metric to count the second failure",
    )
    assert "None" not in gw.stderr()
