"""The console tells what is in flight and what failed, in a real browser: the overview's Agents
table shows each agent's running runs, the age of the oldest and its pending events, and the
overview charts failed deliveries, however early they failed."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.console.test_console_browser import login
from tests.fakes.channel_servers import FakeServer, start
from tests.support.gateway import GatewayProcess, base_config
from tests.support.wait import eventually


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start("telegram")
    yield server
    server.stop()


def test_the_overview_shows_runs_in_flight_pending_events_and_failed_deliveries(
    page: Any,
    start_gateway: Callable[..., GatewayProcess],
    telegram: FakeServer,
    shoot: Callable[[Any, str], Any],
) -> None:
    beat = {"every": 0, "coalesceMs": 50}
    config = base_config()
    config["channels"] = {"telegram": telegram.config()}  # configured, but no route to it yet
    config["models"] = {
        "providers": {"slow": {"api": "command", "command": ["sh", "-c", "sleep 30; echo"]}}
    }
    config["agents"] = {
        "defaults": {"heartbeat": beat},
        "list": [
            {"id": "main", "default": True},
            {"id": "slow", "model": "slow/x", "maxConcurrentRuns": 2, "heartbeat": beat},
        ],
    }
    gw = start_gateway(config)
    for i in range(2):
        assert gw.hook("agent", {"message": f"s{i}", "agentId": "slow"}).status_code == 202
    for i in range(3):
        assert gw.hook("wake", {"text": f"w{i}", "mode": "next-heartbeat"}).status_code == 200
    failed = gw.hook("agent", {"message": "nowhere to go", "wakeMode": "next-heartbeat"})
    run_id = failed.json()["runId"]
    eventually(
        lambda: (
            [d["state"] for d in gw.admin("/api/deliveries", runId=run_id)["items"]] == ["failed"]
        ),
        what="the reply's delivery to fail (no last route)",
    )
    eventually(
        lambda: len(gw.admin("/api/runs", state="running")["items"]) == 2, what="two running"
    )
    login(page, gw, "/ui/")
    rows = page.locator("article:has(h2:text-is('Agents')) tbody tr")
    slow = rows.filter(has_text="slow")
    assert slow.locator("[data-gauge=running]").inner_text() == "2"
    assert re.fullmatch(r"\d+\.\d s", slow.locator("[data-gauge=oldest]").inner_text())
    assert slow.locator("[data-gauge=pending]").inner_text() == "0"
    main = rows.filter(has_text="(default)")
    assert main.locator("[data-gauge=running]").inner_text() == "0"
    assert main.locator("[data-gauge=pending]").inner_text() == "4"  # 3 wakes + the run's summary
    captions = page.locator("figure.chart figcaption").all_inner_texts()
    assert "failed deliveries: 1" in captions  # the last hour (and the last day)
    shoot(page, "overview-in-flight")


def test_logging_out_ends_the_session_a_copied_cookie_opens_nothing(
    page: Any, browser: Any, start_gateway: Callable[..., GatewayProcess]
) -> None:
    gw = start_gateway(base_config())
    login(page, gw, "/ui/runs")
    copied = [c for c in page.context.cookies() if c["name"] == "hookwise_console"]
    assert len(copied) == 1
    page.click("form.logout button")
    page.wait_for_url(re.compile(re.escape(gw.url) + "/ui/login"))
    # another browser holding a copy of the cookie (taken before the logout) is not let in
    other = browser.new_context()
    try:
        other.add_cookies(copied)
        stolen = other.new_page()
        stolen.goto(gw.url + "/ui/runs")
        assert "/ui/login" in stolen.url
        assert stolen.locator("input[name=token]").count() == 1
    finally:
        other.close()
