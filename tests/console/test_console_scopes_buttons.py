"""The console's action buttons beyond the request and deliveries pages follow the login's scopes
too: a `read` login sees the Alerts page, an alert's page, the Approvals page and the queues'
budgets without their Acknowledge, Retry, Approve, Deny, Raise and Release forms; an `operate`
login sees them. One gateway with a tool call waiting for approval (which also opens an
`approvals_waiting` alert, told to a Telegram fake) and a mapping budget. (The refusal of the
same forms posted anyway is in `tests/http/test_admin_scopes.py`, for every console route.) The
last test looks with a real browser (Debian's Chromium through Playwright)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.console.test_console_scopes import OPERATE_TOKEN, READ_TOKEN, _csrf, session
from tests.console.test_console_scopes_browser import login
from tests.fakes.channel_servers import FakeServer, start
from tests.support.approvals import config as approvals_config
from tests.support.approvals import parked, start_run
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start("telegram")
    yield server
    server.stop()


def config(telegram: FakeServer) -> dict[str, Any]:
    cfg = approvals_config()
    cfg["gateway"]["auth"]["tokens"] = [
        {"name": "grafana", "token": READ_TOKEN, "scopes": ["read"]},
        {"name": "oncall", "token": OPERATE_TOKEN, "scopes": ["operate"]},
    ]
    cfg["hooks"]["mappings"][0]["budget"] = {"tokens": "500K", "per": "1h"}
    cfg["channels"] = {"telegram": telegram.config()}
    cfg["alerts"] = {
        "interval": "0.3s",
        "notify": ["telegram:4242"],
        "rules": [{"kind": "approvals_waiting", "threshold": 1}],
    }
    return cfg


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess], telegram: FakeServer) -> GatewayProcess:
    return start_module_gateway(config(telegram), name="console-buttons")


@pytest.fixture(scope="module")
def waiting(gw: GatewayProcess) -> tuple[str, str]:
    """(approval id, alert id): a tool call waiting for approval and the alert it opened."""
    run_id = start_run(gw, "ops", "call t.count {}")
    [approval] = parked(gw, run_id)["approvals"]
    [alert] = eventually(
        lambda: gw.admin("/api/alerts", state="open")["items"], what="the approvals alert"
    )
    assert alert["rule"] == "approvals_waiting"
    return str(approval["approvalId"]), str(alert["alertId"])


def _forms(client: httpx.Client, page: str) -> str:
    r = client.get(page)
    assert r.status_code == 200, r.text
    return r.text


@pytest.mark.parametrize(("name", "shown"), [("grafana", False), ("oncall", True)])
def test_the_alerts_approvals_and_budget_buttons_follow_the_logins_scope(
    gw: GatewayProcess, waiting: tuple[str, str], name: str, shown: bool
) -> None:
    approval_id, alert_id = waiting
    client = session(gw, name)
    try:
        alerts = _forms(client, "/ui/alerts")
        assert f'data-alert="{alert_id}"' in alerts  # the alert is listed either way
        assert (f'action="/ui/alerts/{alert_id}/ack"' in alerts) is shown
        one = _forms(client, f"/ui/alerts/{alert_id}")
        assert "approvals_waiting" in one
        assert (f'action="/ui/alerts/{alert_id}/ack"' in one) is shown
        approvals = _forms(client, "/ui/approvals")
        assert f'data-approval="{approval_id}"' in approvals
        assert (f'action="/ui/approvals/{approval_id}/approve"' in approvals) is shown
        assert (f'action="/ui/approvals/{approval_id}/deny"' in approvals) is shown
        queues = _forms(client, "/ui/queues")
        assert 'data-budget="mapping/ops"' in queues
        assert ('action="/ui/queues/budget/raise"' in queues) is shown
    finally:
        client.close()


def test_in_a_browser_a_read_login_has_nothing_to_press_on_these_pages(
    page: Any, gw: GatewayProcess, waiting: tuple[str, str]
) -> None:
    approval_id, alert_id = waiting
    login(page, gw, READ_TOKEN, "/ui/approvals")
    assert page.locator(f"tr[data-approval='{approval_id}']").count() == 1
    for target in ("/ui/approvals", "/ui/alerts", f"/ui/alerts/{alert_id}", "/ui/queues"):
        page.goto(gw.url + target)
        assert page.locator("h1").count() == 1, target
        names = [b.inner_text() for b in page.locator("main button").all()]
        assert not {"Approve", "Deny", "Acknowledge", "Raise", "Release"} & set(names), target
        assert not [n for n in names if n.startswith("Retry")], target


def test_what_an_operate_login_does_is_recorded_under_its_tokens_name(
    gw: GatewayProcess, waiting: tuple[str, str]
) -> None:
    """(Last in the module: it acknowledges the alert and decides the approval.)"""
    approval_id, alert_id = waiting
    client = session(gw, "oncall")
    try:
        csrf = _csrf(client.get("/ui/alerts").text)
        r = client.post(f"/ui/alerts/{alert_id}/ack", data={"csrf": csrf})
        assert r.status_code == 303, r.text
        r = client.post(f"/ui/approvals/{approval_id}/deny", data={"csrf": csrf})
        assert r.status_code == 303, r.text
    finally:
        client.close()
    alert = gw.admin(f"/api/alerts/{alert_id}")["alert"]
    assert alert["state"] == "acknowledged" and alert["ackedBy"] == "oncall@127.0.0.1"
    [approval] = gw.admin("/api/approvals", state="denied")["items"]
    assert (approval["decidedBy"], approval["via"]) == ("oncall@127.0.0.1", "console")
    audited = gw.admin("/api/audit", actor="oncall", limit=3)["items"]
    assert [(e["action"], e["via"], e["outcome"]) for e in audited][:2] == [
        ("deny", "console", "ok"),
        ("acknowledge", "console", "ok"),
    ]
