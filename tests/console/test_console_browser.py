"""The console in a real browser (Debian's Chromium through Playwright): log in, watch hooks
arrive, open a run, use the rule tester, and make sure nothing a payload carries runs as markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fakes.channel_servers import FakeServer, start
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess, base_config
from tests.support.wait import eventually

XSS_NAME = '"><img src=x onerror="document.title=\'pwned\'">'
XSS_MESSAGE = "<script>document.title='pwned'</script> and <b>bold</b>"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    """The console works on both stores: every browser test runs once on each."""
    return str(request.param)


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any) -> GatewayProcess:
    return start_module_gateway(base_config(presets=["gmail"]))


def login(page: Any, gw: GatewayProcess, target: str = "/ui/") -> None:
    page.goto(gw.url + target)
    assert "/ui/login" in page.url
    page.fill("input[name=token]", ADMIN_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(gw.url + target) + r"$"))


def test_logging_in_leads_to_the_page_asked_for_and_the_cookie_is_httponly_and_strict(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    page.goto(gw.url + "/ui/runs")
    shoot(page, "login")
    page.fill("input[name=token]", "not-the-token")
    page.click("button[type=submit]")
    assert (
        page.locator("[role=alert]").inner_text() == "That is not an admin token of this gateway."
    )
    page.fill("input[name=token]", ADMIN_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(gw.url + "/ui/runs")
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "hookwise_console"]
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # not readable from script


def test_hooks_posted_over_http_appear_on_the_requests_page_without_a_reload(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    login(page, gw, "/ui/requests")
    page.evaluate("window.__sameDocument = true")
    for i in range(3):
        assert gw.hook("wake", {"text": f"build {i} finished"}).status_code == 200
    assert gw.hook("nope", {"x": 1}).status_code == 404
    rows = page.locator("#request-rows tr", has_text="/hooks/nope")
    rows.first.wait_for(timeout=10_000)
    assert page.locator("#request-rows tr", has_text="/hooks/wake").count() >= 3
    assert page.evaluate("window.__sameDocument") is True  # the rows came in, the page stayed
    shoot(page, "requests")


def test_a_run_page_shows_its_timeline_message_reply_and_session(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    r = gw.hook("agent", {"message": "summarise the deploy", "name": "Deploys"})
    assert r.status_code == 202
    run_id = r.json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded")
    login(page, gw, "/ui/runs")
    page.click(f"a[href='/ui/runs/{run_id}']")
    page.wait_for_url(gw.url + f"/ui/runs/{run_id}")
    main = page.locator("main")
    assert "succeeded" in main.locator("h1").inner_text()
    assert "summarise the deploy" in main.inner_text()
    timeline = page.locator("ol.timeline li").all_inner_texts()
    assert [t.split()[0] for t in timeline] == ["queued", "running", "succeeded"]
    shoot(page, "run")
    page.click("dl.facts a[href^='/ui/sessions/']")
    assert "summarise the deploy" in page.locator("ol.transcript").inner_text()
    shoot(page, "session")


def test_the_rule_tester_shows_the_matching_rule_and_the_rendered_action(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    login(page, gw, "/ui/rules")
    rules_table = page.locator("table").first  # the second lists the paths
    assert rules_table.locator("tbody tr", has_text="gmail").count() == 1
    page.fill("input[name=path]", "gmail")
    page.fill(
        "textarea[name=payload]",
        '{"source": "gmail", "messages": [{"id": "m-7", "from": "ada@example.com",'
        ' "subject": "Invoice", "snippet": "Please pay", "body": "Due Friday"}]}',
    )
    page.click("form.tester button[type=submit]")
    report = page.locator("#report")
    report.wait_for()
    assert "202" in report.locator("h2").first.inner_text()
    assert "gmail" in report.locator("h2").first.inner_text()
    text = report.inner_text()
    assert "hook:gmail:m-7" in text
    assert "New email from ada@example.com" in text
    shoot(page, "rules")
    # nothing was dispatched: the tester never creates a run
    runs = gw.admin("/api/runs")["items"]
    assert all(r["sessionKey"] != "hook:gmail:m-7" for r in runs)


def test_names_and_messages_from_hooks_are_shown_as_text_never_run(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    r = gw.hook("agent", {"message": XSS_MESSAGE, "name": XSS_NAME})
    assert r.status_code == 202
    run_id = r.json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded")
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, gw, "/ui/runs")
    for target in ("/ui/runs", f"/ui/runs/{run_id}", "/ui/"):
        page.goto(gw.url + target)
        assert page.title().endswith("hookwise console"), target
        assert page.locator("main img").count() == 0, target
        assert page.locator("main script").count() == 0, target
        assert page.locator("main b").count() == 0, target
    page.goto(gw.url + f"/ui/runs/{run_id}")
    assert XSS_MESSAGE in page.locator("main").inner_text()
    page.goto(gw.url + "/ui/runs")
    assert XSS_NAME in page.locator("main").inner_text()
    assert dialogs == []
    shoot(page, "runs")


def test_the_overview_and_sessions_pages_render(
    page: Any, gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    login(page, gw, "/ui/")
    assert page.locator("h1").inner_text() == "Overview"
    shoot(page, "overview")
    # requests, runs, failed runs, failed deliveries over an hour and a day
    assert page.locator(".chart").count() == 8
    page.click("nav a:has-text('Sessions')")
    page.wait_for_url(gw.url + "/ui/sessions")
    assert "main" in page.locator("main ul").first.inner_text()
    shoot(page, "sessions")


# --------------------------------------------------------------------------- recovering, replaying

CHAT = "-1009876543210"


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start("telegram")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ops_gw(start_module_gateway: Any, telegram: FakeServer) -> GatewayProcess:
    config = base_config(retainPayloads={"for": "1d"})
    config["channels"] = {"telegram": telegram.config()}
    config["agents"] = {"defaults": {"heartbeat": {"every": 0}}}
    return start_module_gateway(config, name="ops")


def failed_delivery(gw: GatewayProcess, telegram: FakeServer, chat: str) -> tuple[str, str]:
    telegram.missing.add(chat)
    r = gw.hook("agent", {"message": "deploy done", "channel": "telegram", "to": chat})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    delivery_id = eventually(
        lambda: [
            d["deliveryId"]
            for d in gw.admin(f"/api/runs/{run_id}")["run"]["deliveries"]
            if d["state"] == "failed"
        ],
        what="a failed delivery",
    )[0]
    return run_id, delivery_id


def test_a_failed_delivery_is_retried_from_the_console_and_goes_out(
    page: Any, ops_gw: GatewayProcess, telegram: FakeServer, shoot: Callable[[Any, str], Any]
) -> None:
    run_id, delivery_id = failed_delivery(ops_gw, telegram, CHAT)
    login(page, ops_gw, "/ui/deliveries?state=failed")
    row = page.locator("tbody tr", has_text=delivery_id[-8:])
    assert "failed" in row.inner_text()
    shoot(page, "deliveries")
    telegram.missing.discard(CHAT)  # the chat exists now
    row.locator("button", has_text="Retry").click()
    assert "pending again" in page.locator(".notice").inner_text()
    state = eventually(
        lambda: (
            next(
                d["state"]
                for d in ops_gw.admin("/api/deliveries", channel="telegram")["items"]
                if d["deliveryId"] == delivery_id
            )
            == "sent"
        ),
        what="the retried delivery to be sent",
    )
    assert state
    page.goto(ops_gw.url + "/ui/deliveries")
    assert "sent" in page.locator("tbody tr", has_text=delivery_id[-8:]).inner_text()
    # the run's page: every attempt of the delivery, and the summary in the main session
    page.goto(ops_gw.url + f"/ui/runs/{run_id}")
    attempts = page.locator("tr.attempt").all_inner_texts()
    assert len(attempts) == 2
    assert "attempt 1: failed" in attempts[0] and "chat not found" in attempts[0].lower()
    assert "attempt 2: sent" in attempts[1]
    assert page.locator("pre.summary").inner_text().startswith("Hook")


def test_bulk_retry_asks_with_the_count_first(
    page: Any, ops_gw: GatewayProcess, telegram: FakeServer, shoot: Callable[[Any, str], Any]
) -> None:
    chats = ["-1005550001", "-1005550002"]
    ids = [failed_delivery(ops_gw, telegram, c)[1] for c in chats]
    login(page, ops_gw, "/ui/deliveries?channel=telegram")
    page.click("button:has-text('Retry the failed ones')")
    assert page.locator("#bulk-count strong").inner_text() == "2"
    shoot(page, "bulk-retry")
    for c in chats:
        telegram.missing.discard(c)
    page.click("button:has-text('Retry 2 deliveries')")
    assert "2 failed deliveries are pending again" in page.locator(".notice").inner_text()
    eventually(
        lambda: (
            {
                d["deliveryId"]: d["state"]
                for d in ops_gw.admin("/api/deliveries", channel="telegram", limit=100)["items"]
            }.keys()
            >= set(ids)
            and all(
                d["state"] == "sent"
                for d in ops_gw.admin("/api/deliveries", channel="telegram", limit=100)["items"]
                if d["deliveryId"] in ids
            )
        ),
        what="both deliveries sent",
    )


def test_a_kept_request_is_shown_and_replayed_dry_then_for_real(
    page: Any, ops_gw: GatewayProcess, shoot: Callable[[Any, str], Any]
) -> None:
    r = ops_gw.hook("wake", {"text": "disk 91% on db-1"})
    assert r.status_code == 200
    login(page, ops_gw, "/ui/requests?path=/hooks/wake")
    page.locator("#request-rows a").first.click()
    page.wait_for_url(re.compile(r"/ui/requests/[0-9a-f-]+$"))
    assert "disk 91% on db-1" in page.locator("main pre").nth(1).inner_text()
    assert "authorization" not in page.locator("main").inner_text().lower()
    page.click("button:has-text('Dry-run replay')")
    assert "wake" in page.locator("#replay").inner_text()
    shoot(page, "request")
    before = len(ops_gw.admin("/api/events")["items"])
    page.on("dialog", lambda d: d.accept())
    page.click("button:has-text('Replay'):not(.secondary)")
    assert "Replayed as a new request (200)" in page.locator(".notice").inner_text()
    assert len(ops_gw.admin("/api/events")["items"]) == before + 1
