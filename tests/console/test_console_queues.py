"""The console's Queues page in a real browser (Debian's Chromium through Playwright), on both
stores: each lane's queued and held runs and whether it is paused; Pause holds a mapping's runs
(recorded with the reason), Resume releases them, both through CSRF-checked forms."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.console.test_console_browser import login
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually

GITHUB = {
    "id": "github",
    "match": {"path": "github"},
    "action": "agent",
    "messageTemplate": "PR {{ number }}",
    "deliver": False,
    "wakeMode": "next-heartbeat",
}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any) -> GatewayProcess:
    return start_module_gateway(base_config(mappings=[GITHUB]))


def run_states(gw: GatewayProcess, ids: list[str]) -> list[str]:
    return [gw.admin(f"/api/runs/{i}")["run"]["state"] for i in ids]


def test_pause_and_resume_a_mapping_from_the_queues_page(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    login(page, gw, "/ui/queues")
    row = page.locator("tr[data-lane='main/github']")
    assert row.locator("td.state").inner_text() == "running"
    row.locator("input[name=reason]").fill("release freeze")
    row.locator("button", has_text="Pause mapping").click()
    page.wait_for_url(gw.url + "/ui/queues?*")
    assert "Paused mapping github" in page.locator("body").inner_text()
    assert row.locator("td.state").inner_text() == "paused"
    assert "release freeze" in page.locator("table.pauses").inner_text()

    ids = [gw.hook("github", {"number": n}).json()["runId"] for n in range(3)]
    page.reload()
    assert row.locator("td.held").inner_text() == "3"
    assert run_states(gw, ids) == ["held"] * 3
    shoot(page, "queues")

    row.locator("button", has_text="Resume mapping").click()
    page.wait_for_url(gw.url + "/ui/queues?*")
    assert "3 run(s) back in the queue" in page.locator("body").inner_text()
    eventually(lambda: run_states(gw, ids) == ["succeeded"] * 3, what="the released runs")
    page.reload()
    assert row.locator("td.state").inner_text() == "running"
    assert "Nothing is paused." in page.locator("table.pauses").inner_text()


def test_a_pause_without_the_csrf_token_is_refused(page: Any, gw: GatewayProcess) -> None:
    login(page, gw, "/ui/queues")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    r = httpx.post(
        f"{gw.url}/ui/queues/pause",
        data={"kind": "mapping", "name": "github"},
        cookies=cookies,
        headers={"Origin": gw.url},
        timeout=10,
    )
    assert r.status_code == 403
    answer = httpx.get(
        f"{gw.url}/api/queues", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ).json()
    assert answer["pauses"] == []
