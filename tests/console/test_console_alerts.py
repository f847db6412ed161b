"""The console's Alerts page in a real browser (Debian's Chromium through Playwright), on both
stores: an alert opened by a failing channel is listed under Open, acknowledged with its button
(then listed under Acknowledged), shows the deliveries behind it, has them retried in bulk with
its Retry button once the channel is back, and moves to Resolved; the forms are CSRF-checked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.console.test_console_browser import login
from tests.fakes.channel_servers import FakeServer, start
from tests.http.test_alerts import alerts, config, delivery, relay
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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


def test_acknowledge_and_retry_an_alert_from_the_alerts_page(
    page: Any, start_gateway: Any, slack: FakeServer, telegram: FakeServer, shoot: Callable
) -> None:
    slack.fail(times=100_000)
    gw: GatewayProcess = start_gateway(config(slack, telegram))
    ids = [relay(gw, "one"), relay(gw, "two")]
    [opened] = eventually(lambda: alerts(gw, state="open"), what="an open alert")
    alert_id = opened["alertId"]

    login(page, gw, "/ui/alerts")
    row = page.locator(f"tr[data-alert='{alert_id}']")
    assert "open" in row.inner_text() and "deliveries_failing:slack" in row.inner_text()
    assert page.locator("nav a[aria-current=page]", has_text="Alerts").count() == 1
    shoot(page, "alerts")
    row.locator("button", has_text="Acknowledge").click()
    page.wait_for_url(f"{gw.url}/ui/alerts/{alert_id}?*")
    assert "acknowledged" in page.locator("h1").inner_text()
    assert "admin@" in page.locator("dl.facts").inner_text()  # the login's token
    assert page.locator("button", has_text="Acknowledge").count() == 0
    assert alerts(gw)[0]["state"] == "acknowledged"

    eventually(lambda: all(delivery(gw, d)["state"] == "failed" for d in ids), what="dead letters")
    page.reload()
    for d in ids:
        assert "failed" in page.locator(f"tr[data-delivery='{d}']").inner_text()
    slack.recover()
    page.locator("button", has_text="Retry the failed runs and deliveries").click()
    page.wait_for_url(f"{gw.url}/ui/alerts/{alert_id}?*")
    assert "2 delivery(ies)" in page.locator("body").inner_text()
    eventually(lambda: all(delivery(gw, d)["state"] == "sent" for d in ids), what="all sent")
    eventually(lambda: alerts(gw, state="resolved"), what="the alert resolved")
    page.goto(gw.url + "/ui/alerts?state=resolved")
    assert "resolved" in page.locator(f"tr[data-alert='{alert_id}']").inner_text()
    page.goto(gw.url + "/ui/alerts")
    assert "No open alerts." in page.locator("table.alerts").inner_text()

    # a form posted without the CSRF token is refused, and changes nothing
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    r = httpx.post(
        f"{gw.url}/ui/alerts/{alert_id}/retry",
        data={},
        cookies=cookies,
        headers={"Origin": gw.url},
        timeout=10,
    )
    assert r.status_code == 403
