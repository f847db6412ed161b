"""The console's Approvals page in a real browser (Debian's Chromium through Playwright): the
pending tool calls with Approve and Deny (CSRF-checked forms); approving resumes the run, which
makes the call and replies; the run page's timeline shows the decision; a form without the CSRF
token is refused and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.console.test_console_browser import login
from tests.support.approvals import config
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import GatewayProcess
from tests.support.mapped import get_run


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any) -> GatewayProcess:
    return start_module_gateway(config(), name="console-approvals")


def test_approve_from_the_console_resumes_the_run(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    run_id = _start(gw, "ops", 'call t.echo {"text": "hello"}\ncall t.count {}')
    [approval] = _parked(gw, run_id)["approvals"]
    login(page, gw, "/ui/approvals")
    row = page.locator(f"table.pending tr[data-approval='{approval['approvalId']}']")
    assert "t.count" in row.inner_text()
    shoot(page, "approvals")
    row.locator("button", has_text="Approve").click()
    page.wait_for_url(gw.url + "/ui/approvals?*")
    assert "Approved t.count of run" in page.locator("body").inner_text()
    run = _ended(gw, run_id)
    assert run["state"] == "succeeded" and [c["tool"] for c in run["toolCalls"]] == [
        "echo",
        "count",
    ]
    assert run["approvals"][0]["via"] == "console"
    page.goto(f"{gw.url}/ui/runs/{run_id}")
    timeline = page.locator("li.approval").inner_text()
    assert "approved" in timeline and "via console" in timeline


def test_deny_from_the_console_and_a_form_without_csrf_is_refused(
    page: Any, gw: GatewayProcess
) -> None:
    run_id = _start(gw, "ops", "call t.count {}")
    [approval] = _parked(gw, run_id)["approvals"]
    login(page, gw, "/ui/approvals")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    forged = httpx.post(
        f"{gw.url}/ui/approvals/{approval['approvalId']}/approve",
        cookies=cookies,
        headers={"Origin": gw.url},
        timeout=10,
    )
    assert forged.status_code == 403
    assert get_run(gw, run_id)["state"] == "awaiting_approval"
    row = page.locator(f"table.pending tr[data-approval='{approval['approvalId']}']")
    row.locator("button", has_text="Deny").click()
    page.wait_for_url(gw.url + "/ui/approvals?*")
    run = _ended(gw, run_id)
    assert run["toolCalls"] == [] and "was denied by admin@" in run["reply"]
