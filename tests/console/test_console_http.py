"""The console's door, over plain HTTP: login, session cookie, CSRF, headers, and off without a
gateway token. (What a person sees and clicks is in `test_console_browser.py`.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def gw(start_module_gateway: Any) -> GatewayProcess:
    return start_module_gateway(base_config())


def _login(gw: GatewayProcess, token: str = ADMIN_TOKEN, **form: str) -> httpx.Response:
    assert gw.client is not None
    return gw.client.post("/ui/login", data={"token": token, **form})


def _session(gw: GatewayProcess) -> httpx.Client:
    """A client holding a console session cookie (like a browser after logging in)."""
    client = httpx.Client(base_url=gw.url, timeout=10)
    r = client.post("/ui/login", data={"token": ADMIN_TOKEN, "next": "/ui/runs"})
    assert r.status_code == 303, r.text
    return client


def _csrf(html: str) -> str:
    marker = 'name="csrf" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def test_a_page_without_a_session_redirects_to_the_login_form_and_keeps_the_target(
    gw: GatewayProcess,
) -> None:
    assert gw.client is not None
    r = gw.client.get("/ui/runs", params={"state": "failed"})
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=%2Fui%2Fruns%3Fstate%3Dfailed"


def test_a_login_sets_a_strict_httponly_session_cookie_and_goes_where_it_was_asked(
    gw: GatewayProcess,
) -> None:
    r = _login(gw, next="/ui/runs")
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/runs"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith("hookwise_console=")
    for flag in ("HttpOnly", "SameSite=strict", "Path=/ui", "Max-Age=43200"):
        assert flag in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback; behind HTTPS it is set


@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/ui/", "/api/runs", "/ui\\..\\x"]
)
def test_a_login_never_redirects_off_the_console(gw: GatewayProcess, target: str) -> None:
    r = _login(gw, next=target)
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/"


def test_a_wrong_token_is_refused_with_the_form_again_and_sets_no_cookie(
    gw: GatewayProcess,
) -> None:
    r = _login(gw, token=HOOK_TOKEN)
    assert r.status_code == 401
    assert "That is not an admin token of this gateway." in r.text
    assert "set-cookie" not in r.headers


def test_a_forged_or_tampered_cookie_is_no_session(gw: GatewayProcess) -> None:
    client = _session(gw)
    value = client.cookies["hookwise_console"]
    client.cookies.clear()
    client.cookies.set(
        "hookwise_console", value[:-2] + ("AA" if value[-2:] != "AA" else "BB"), path="/ui"
    )
    r = client.get("/ui/runs")
    assert r.status_code == 303
    assert r.headers["location"].startswith("/ui/login")


def test_a_bearer_gateway_token_works_without_a_session(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/ui/runs", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200
    assert "<h1>Runs</h1>" in r.text
    wrong = gw.client.get("/ui/runs", headers={"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert wrong.status_code == 401
    assert wrong.json()["code"] == "unauthorized"


def test_pages_carry_a_strict_csp_and_refuse_framing(gw: GatewayProcess) -> None:
    client = _session(gw)
    for path in (
        "/ui/",
        "/ui/requests",
        "/ui/runs",
        "/ui/deliveries",
        "/ui/sessions",
        "/ui/rules",
        "/ui/login",
    ):
        r = client.get(path)
        assert r.status_code == 200, path
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "default-src 'none'" in csp, path
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert r.headers["x-frame-options"] == "DENY"
        assert r.headers["cache-control"] == "no-store"
        assert "<script>" not in r.text  # no inline script anywhere


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/ui/nope", 404),
        ("GET", "/ui/runs/a/b/c", 404),
        ("GET", "/ui/static/nope.css", 404),
        ("PUT", "/ui/login", 405),
        ("DELETE", "/ui/", 405),
        ("POST", "/ui/runs", 405),
    ],
)
def test_refusals_under_ui_carry_the_consoles_security_headers(
    gw: GatewayProcess, method: str, path: str, status: int
) -> None:
    assert gw.client is not None
    r = gw.client.request(method, path)
    assert r.status_code == status
    assert r.headers["content-security-policy"].startswith("default-src 'none'")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert r.headers["cache-control"] == "no-store"


def test_the_rule_tester_refuses_a_header_that_is_not_latin_1_in_words(gw: GatewayProcess) -> None:
    client = _session(gw)
    token = _csrf(client.get("/ui/rules").text)
    form = {"path": "wake", "payload": "{}", "headers": "Content-Type: 應用/json", "csrf": token}
    r = client.post("/ui/rules/test", data=form)
    assert r.status_code == 200, r.text
    assert "header content-type: an HTTP header holds Latin-1 text only" in r.text


def test_a_post_without_the_csrf_token_is_refused(gw: GatewayProcess) -> None:
    client = _session(gw)
    r = client.post("/ui/rules/test", data={"path": "wake", "payload": "{}"})
    assert r.status_code == 403
    assert r.json()["code"] == "csrf_failed"
    forged = client.post("/ui/rules/test", data={"path": "wake", "payload": "{}", "csrf": "x.y.z"})
    assert forged.status_code == 403


def test_a_csrf_token_of_another_session_is_refused(gw: GatewayProcess) -> None:
    one, two = _session(gw), _session(gw)
    token_of_one = _csrf(one.get("/ui/rules").text)
    r = two.post("/ui/rules/test", data={"path": "wake", "payload": "{}", "csrf": token_of_one})
    assert r.status_code == 403
    ok = one.post("/ui/rules/test", data={"path": "wake", "payload": "{}", "csrf": token_of_one})
    assert ok.status_code == 200


def test_logout_ends_the_session_cookie(gw: GatewayProcess) -> None:
    client = _session(gw)
    kept = client.cookies["hookwise_console"]  # a copy of the cookie, taken before logging out
    other = _session(gw)
    token = _csrf(client.get("/ui/").text)
    r = client.post("/ui/logout", data={"csrf": token})
    assert r.status_code == 303
    assert (
        'hookwise_console=""' in r.headers["set-cookie"] or "Max-Age=0" in r.headers["set-cookie"]
    )
    # the session is over on the server too: the copied cookie is no session any more
    with httpx.Client(base_url=gw.url, cookies={"hookwise_console": kept}) as replay:
        page = replay.get("/ui/runs")
        assert page.status_code == 303 and page.headers["location"].startswith("/ui/login")
        htmx = replay.get("/ui/runs", headers={"HX-Request": "true"})
        assert htmx.status_code == 401
    assert other.get("/ui/runs").status_code == 200  # another session lives on


def test_login_failures_lock_the_address_out(start_gateway: Any) -> None:
    gw = start_gateway(base_config())
    for _ in range(10):
        assert _login(gw, token="wrong").status_code == 401
    r = _login(gw)
    assert r.status_code == 429
    assert "set-cookie" not in r.headers


def test_the_console_is_off_without_a_gateway_token(start_gateway: Any) -> None:
    config = base_config()
    del config["gateway"]
    gw = start_gateway(config)
    assert gw.client is not None
    for path in ("/ui/", "/ui/login"):
        r = gw.client.get(path)
        assert r.status_code == 403
        assert "The console is disabled" in r.text
    assert gw.client.post("/ui/login", data={"token": ADMIN_TOKEN}).status_code == 403
