"""The console's budgets (on the Queues page) in a real browser (Debian's Chromium through
Playwright), on both stores: each budget's spend against its limits and whether it holds its
runs; Raise lets the held runs start (the raise shown with who made it), Release starts them at
once; a bad raise is refused with the API's message; both through CSRF-checked forms."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.console.test_console_browser import login
from tests.fakes.model_server import ModelServer
from tests.runtime.test_budgets import LONG
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually


def metered(n: int) -> dict[str, Any]:
    """Mapping `m<n>`: its own budget of 500 tokens an hour, so each test has its own."""
    return {
        "id": f"m{n}",
        "match": {"path": f"m{n}"},
        "action": "agent",
        "messageTemplate": "alert {{ n }}",
        "sessionMode": "per-request",
        "deliver": False,
        "wakeMode": "next-heartbeat",
        "budget": {"tokens": 500, "per": "1h"},
    }


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server() -> Iterator[ModelServer]:
    with ModelServer() as s:
        s.reply(LONG, times=100)
        yield s


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any, server: ModelServer) -> GatewayProcess:
    by_sender = metered(4)
    by_sender["budget"] = {**by_sender["budget"], "by": "sender"}
    cfg = base_config(mappings=[metered(1), metered(2), metered(3), by_sender])
    cfg["agents"] = {"defaults": {"heartbeat": {"every": 0}, "model": "fake/m"}}
    cfg["models"] = {"providers": {"fake": server.provider()}}
    return start_module_gateway(cfg)


def state(gw: GatewayProcess, run_id: str) -> str:
    return str(gw.admin(f"/api/runs/{run_id}")["run"]["state"])


def held_runs(gw: GatewayProcess, mapping: str, n: int) -> list[str]:
    """`n` runs of `mapping`: the first spends about 1010 tokens; the others are held."""
    ids = [gw.hook(mapping, {"n": 0}).json()["runId"]]
    eventually(lambda: state(gw, ids[0]) == "succeeded", what="the first run", timeout=30)
    ids += [gw.hook(mapping, {"n": i}).json()["runId"] for i in range(1, n)]
    eventually(lambda: all(state(gw, i) == "held" for i in ids[1:]), what="held", timeout=30)
    return ids


def test_raise_a_held_budget_from_the_queues_page(page: Any, gw: GatewayProcess) -> None:
    ids = held_runs(gw, "m1", 3)
    login(page, gw, "/ui/queues")
    row = page.locator("tr[data-budget='mapping/m1']")
    assert row.locator("td.state").inner_text() == "held"
    assert row.locator("td.tokens").inner_text().endswith("/ 500")
    row.locator("input[name=tokens]").fill("10K")
    row.locator("input[name=for]").fill("1h")
    row.locator("button", has_text="Raise").click()
    page.wait_for_url(gw.url + "/ui/queues?*")
    assert "Raised the budget of mapping m1 until" in page.locator("body").inner_text()
    assert row.locator("td.tokens").inner_text().endswith("/ 10000")
    assert "by admin@" in row.locator("td.raised").inner_text()
    eventually(lambda: [state(gw, i) for i in ids] == ["succeeded"] * 3, what="released runs")
    page.reload()
    assert row.locator("td.state").inner_text() == "open"


def test_release_a_held_budget_from_the_queues_page(page: Any, gw: GatewayProcess) -> None:
    ids = held_runs(gw, "m2", 2)
    login(page, gw, "/ui/queues")
    row = page.locator("tr[data-budget='mapping/m2']")
    row.locator("button", has_text="Release").click()
    page.wait_for_url(gw.url + "/ui/queues?*")
    assert "Released the budget of mapping m2: 1 run(s)" in page.locator("body").inner_text()
    eventually(lambda: state(gw, ids[1]) == "succeeded", what="the released run", timeout=30)
    page.reload()
    assert "waived until" in row.locator("td.state").inner_text()
    assert row.locator("button", has_text="Release").count() == 0


def test_release_one_held_sender_from_the_queues_page(page: Any, gw: GatewayProcess) -> None:
    # runs sent with the hook token are of the sender `token`: held past its own allowance
    ids = held_runs(gw, "m4", 2)
    login(page, gw, "/ui/queues")
    row = page.locator("tr[data-budget='mapping/m4'][data-sender='token']")
    assert row.locator("td.state").inner_text() == "held"
    assert row.locator("td.tokens").inner_text().endswith("/ 500")
    row.locator("button", has_text="Release").click()
    page.wait_for_url(gw.url + "/ui/queues?*")
    body = page.locator("body").inner_text()
    assert "Released the budget of mapping m4 sender token: 1 run(s)" in body
    eventually(lambda: state(gw, ids[1]) == "succeeded", what="the released run", timeout=30)
    page.reload()
    assert "waived until" in row.locator("td.state").inner_text()
    page.goto(f"{gw.url}/ui/runs/{ids[1]}")
    assert page.locator("dd[data-sender]").inner_text() == "token"


def test_a_bad_raise_is_refused_with_the_apis_message(page: Any, gw: GatewayProcess) -> None:
    login(page, gw, "/ui/queues")
    row = page.locator("tr[data-budget='mapping/m3']")
    row.locator("input[name=tokens]").fill("lots")
    row.locator("input[name=for]").fill("1h")
    row.locator("button", has_text="Raise").click()
    assert "tokens must be a number of tokens" in page.locator("body").inner_text()
    budgets = httpx.get(
        f"{gw.url}/api/budgets/", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ).json()["items"]
    [m3] = [b for b in budgets if b["name"] == "m3"]
    assert m3["raised"] is None


def test_a_raise_without_the_csrf_token_is_refused(page: Any, gw: GatewayProcess) -> None:
    login(page, gw, "/ui/queues")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    r = httpx.post(
        f"{gw.url}/ui/queues/budget/raise",
        data={"kind": "mapping", "name": "m3", "tokens": "1M", "for": "1h"},
        cookies=cookies,
        headers={"Origin": gw.url},
        timeout=10,
    )
    assert r.status_code == 403
