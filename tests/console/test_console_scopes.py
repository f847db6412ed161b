"""The console with scoped tokens, over plain HTTP on both stores: a login takes its scopes from
its token, the pages hide the buttons beyond them, the server refuses the same actions when
posted anyway (with a valid session and CSRF token), and logins, logouts and refusals are in
the audit log and on the Audit page. (The browser's view is in `test_console_scopes_browser`.)"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.mapped import logged

READ_TOKEN = "grafana-read-token-0123456789abcdef"
OPERATE_TOKEN = "oncall-operate-token-0123456789abcdef"
TOKENS = {"grafana": READ_TOKEN, "oncall": OPERATE_TOKEN, "admin": ADMIN_TOKEN}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def config() -> dict[str, Any]:
    return {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {
                    "id": "github",
                    "match": {"path": "github"},
                    "action": "wake",
                    "textTemplate": "PR {{ number }}",
                }
            ],
        },
        "gateway": {
            "auth": {
                "token": ADMIN_TOKEN,
                "tokens": [
                    {"name": "grafana", "token": READ_TOKEN, "scopes": ["read"]},
                    {"name": "oncall", "token": OPERATE_TOKEN, "scopes": ["operate"]},
                ],
            }
        },
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(config(), name="console-scopes")


@pytest.fixture(scope="module")
def kept(gw: GatewayProcess) -> str:
    """The id of a request whose payload is kept (so its page has Replay and Delete)."""
    assert gw.hook("github", {"number": 7}).status_code in (200, 202)
    return str(logged(gw, "/hooks/github")[0]["requestId"])


def session(gw: GatewayProcess, name: str) -> httpx.Client:
    client = httpx.Client(base_url=gw.url, timeout=10)
    r = client.post("/ui/login", data={"token": TOKENS[name], "next": "/ui/"})
    assert r.status_code == 303, r.text
    return client


@pytest.fixture
def as_user(gw: GatewayProcess) -> Iterator[Callable[[str], httpx.Client]]:
    made: list[httpx.Client] = []

    def make(name: str) -> httpx.Client:
        made.append(session(gw, name))
        return made[-1]

    yield make
    for c in made:
        c.close()


def _csrf(html: str) -> str:
    marker = 'name="csrf-token" content="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


def _audit(gw: GatewayProcess, **params: Any) -> list[dict[str, Any]]:
    return list(gw.admin("/api/audit", **params)["items"])


@pytest.mark.parametrize(
    ("name", "replay", "delete"),
    [("grafana", False, False), ("oncall", True, False), ("admin", True, True)],
)
def test_a_request_page_shows_only_the_buttons_of_the_logins_scopes(
    gw: GatewayProcess,
    kept: str,
    as_user: Callable[[str], httpx.Client],
    name: str,
    replay: bool,
    delete: bool,
) -> None:
    page = as_user(name).get(f"/ui/requests/{kept}")
    assert page.status_code == 200
    assert (f"/ui/requests/{kept}/replay" in page.text) is replay
    assert (f"/ui/requests/{kept}/payload/delete" in page.text) is delete
    top = {"grafana": "read", "oncall": "operate", "admin": "admin"}[name]
    assert f"{name} · {top}" in page.text
    deliveries = as_user(name).get("/ui/deliveries")
    assert ('action="/ui/deliveries/retry"' in deliveries.text) is replay


def test_actions_beyond_the_scopes_are_refused_when_posted_anyway(
    gw: GatewayProcess, kept: str, as_user: Callable[[str], httpx.Client]
) -> None:
    reader = as_user("grafana")
    csrf = _csrf(reader.get("/ui/").text)
    r = reader.post(f"/ui/requests/{kept}/replay", data={"csrf": csrf, "dryRun": "false"})
    assert r.status_code == 403
    assert "insufficient_scope" in r.text and "operate" in r.text
    r = reader.post("/ui/queues/pause", data={"csrf": csrf, "kind": "mapping", "name": "github"})
    assert r.status_code == 403
    assert gw.admin("/api/queues")["pauses"] == []

    operator = as_user("oncall")
    csrf = _csrf(operator.get("/ui/").text)
    r = operator.post(f"/ui/requests/{kept}/payload/delete", data={"csrf": csrf})
    assert r.status_code == 403 and "insufficient_scope" in r.text
    assert "/payload/delete" not in r.text
    assert f"/ui/requests/{kept}/replay" in operator.get(f"/ui/requests/{kept}").text  # kept

    refused = _audit(gw, outcome="refused", limit=3)
    assert [(e["actor"], e["action"], e["via"], e["code"]) for e in refused] == [
        ("oncall", "forget_payload", "console", "insufficient_scope"),
        ("grafana", "pause", "console", "insufficient_scope"),
        ("grafana", "replay", "console", "insufficient_scope"),
    ]
    assert refused[2]["targets"] == {"requestId": kept}


def test_an_operator_acts_and_the_audit_page_shows_it_with_login_and_logout(
    gw: GatewayProcess, as_user: Callable[[str], httpx.Client]
) -> None:
    operator = as_user("oncall")
    csrf = _csrf(operator.get("/ui/").text)
    for verb in ("pause", "resume"):
        r = operator.post(
            f"/ui/queues/{verb}", data={"csrf": csrf, "kind": "mapping", "name": "github"}
        )
        assert r.status_code == 303, r.text
    assert operator.post("/ui/logout", data={"csrf": csrf}).status_code == 303
    entries = _audit(gw, actor="oncall", limit=4)
    assert [(e["action"], e["outcome"]) for e in entries] == [
        ("logout", "ok"),
        ("resume", "ok"),
        ("pause", "ok"),
        ("login", "ok"),
    ]
    assert entries[1]["targets"] == {"kind": "mapping", "name": "github"}
    pauses = gw.admin("/api/queues")["pauses"]
    assert pauses == []  # resumed

    page = as_user("grafana").get("/ui/audit", params={"actor": "oncall", "action": "pause"})
    assert page.status_code == 200
    assert 'data-action="pause" data-outcome="ok"' in page.text
    assert "kind=mapping" in page.text and "name=github" in page.text


def test_a_changed_scope_ends_the_console_sessions_a_restart_alone_does_not(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(config(), name="sessions")
    cookie = session(gw, "oncall").cookies["hookwise_console"]

    def page(gw: GatewayProcess) -> httpx.Response:
        return httpx.get(gw.url + "/ui/queues", cookies={"hookwise_console": cookie}, timeout=10)

    assert page(gw).status_code == 200 and "oncall · operate" in page(gw).text
    gw = gw.restart()  # the same tokens: the same key, the session lives on
    assert page(gw).status_code == 200
    gw.config["gateway"]["auth"]["tokens"][1]["scopes"] = ["read"]  # oncall: same token, less
    gw = gw.restart()
    r = page(gw)
    assert r.status_code == 303 and "/ui/login" in r.headers["location"]
    # logged in again, the login has the new scope
    assert "oncall · read" in session(gw, "oncall").get("/ui/queues").text
