"""The admin API's reads through a running gateway, on both stores: the OpenAPI description,
typed answers with ISO-8601 UTC times, validated filters, sessions and the links between the
request log and what each request created."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

MAPPINGS: list[dict[str, Any]] = [
    {
        "id": "deploys",
        "match": {"path": "deploys"},
        "name": "Deploy {{service}}",
        "sessionKey": "hook:deploy:{{service}}",
        "messageTemplate": "Deploy of {{service}}",
        "deliver": False,
    },
    {
        "id": "alerts",
        "match": {"path": "alerts"},
        "messageTemplate": "Alert {{n}}",
        "channel": "telegram",
        "to": "12345",
        "deliver": False,
    },
    {
        "id": "pings",
        "match": {"path": "pings"},
        "action": "wake",
        "wakeMode": "next-heartbeat",
        "textTemplate": "Ping {{host}}",
    },
]


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": MAPPINGS},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "channels": {"telegram": {"botToken": "123:abc"}},
    }
    return start_module_gateway(config, name="admin-api")


def refused(gw: GatewayProcess, path: str, **params: Any) -> dict[str, Any]:
    assert gw.client is not None
    r = gw.client.get(path, params=params, headers=AUTH)
    assert r.status_code == 400, r.text
    return r.json()


def iso_to_epoch(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --- the OpenAPI description ---------------------------------------------------------------------


def test_the_openapi_schema_and_its_page_are_served_without_auth(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/schema/openapi.json")
    assert r.status_code == 200
    spec = r.json()
    for path in (
        "/api/runs",
        "/api/runs/{run_id}",
        "/api/runs/{run_id}/retry",
        "/api/runs/retry",
        "/api/events",
        "/api/deliveries",
        "/api/deliveries/{delivery_id}/retry",
        "/api/requests",
        "/api/sessions",
        "/api/sessions/{session_key}",
    ):
        assert path in spec["paths"], path
    # the hook endpoints bypass Litestar's routing; the document describes them all the same
    assert {"/hooks/wake", "/hooks/agent", "/hooks/{name}"} <= set(spec["paths"])
    # typed answers: the run model, times as strings, states as an enum
    run = spec["components"]["schemas"]["Run"]["properties"]
    assert run["createdAt"]["type"] == "string" and "runId" in run and "requestId" in run
    [state] = [p for p in spec["paths"]["/api/runs"]["get"]["parameters"] if p["name"] == "state"]
    assert state["schema"]["enum"] == [
        "queued",
        "held",
        "running",
        "awaiting_approval",
        "succeeded",
        "failed",
        "timed_out",
    ]
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    page = gw.client.get("/schema")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "swagger-ui" in page.text and "hookwise HTTP API" in page.text


def test_the_schema_pages_carry_the_consoles_security_headers(gw: GatewayProcess) -> None:
    from hookwise.server.console.headers import HEADERS

    assert gw.client is not None
    page = gw.client.get("/schema")
    init = page.text.split('<script src="')[-1].split('"')[0]
    assert init == "/schema/swagger-init.js" and "<script>" not in page.text  # no inline script
    for path in ("/schema", "/schema/openapi.json", init, "/schema/assets/swagger-ui.css"):
        r = gw.client.get(path)
        assert r.status_code == 200, path
        for name, value in HEADERS.items():
            assert r.headers.get(name) == value, (path, name)
    assert "SwaggerUIBundle" in gw.client.get(init).text
    assert "script-src 'self';" in page.headers["content-security-policy"]


def test_a_nul_in_an_id_or_a_filter_is_refused_before_the_store(gw: GatewayProcess) -> None:
    # PostgreSQL holds no NUL in text: asked for one, it failed the request with a 500
    assert gw.client is not None
    r = gw.client.get("/api/runs/a%00b", headers=AUTH)
    assert (r.status_code, r.json()["code"]) == (404, "not_found")
    r = gw.client.get("/api/runs", params={"session": "a\x00b"}, headers=AUTH)
    assert (r.status_code, r.json()["code"], r.json()["field"]) == (400, "invalid_query", "session")
    r = gw.client.post("/api/runs/retry", json={"session": "a\x00b"}, headers=AUTH)
    assert (r.status_code, r.json()["code"], r.json()["field"]) == (400, "invalid_body", "session")


# --- answers ---------------------------------------------------------------------------------------


def test_runs_answer_typed_fields_with_iso_utc_times_and_link_to_their_request(
    gw: GatewayProcess,
) -> None:
    before = time.time()
    body = gw.hook("deploys", {"service": "api"}).json()
    run = eventually(
        lambda: (r := gw.admin(f"/api/runs/{body['runId']}")["run"])["finishedAt"] and r
    )
    assert run["state"] == "succeeded" and run["rule"] == "deploys"
    for key in ("createdAt", "startedAt", "finishedAt"):
        assert ISO.match(run[key]), run[key]
    assert before - 1 <= iso_to_epoch(run["createdAt"]) <= time.time() + 1
    assert run["deliveries"] == [] and run["retries"] == []
    # the request log line links to the run, the run back to the line
    [entry] = [
        e
        for e in gw.admin("/api/requests", rule="deploys")["items"]
        if body["runId"] in e["runIds"]
    ]
    assert entry["requestId"] == run["requestId"] and entry["eventIds"] == []
    assert ISO.match(entry["at"])
    one = gw.admin(f"/api/requests/{entry['requestId']}")["request"]
    assert one == entry


def test_a_wake_request_links_to_its_event(gw: GatewayProcess) -> None:
    body = gw.hook("pings", {"host": "db1"}).json()
    [entry] = [e for e in gw.admin("/api/requests")["items"] if e["eventIds"]][:1]
    assert entry["eventIds"] == [body["eventId"]] and entry["runIds"] == []
    [event] = [
        e
        for e in gw.admin("/api/events", session="main")["items"]
        if e["eventId"] == body["eventId"]
    ]
    assert event["text"] == "Ping db1" and ISO.match(event["createdAt"])


def test_unknown_request_is_404(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/api/requests/nope", headers=AUTH)
    assert r.status_code == 404 and r.json()["code"] == "request_not_found"


# --- filters ----------------------------------------------------------------------------------------


def test_runs_filter_by_rule_session_and_channel(gw: GatewayProcess) -> None:
    deploy = gw.hook("deploys", {"service": "web"}).json()["runId"]
    alert = gw.hook("alerts", {"n": 1}).json()["runId"]
    by_rule = [r["runId"] for r in gw.admin("/api/runs", rule="alerts")["items"]]
    assert alert in by_rule and deploy not in by_rule
    by_session = gw.admin("/api/runs", session="hook:deploy:web")["items"]
    assert [r["runId"] for r in by_session] == [deploy]
    by_channel = [r["runId"] for r in gw.admin("/api/runs", channel="telegram")["items"]]
    assert alert in by_channel and deploy not in by_channel
    assert gw.admin("/api/runs", rule="alerts", channel="slack")["items"] == []


def test_since_and_until_narrow_to_a_window(gw: GatewayProcess) -> None:
    first = gw.hook("deploys", {"service": "a"}).json()["runId"]
    time.sleep(0.05)
    middle = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    second = gw.hook("deploys", {"service": "b"}).json()["runId"]
    after = [r["runId"] for r in gw.admin("/api/runs", since=middle.isoformat())["items"]]
    before = [r["runId"] for r in gw.admin("/api/runs", until=middle.isoformat())["items"]]
    assert second in after and first not in after
    assert first in before and second not in before
    # pages inside a window: every run once, newest first
    seen, cursor = [], None
    while True:
        params = {"until": middle.isoformat(), "limit": 1} | ({"cursor": cursor} if cursor else {})
        page = gw.admin("/api/runs", **params)
        seen += [r["runId"] for r in page["items"]]
        if (cursor := page["nextCursor"]) is None:
            break
    assert seen == before and len(seen) == len(set(seen)) and first in seen
    # an offset-less time is UTC
    naive = middle.replace(tzinfo=None).isoformat()
    assert [r["runId"] for r in gw.admin("/api/runs", since=naive)["items"]] == after
    future = (middle + dt.timedelta(days=1)).isoformat()
    assert gw.admin("/api/requests", since=future)["items"] == []
    assert gw.admin("/api/events", since=future)["items"] == []


def test_requests_filter_by_status(gw: GatewayProcess) -> None:
    assert gw.hook("nothing-here", {}).status_code == 404  # no rule; logged with the next commit
    items = eventually(lambda: gw.admin("/api/requests", status=404)["items"])
    assert all(i["status"] == 404 and i["path"] == "/hooks/nothing-here" for i in items)
    assert all(i["status"] == 202 for i in gw.admin("/api/requests", status=202)["items"])


def test_a_bad_state_names_the_parameter_and_the_allowed_values(gw: GatewayProcess) -> None:
    body = refused(gw, "/api/runs", state="bogus")
    assert body == {
        "ok": False,
        "error": "state must be one of: queued, held, running, awaiting_approval, succeeded, failed,"
        " timed_out",
        "code": "invalid_query",
        "field": "state",
    }
    body = refused(gw, "/api/deliveries", state="bogus")
    assert body["field"] == "state" and "pending, sent, skipped, failed" in body["error"]
    body = refused(gw, "/api/heartbeats", state="queued")
    assert body["field"] == "state" and "succeeded" in body["error"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/runs", {"since": "yesterday"}, "since"),
        ("/api/events", {"until": "2026-13-45"}, "until"),
        ("/api/runs", {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ("/api/requests", {"status": "abc"}, "status"),
        ("/api/requests", {"status": "42"}, "status"),
        ("/api/runs", {"rule": "x" * 600}, "rule"),
        ("/api/events", {"cursor": "9" * 19}, "cursor"),  # beyond 64 bits
    ],
)
def test_bad_filter_values_are_400_naming_the_parameter(
    gw: GatewayProcess, path: str, params: dict[str, str], field: str
) -> None:
    body = refused(gw, path, **params)
    assert body["ok"] is False and body["code"] == "invalid_query" and body["field"] == field
    assert field in body["error"]


# --- sessions --------------------------------------------------------------------------------------


def test_sessions_list_by_key_and_show_their_transcript(gw: GatewayProcess) -> None:
    run_id = gw.hook("deploys", {"service": "sess"}).json()["runId"]
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded")
    keys: list[str] = []
    cursor = None
    while True:
        page = gw.admin("/api/sessions", limit=2, **({"cursor": cursor} if cursor else {}))
        keys += [s["sessionKey"] for s in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert "hook:deploy:sess" in keys and keys == sorted(keys) and len(keys) == len(set(keys))
    transcript = gw.admin("/api/sessions/hook:deploy:sess")
    assert transcript["sessionKey"] == "hook:deploy:sess"
    turns = transcript["items"]  # newest first: the reply, then the message
    assert [t["role"] for t in turns] == ["assistant", "user"]
    assert turns[0]["content"] == "echo: Deploy of sess"
    assert "Deploy of sess" in turns[1]["content"]  # inside the untrusted-content markers
    assert all(t["runId"] == run_id and ISO.match(t["createdAt"]) for t in turns)


def test_an_unknown_session_is_404(gw: GatewayProcess) -> None:
    assert gw.client is not None
    r = gw.client.get("/api/sessions/hook:nobody", headers=AUTH)
    assert r.status_code == 404 and r.json()["code"] == "session_not_found"


def test_the_new_routes_need_the_gateway_token(gw: GatewayProcess) -> None:
    assert gw.client is not None
    for path in ("/api/sessions", "/api/sessions/main", "/api/requests/x"):
        r = gw.client.get(path)
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    for path in ("/api/runs/x/retry", "/api/runs/retry", "/api/deliveries/retry"):
        r = httpx.post(gw.url + path, json={})
        assert r.status_code == 401 and r.json()["code"] == "unauthorized"
