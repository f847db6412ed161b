"""Scoped admin tokens and the audit log, through a real gateway on both stores.

The table test takes every route of the application's route table behind the admin guard (so a
route added later is tried too) and asks it with no token, a wrong token, and each scope: a
token without the route's scope is `403 insufficient_scope` naming it, one with it is never
refused. The scope each route needs is written down here (`OPERATE`, `ADMIN`; any other read is
`read`, any other write `admin`), so a route that changes its scope changes this table too.
Every operator action leaves one audit entry (who, from where, what, the outcome), refused
attempts included, and no token reaches the audit log or the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from litestar.routes import HTTPRoute

from hookwise.engine.config.load import load_config
from hookwise.server.admin.api import admin_guard
from hookwise.server.admin.audit import ANONYMOUS_PER_MINUTE
from hookwise.server.app import create_app
from hookwise.server.lifecycle.gateway import Gateway
from tests.cli.support import run as hookwise
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess

READ_TOKEN = "grafana-read-token-0123456789abcdef"
OPERATE_TOKEN = "oncall-operate-token-0123456789abcdef"
BOSS_TOKEN = "boss-admin-token-0123456789abcdefgh"
WRONG_TOKEN = "not-a-token-of-this-gateway-0123456789"
ENV = {"HOOKWISE_TEST_BOSS_TOKEN": BOSS_TOKEN}

#: who asks, with which token, and the scopes that gives (None: no Authorization header)
PRINCIPALS: dict[str, tuple[str | None, set[str]]] = {
    "nobody": (None, set()),
    "wrong": (WRONG_TOKEN, set()),
    "grafana": (READ_TOKEN, {"read"}),
    "oncall": (OPERATE_TOKEN, {"read", "operate"}),
    "boss": (BOSS_TOKEN, {"read", "operate", "admin"}),
    "admin": (ADMIN_TOKEN, {"read", "operate", "admin"}),  # the single gateway.auth.token
}

#: routes that need `operate`; `ADMIN` lists the writes that say so (any other write: admin)
OPERATE = {
    ("POST", "/api/runs/{run_id:str}/retry"),
    ("POST", "/api/deliveries/{delivery_id:str}/retry"),
    ("POST", "/api/runs/retry"),
    ("POST", "/api/deliveries/retry"),
    ("POST", "/api/requests/{request_id:str}/replay"),
    ("POST", "/api/pause"),
    ("POST", "/api/resume"),
    ("POST", "/ui/requests/{request_id:str}/replay"),
    ("POST", "/ui/runs/{run_id:str}/retry"),
    ("POST", "/ui/deliveries/{delivery_id:str}/retry"),
    ("POST", "/ui/deliveries/retry"),
    ("POST", "/ui/queues/pause"),
    ("POST", "/ui/queues/resume"),
    ("POST", "/api/budgets/{kind:str}/{name:str}/raise"),
    ("POST", "/api/budgets/{kind:str}/{name:str}/release"),
    ("POST", "/ui/queues/budget/raise"),
    ("POST", "/ui/queues/budget/release"),
    ("POST", "/api/alerts/{alert_id:str}/ack"),
    ("POST", "/api/alerts/{alert_id:str}/retry"),
    ("POST", "/ui/alerts/{alert_id:str}/ack"),
    ("POST", "/ui/alerts/{alert_id:str}/retry"),
    ("POST", "/api/approvals/{approval_id:str}/approve"),
    ("POST", "/api/approvals/{approval_id:str}/deny"),
    ("POST", "/ui/approvals/{approval_id:str}/approve"),
    ("POST", "/ui/approvals/{approval_id:str}/deny"),
}
ADMIN = {
    ("POST", "/api/reload"),
    ("DELETE", "/api/requests/{request_id:str}/payload"),
    ("POST", "/ui/requests/{request_id:str}/payload/delete"),
}
#: console routes that only read though they are POSTs
READ = {("POST", "/ui/rules/test"), ("POST", "/ui/logout")}


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
                    {"name": "oncall", "token": OPERATE_TOKEN, "scopes": ["read", "operate"]},
                    {"name": "boss", "token": "${HOOKWISE_TEST_BOSS_TOKEN}", "scopes": ["admin"]},
                ],
            },
            "trustedProxies": ["127.0.0.1"],
        },
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
    }


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(config(), name="scopes", env=ENV)


def expected_scope(method: str, path: str) -> str:
    if (method, path) in OPERATE:
        return "operate"
    if (method, path) in ADMIN:
        return "admin"
    if (method, path) in READ:
        return "read"
    return "read" if method in ("GET", "HEAD") else "admin"


def admin_routes(tmp_path: Path) -> list[tuple[str, str]]:
    """(method, path template) of every route of the app behind the admin guard, and of every
    console route but its login form and static files (the console takes a bearer token too)."""
    cfg = tmp_path / "hookwise.yaml"
    cfg.write_text(yaml.safe_dump(config()), encoding="utf-8")
    gateway = Gateway(load_config(cfg, env=ENV), state_dir=tmp_path / "state")
    app = create_app(gateway)
    found = []
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        console = (route.path == "/ui" or route.path.startswith("/ui/")) and not (
            route.path == "/ui/login" or route.path.startswith("/ui/static/")
        )
        for handler in route.route_handlers:
            guards = [getattr(g, "func", g) for g in handler.resolve_guards()]
            if admin_guard not in guards and not console:
                continue
            for method in handler.http_methods:
                if str(method) not in ("OPTIONS", "HEAD"):
                    found.append((str(method), route.path))
    return sorted(set(found))


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "no-such-id", path)


def _ask(gw: GatewayProcess, method: str, path: str, token: str | None) -> httpx.Response:
    assert gw.client is not None
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    if path.startswith("/ui"):
        data = {"kind": "mapping", "name": "no-such"} if method == "POST" else None
        return gw.client.request(method, _concrete(path), data=data, headers=headers)
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return gw.client.request(method, _concrete(path), json=body, headers=headers)


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """The route table, read once a module (it is the same on both stores)."""
    return admin_routes(tmp_path_factory.mktemp("routes"))


def test_the_route_table_has_the_admin_routes_this_test_expects(
    routes: list[tuple[str, str]],
) -> None:
    assert ("GET", "/api/runs") in routes
    assert ("GET", "/api/audit") in routes
    assert ("GET", "/ui/audit") in routes
    assert len(routes) > 40
    assert set(routes) >= OPERATE | ADMIN


def test_every_admin_route_with_each_scope_and_none(
    gw: GatewayProcess, routes: list[tuple[str, str]]
) -> None:
    problems = []
    for method, path in routes:
        needed = expected_scope(method, path)
        for who, (token, scopes) in PRINCIPALS.items():
            r = _ask(gw, method, path, token)
            body = (
                r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            )
            console = path.startswith("/ui")
            if token is None or not scopes:
                if console and method == "GET" and token is None:  # a browser: to the login
                    ok = r.status_code == 303 and "/ui/login" in r.headers["location"]
                else:
                    ok = r.status_code == 401 and body.get("code") == "unauthorized"
            elif needed not in scopes:
                if console:  # a refusal page, naming the code
                    ok = r.status_code == 403 and "insufficient_scope" in r.text
                else:
                    ok = (
                        r.status_code == 403
                        and body.get("code") == "insufficient_scope"
                        and body.get("scope") == needed
                        and who in body.get("error", "")
                    )
            else:
                ok = r.status_code not in (401, 403)
            if not ok:
                problems.append(
                    f"{method} {path} as {who} (needs {needed}): {r.status_code} {r.text[:120]}"
                )
    assert not problems, "\n".join(problems)


def _audit(gw: GatewayProcess, **params: Any) -> list[dict[str, Any]]:
    return list(gw.admin("/api/audit", **params)["items"])


def _post(
    gw: GatewayProcess, path: str, token: str, body: Any = None, **headers: str
) -> httpx.Response:
    assert gw.client is not None
    return gw.client.post(path, json=body, headers={"Authorization": f"Bearer {token}", **headers})


def test_each_action_is_audited_with_who_from_where_what_and_the_outcome(
    gw: GatewayProcess,
) -> None:
    github = {"kind": "mapping", "name": "github"}
    forwarded = {"X-Forwarded-For": "203.0.113.7"}
    assert _post(gw, "/api/pause", OPERATE_TOKEN, github, **forwarded).status_code == 200
    assert _post(gw, "/api/resume", OPERATE_TOKEN, github, **forwarded).status_code == 200
    assert _post(gw, "/api/runs/run-nope/retry", OPERATE_TOKEN).status_code == 404
    assert _post(gw, "/api/requests/req-nope/replay", OPERATE_TOKEN).status_code == 404
    assert (
        _post(gw, "/api/runs/retry", OPERATE_TOKEN, {"rule": "github", "dryRun": True}).status_code
        == 200
    )
    assert _post(gw, "/api/reload", READ_TOKEN).status_code == 403
    assert _post(gw, "/api/reload", BOSS_TOKEN).status_code == 200
    # from an address of its own: the table test's guesses used up 127.0.0.1's minute
    assert (
        _post(
            gw, "/api/pause", WRONG_TOKEN, github, **{"X-Forwarded-For": "198.51.100.1"}
        ).status_code
        == 401
    )

    entries = _audit(gw, limit=8)
    got = [(e["actor"], e["action"], e["outcome"], e["code"]) for e in reversed(entries)]
    assert got == [
        ("oncall", "pause", "ok", None),
        ("oncall", "resume", "ok", None),
        ("oncall", "retry", "failed", "run_not_found"),
        ("oncall", "replay", "failed", "payload_not_found"),
        ("oncall", "retry_bulk", "ok", None),
        ("grafana", "reload", "refused", "insufficient_scope"),
        ("boss", "reload", "ok", None),
        ("-", "pause", "refused", "unauthorized"),
    ]
    pause, resume, retry, replay, bulk = list(reversed(entries))[:5]
    assert pause["targets"] == {"kind": "mapping", "name": "github"}
    assert pause["client"] == "203.0.113.7"  # as the trusted proxy says, not the socket's peer
    assert resume["client"] == "203.0.113.7"
    assert retry["targets"] == {"runId": "run-nope"} and retry["status"] == 404
    assert replay["targets"] == {"requestId": "req-nope"}
    assert bulk["targets"] == {"kind": "run", "rule": "github", "dryRun": "True"}
    assert all(e["via"] == "api" for e in entries)
    assert entries[0]["client"] == "198.51.100.1"
    assert entries[1]["client"] == "127.0.0.1"  # no proxy header: the socket's peer


def test_the_audit_log_filters_and_pages_like_the_other_lists(gw: GatewayProcess) -> None:
    for _ in range(3):
        assert _post(gw, "/api/reload", READ_TOKEN).status_code == 403
    refused = _audit(gw, actor="grafana", action="reload", outcome="refused")
    assert len(refused) >= 3 and all(e["actor"] == "grafana" for e in refused)
    first = gw.admin("/api/audit", actor="grafana", limit=2)
    assert len(first["items"]) == 2 and first["nextCursor"]
    second = gw.admin("/api/audit", actor="grafana", limit=2, cursor=first["nextCursor"])
    assert second["items"] and second["items"][0]["seq"] < first["items"][-1]["seq"]
    assert gw.client is not None
    bad = gw.client.get(
        "/api/audit", params={"outcome": "maybe"}, headers={"Authorization": f"Bearer {READ_TOKEN}"}
    )
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_query"


def test_hookwise_audit_prints_the_log_with_a_read_token(gw: GatewayProcess) -> None:
    assert _post(gw, "/api/reload", READ_TOKEN).status_code == 403
    env = {"HOOKWISE_ADMIN_TOKEN": READ_TOKEN, "HOOKWISE_URL": gw.url}
    done = hookwise("audit", "--actor", "grafana", "--limit", "1", cwd=gw.workdir, env=env)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[:5] == ["AT", "WHO", "VIA", "CLIENT", "ACTION"]
    assert "grafana" in row and "reload" in row and "refused" in row and "insufficient_scope" in row
    done = hookwise(
        "audit", "--outcome", "refused", "--json", "--limit", "2", cwd=gw.workdir, env=env
    )
    assert done.returncode == 0, done.stderr
    assert [e["outcome"] for e in yaml.safe_load(done.stdout)] == ["refused", "refused"]


def test_no_token_reaches_the_audit_log_or_the_log(gw: GatewayProcess) -> None:
    assert (
        _post(
            gw,
            "/api/pause",
            WRONG_TOKEN,
            {"kind": "mapping", "name": WRONG_TOKEN},
            **{"X-Forwarded-For": "198.51.100.2"},
        ).status_code
        == 401
    )
    assert gw.client is not None
    gw.client.post("/ui/login", data={"token": OPERATE_TOKEN})
    gw.client.post(
        "/ui/login", data={"token": WRONG_TOKEN}, headers={"X-Forwarded-For": "198.51.100.2"}
    )
    assert (
        _post(gw, "/api/pause", OPERATE_TOKEN, {"kind": "mapping", "name": "github"}).status_code
        == 200
    )
    assert (
        _post(gw, "/api/resume", OPERATE_TOKEN, {"kind": "mapping", "name": "github"}).status_code
        == 200
    )
    every = gw.admin("/api/audit", limit=500)
    text = repr(every) + gw.stderr()
    for token in (READ_TOKEN, OPERATE_TOKEN, BOSS_TOKEN, ADMIN_TOKEN, HOOK_TOKEN, WRONG_TOKEN):
        assert token not in text
    logins = _audit(gw, action="login", limit=2)
    assert [(e["actor"], e["outcome"], e["via"], e["code"]) for e in logins] == [
        ("-", "refused", "console", "unauthorized"),
        ("oncall", "ok", "console", None),
    ]


def test_audited_actions_are_counted_in_the_metrics(gw: GatewayProcess) -> None:
    assert _post(gw, "/api/reload", READ_TOKEN).status_code == 403
    assert gw.client is not None
    scrape = gw.client.get("/metrics", headers={"Authorization": f"Bearer {READ_TOKEN}"}).text
    line = next(
        x
        for x in scrape.splitlines()
        if x.startswith("hookwise_audit_entries_total{")
        and 'action="reload"' in x
        and 'outcome="refused"' in x
    )
    assert float(line.rsplit(" ", 1)[1]) >= 1


def test_a_flood_of_guesses_is_recorded_up_to_a_limit_and_counted_beyond(
    gw: GatewayProcess,
) -> None:
    guesser = {"X-Forwarded-For": "198.51.100.99"}
    for _ in range(ANONYMOUS_PER_MINUTE + 5):
        assert _post(gw, "/api/reload", WRONG_TOKEN, **guesser).status_code == 401
    recorded = [e for e in _audit(gw, actor="-", limit=500) if e["client"] == "198.51.100.99"]
    assert len(recorded) == ANONYMOUS_PER_MINUTE
    assert gw.client is not None
    scrape = gw.client.get("/metrics", headers={"Authorization": f"Bearer {READ_TOKEN}"}).text
    assert 'hookwise_audit_entries_total{action="reload",outcome="suppressed"}' in scrape
    assert gw.stderr().count("refusals without a known token from 198.51.100.99") == 1
    # a known token from the same address is always recorded
    assert _post(gw, "/api/reload", READ_TOKEN, **guesser).status_code == 403
    assert _audit(gw, limit=1)[0]["actor"] == "grafana"
