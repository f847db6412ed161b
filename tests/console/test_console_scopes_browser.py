"""Scoped logins in a real browser (Debian's Chromium through Playwright): a `read` login sees
the pages without the action buttons, an `operate` login gets Replay but not Delete, and a
form posted from the page by a login that lost the scope (sent anyway from the browser) is
refused with the scope named. (The same over plain HTTP, and the audit, in
`test_console_scopes`.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.console.test_console_scopes import OPERATE_TOKEN, READ_TOKEN, config
from tests.support.gateway import GatewayProcess
from tests.support.mapped import logged


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    gw = start_module_gateway(config(), name="scopes-browser")
    assert gw.hook("github", {"number": 7}).status_code in (200, 202)
    return gw


def login(page: Any, gw: GatewayProcess, token: str, target: str) -> None:
    page.goto(gw.url + target)
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(gw.url + target) + r"$"))


def test_a_read_login_sees_no_action_buttons(page: Any, gw: GatewayProcess) -> None:
    kept = logged(gw, "/hooks/github")[0]["requestId"]
    login(page, gw, READ_TOKEN, f"/ui/requests/{kept}")
    assert page.locator("h1").count() == 1
    assert page.get_by_role("button", name="Replay", exact=True).count() == 0
    assert page.get_by_role("button", name="Delete the kept payload").count() == 0
    assert "grafana · read" in page.locator("header").inner_text()
    page.goto(gw.url + "/ui/deliveries")
    assert page.get_by_role("button", name=re.compile("Retry the failed")).count() == 0
    page.goto(gw.url + "/ui/audit")
    assert page.locator("h1").inner_text() == "Audit"


def test_an_operate_login_replays_but_cannot_delete_even_by_posting_the_form(
    page: Any, gw: GatewayProcess
) -> None:
    kept = logged(gw, "/hooks/github")[0]["requestId"]
    login(page, gw, OPERATE_TOKEN, f"/ui/requests/{kept}")
    assert page.get_by_role("button", name="Replay", exact=True).count() == 1
    assert page.get_by_role("button", name="Delete the kept payload").count() == 0
    # the form the page does not show, posted from the page with its session and CSRF token
    status = page.evaluate(
        """async (id) => {
            const csrf = document.querySelector('meta[name=csrf-token]').content;
            const r = await fetch(`/ui/requests/${id}/payload/delete`, {
                method: 'POST', body: new URLSearchParams({csrf}),
            });
            return [r.status, await r.text()];
        }""",
        kept,
    )
    assert status[0] == 403 and "insufficient_scope" in status[1] and "admin" in status[1]
    page.reload()
    assert page.get_by_role("button", name="Replay", exact=True).count() == 1  # still kept
