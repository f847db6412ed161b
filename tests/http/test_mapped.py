"""POST {hook_path}/<name> through mappings: templated actions, routing, order, errors, respond,
idempotency, form bodies and what templates may see. Transforms: test_mapped_transforms.py;
the shipped examples: test_mapped_examples.py; reload: test_reload.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess, base_config
from tests.support.mapped import events_of, finished_run, get_run, logged, runs_of
from tests.support.wait import eventually

# Put into every payload below; it must never reach the server's log.
SECRET = "payload-marker-5f1e0c9a"

MAPPINGS: list[dict[str, Any]] = [
    {
        "id": "deploys",
        "match": {"path": "deploys"},
        "extract": {"who": "$.actor.login"},
        "name": "Deploy {{service}}",
        "sessionKey": "hook:deploy:{{service}}",
        "messageTemplate": "Deploy of {{service}} {{payload.version}} by {{who}}: {{notes}}",
    },
    {
        "id": "pings",
        "match": {"path": "pings"},
        "action": "wake",
        "wakeMode": "next-heartbeat",
        "textTemplate": "Ping from {{host}} ({{ tags | join(',') }})",
    },
    # One generic path, routed by the payload's `source`.
    {
        "id": "ingest-ci",
        "match": {"path": "ingest", "source": "ci"},
        "messageTemplate": "CI: {{status}}",
    },
    {
        "id": "ingest-pager",
        "match": {"path": "ingest", "source": "pager"},
        "action": "wake",
        "textTemplate": "Pager: {{summary}}",
    },
    # Rendered actions that validation refuses.
    {"id": "empty-message", "match": {"path": "empty"}, "messageTemplate": "{{ note }}"},
    {
        "id": "unknown-channel",
        "match": {"path": "fax"},
        "messageTemplate": "m",
        "channel": "fax",
    },
    {
        "id": "unconfigured-channel",
        "match": {"path": "slack"},
        "messageTemplate": "m",
        "channel": "slack",
    },
    {
        "id": "chosen-model",
        "match": {"path": "model"},
        "messageTemplate": "m",
        "model": "{{model}}",
    },
    {
        "id": "needs-ticket",
        "match": {"path": "ticket"},
        "messageTemplate": "Ticket {{ ticket | required }}",
    },
    {
        "id": "acked",
        "match": {"path": "acked"},
        "sessionKey": "hook:acked:{{id}}",
        "messageTemplate": "acked {{id}}",
        "respond": {
            "status": 200,
            "body": {"received": True, "id": "{{id}}"},
            "headers": {"X-Provider-Ack": "yes"},
        },
    },
    {
        "id": "idem",
        "match": {"path": "idem"},
        "messageTemplate": "idempotent {{n}}",
    },
    {
        "id": "form",
        "match": {"path": "form"},
        "sessionKey": "hook:form:{{repository.full_name}}",
        "messageTemplate": "{{action}} on {{repository.full_name}}",
    },
    # SendGrid's event webhook posts a JSON array of events
    {
        "id": "sendgrid",
        "match": {"path": "sendgrid", "when": {"jsonpath": "$[0].sg_event_id", "exists": True}},
        "action": "wake",
        "forEach": "$",
        "textTemplate": "{{item.event}} for {{item.email}} ({{index}} of {{payload|length}})",
    },
    {
        "id": "array-names",
        "match": {"path": "array-names"},
        "action": "wake",
        "textTemplate": "[{{event}}]{{payload[1]}}",
    },
    {
        "id": "context",
        "match": {"path": "context"},
        "sessionKey": "hook:context:{{query.run}}",
        "messageTemplate": (
            "trace={{headers['x-trace']}} env={{query.env}} path={{path}} "
            "auth=[{{headers.authorization}}] svc=[{{headers['x-service-token']}}] "
            "tok=[{{query.token}}] headers={{headers}} query={{query}}"
        ),
    },
]


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "presets": ["gmail"],
            "mappings": MAPPINGS,
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"models": {"openai/gpt-4o": {"alias": "gpt"}}}},
        "models": {"providers": {"openai": {"api": "openai", "baseUrl": "http://127.0.0.1:9/v1"}}},
        "channels": {"telegram": {"botToken": "123:abc"}},
    }
    return start_module_gateway(config, name="mapped")


# ------------------------------------------------------------------------------- accepted


def test_a_templated_mapping_records_the_rendered_run_and_answers_202(gw: GatewayProcess) -> None:
    payload = {
        "service": "api",
        "version": "v1.4.2",
        "actor": {"login": "ada"},
        "notes": SECRET,
    }
    r = gw.hook("deploys", payload)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body == {
        "ok": True,
        "runId": body["runId"],
        "sessionKey": "hook:deploy:api",
        "rule": "deploys",
    }
    run = finished_run(gw, body["runId"])
    assert (run["rule"], run["name"], run["sessionKey"]) == (
        "deploys",
        "Deploy api",
        "hook:deploy:api",
    )
    assert run["channel"] == "last" and run["wakeMode"] == "now"
    assert run["reply"] == f"echo: Deploy of api v1.4.2 by ada: {SECRET}"


def test_a_wake_mapping_answers_200_and_records_the_event(gw: GatewayProcess) -> None:
    r = gw.hook("pings", {"host": "db-1", "tags": ["disk", SECRET]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body == {
        "ok": True,
        "mode": "next-heartbeat",
        "eventId": body["eventId"],
        "rule": "pings",
    }
    [event] = [e for e in events_of(gw, "pings") if e["eventId"] == body["eventId"]]
    assert event["text"] == f"Ping from db-1 (disk,{SECRET})"
    assert event["mode"] == "next-heartbeat" and event["trusted"] is False


@pytest.mark.parametrize(
    ("payload", "status", "rule", "stored"),
    [
        ({"source": "ci", "status": "green"}, 202, "ingest-ci", "runId"),
        ({"source": "pager", "summary": "db down"}, 200, "ingest-pager", "eventId"),
    ],
)
def test_match_source_routes_one_path_to_different_rules(
    gw: GatewayProcess, payload: dict[str, Any], status: int, rule: str, stored: str
) -> None:
    r = gw.hook("ingest", payload)
    assert r.status_code == status, r.text
    assert r.json()["rule"] == rule
    made = runs_of(gw, rule) if stored == "runId" else events_of(gw, rule)
    assert r.json()[stored] in [x[stored] for x in made]


def test_a_source_no_rule_knows_is_404_and_records_nothing(gw: GatewayProcess) -> None:
    before = len(runs_of(gw, "ingest-ci")) + len(events_of(gw, "ingest-pager"))
    r = gw.hook("ingest", {"source": "cron", "status": SECRET})
    assert r.status_code == 404
    assert r.json()["code"] == "not_found" and r.json()["ok"] is False
    assert len(runs_of(gw, "ingest-ci")) + len(events_of(gw, "ingest-pager")) == before


def test_the_gmail_preset_makes_one_run_per_message(gw: GatewayProcess) -> None:
    payload = {
        "source": "gmail",
        "messages": [
            {
                "id": "m-1",
                "from": "ada@example.com",
                "subject": "Invoice",
                "snippet": "s1",
                "body": SECRET,
            },
            {
                "id": "m-2",
                "from": "bob@example.com",
                "subject": "Lunch?",
                "snippet": "s2",
                "body": "b2",
            },
        ],
    }
    r = gw.hook("gmail", payload)
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["ok"] is True and body["rule"] == "gmail" and body["events"] == []
    assert [x["sessionKey"] for x in body["runs"]] == ["hook:gmail:m-1", "hook:gmail:m-2"]
    replies = [finished_run(gw, x["runId"]) for x in body["runs"]]
    assert [(x["rule"], x["name"]) for x in replies] == [("gmail", "Gmail"), ("gmail", "Gmail")]
    assert (
        replies[0]["reply"]
        == f"echo: New email from ada@example.com\nSubject: Invoice\ns1\n{SECRET}"
    )
    assert replies[1]["reply"] == "echo: New email from bob@example.com\nSubject: Lunch?\ns2\nb2"


def test_no_rule_for_the_name_is_404_and_logged(gw: GatewayProcess) -> None:
    r = gw.hook("nobody-home", {"x": SECRET})
    assert r.status_code == 404
    body = r.json()
    assert (body["ok"], body["code"]) == (False, "not_found")
    assert "nobody-home" in body["error"]
    entry = eventually(lambda: logged(gw, "/hooks/nobody-home"), what="the request log line")[0]
    assert (entry["status"], entry["code"], entry["action"]) == (404, "not_found", None)


# ------------------------------------------------------------------------------- refused


@pytest.mark.parametrize(
    ("name", "payload", "rule", "code", "field"),
    [
        ("empty", {"other": SECRET}, "empty-message", "missing_field", "message"),
        ("fax", {"x": SECRET}, "unknown-channel", "unknown_channel", "channel"),
        ("slack", {"x": SECRET}, "unconfigured-channel", "channel_not_configured", "channel"),
        ("model", {"model": "openai/gpt-3.5"}, "chosen-model", "model_not_allowed", "model"),
    ],
)
def test_an_invalid_rendered_action_is_400_naming_field_and_rule(
    gw: GatewayProcess, name: str, payload: dict[str, Any], rule: str, code: str, field: str
) -> None:
    r = gw.hook(name, payload)
    assert r.status_code == 400, r.text
    body = r.json()
    assert (body["ok"], body["code"], body["field"], body["rule"]) == (False, code, field, rule)
    assert f"rule {rule!r} produced an invalid action" in body["error"]
    assert runs_of(gw, rule) == []
    entry = eventually(lambda: logged(gw, f"/hooks/{name}"), what="the request log line")[0]
    assert (entry["status"], entry["code"], entry["rule"]) == (400, code, rule)


def test_an_allowlisted_model_alias_passes_validation(gw: GatewayProcess) -> None:
    r = gw.hook("model", {"model": "gpt"})
    assert r.status_code == 202, r.text
    assert get_run(gw, r.json()["runId"])["model"] == "openai/gpt-4o"


def test_a_required_value_that_is_missing_is_400_missing_value(gw: GatewayProcess) -> None:
    r = gw.hook("ticket", {"title": SECRET})
    assert r.status_code == 400, r.text
    body = r.json()
    assert (body["code"], body["rule"], body["field"]) == (
        "missing_value",
        "needs-ticket",
        "messageTemplate",
    )
    assert SECRET not in body["error"]
    assert runs_of(gw, "needs-ticket") == []


def test_a_required_value_that_is_present_renders(gw: GatewayProcess) -> None:
    r = gw.hook("ticket", {"ticket": "T-7"})
    assert r.status_code == 202, r.text
    assert finished_run(gw, r.json()["runId"])["reply"] == "echo: Ticket T-7"


# ------------------------------------------------------------------ respond, idempotency, body


def test_respond_sends_the_fixed_answer_and_still_records_the_run(gw: GatewayProcess) -> None:
    r = gw.hook("acked", {"id": "evt-991", "x": SECRET})
    assert r.status_code == 200, r.text
    assert r.json() == {"received": True, "id": "evt-991"}
    assert r.headers["x-provider-ack"] == "yes"
    [run] = [x for x in runs_of(gw, "acked") if x["sessionKey"] == "hook:acked:evt-991"]
    assert finished_run(gw, run["runId"])["reply"] == "echo: acked evt-991"


def test_a_replayed_idempotency_key_on_a_mapped_hook_creates_nothing(gw: GatewayProcess) -> None:
    headers = {"Idempotency-Key": "mapped-delivery-1"}
    first = gw.hook("idem", {"n": 1}, headers=headers)
    again = gw.hook("idem", {"n": 1}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json() and first.json()["rule"] == "idem"
    assert again.headers["idempotent-replayed"] == "true"
    assert [x["runId"] for x in runs_of(gw, "idem")] == [first.json()["runId"]]


def test_a_form_encoded_payload_field_is_the_payload(gw: GatewayProcess) -> None:
    inner = {"action": "opened", "repository": {"full_name": "acme/site"}, "x": SECRET}
    r = gw.hook(
        "form",
        content=urlencode({"payload": json.dumps(inner)}).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 202, r.text
    assert r.json()["sessionKey"] == "hook:form:acme/site"
    assert finished_run(gw, r.json()["runId"])["reply"] == "echo: opened on acme/site"


@pytest.mark.parametrize(
    ("how", "token", "headers", "params"),
    [
        ("bearer", HOOK_TOKEN, {}, {}),
        ("header", None, {"X-Service-Token": HOOK_TOKEN}, {}),
        ("query", None, {}, {"token": HOOK_TOKEN}),
    ],
)
def test_templates_see_headers_and_query_but_never_the_token(
    gw: GatewayProcess, how: str, token: str | None, headers: dict[str, str], params: dict[str, str]
) -> None:
    r = gw.hook(
        "context",
        {"x": SECRET},
        token=token,
        headers={"X-Trace": "t-42", **headers},
        params={"env": "prod", "run": how, **params},
    )
    assert r.status_code == 202, r.text
    reply = finished_run(gw, r.json()["runId"])["reply"]
    assert reply.startswith(
        "echo: trace=t-42 env=prod path=context auth=[] svc=[] tok=[] headers={"
    )
    assert HOOK_TOKEN not in reply
    assert '"x-trace":"t-42"' in reply and '"env":"prod"' in reply  # dicts render as JSON


# ------------------------------------------------------------------------------- overrides


def test_a_custom_gmail_mapping_is_tried_before_the_preset(start_gateway) -> None:
    custom = {
        "id": "my-gmail",
        "match": {"path": "gmail"},
        "action": "wake",
        "textTemplate": "Mail: {{messages[0].subject}}",
    }
    gw = start_gateway(base_config(presets=["gmail"], mappings=[custom]))
    r = gw.hook("gmail", {"source": "gmail", "messages": [{"id": "1", "subject": "Hi"}]})
    assert r.status_code == 200, r.text
    assert r.json()["rule"] == "my-gmail"
    assert [e["text"] for e in events_of(gw, "my-gmail")] == ["Mail: Hi"]
    assert gw.admin("/api/runs")["items"] == []


# ------------------------------------------------------------------------------------ logs


def test_payloads_and_the_token_never_reach_the_log(gw: GatewayProcess) -> None:
    # Runs last in this module: every test above sent SECRET in a payload, some of them refused.
    r = gw.hook("ticket", {"title": SECRET})
    assert r.status_code == 400
    log = gw.stderr()
    assert SECRET not in log
    assert HOOK_TOKEN not in log


# ------------------------------------------------------------------------- top-level arrays


def _post_raw(gw: GatewayProcess, name: str, body: bytes) -> Any:
    return gw.hook(name, content=body, headers={"Content-Type": "application/json"})


def test_a_mapped_hook_takes_a_top_level_array_and_fans_out_over_it(gw: GatewayProcess) -> None:
    """SendGrid's event webhook posts an array of events: `forEach: $` makes one action each."""
    events = [
        {"email": "a@example.com", "event": "delivered", "sg_event_id": "e1"},
        {"email": "b@example.com", "event": "bounce", "sg_event_id": SECRET},
    ]
    r = _post_raw(gw, "sendgrid", json.dumps(events).encode())
    assert r.status_code == 200, r.text
    ids = {e["eventId"] for e in r.json()["events"]}
    texts = sorted(e["text"] for e in events_of(gw, "sendgrid") if e["eventId"] in ids)
    assert texts == ["bounce for b@example.com (1 of 2)", "delivered for a@example.com (0 of 2)"]


def test_an_array_has_no_bare_names_but_is_the_payload(gw: GatewayProcess) -> None:
    """A bare name reads an object's keys: an array whose items happen to be names gives none
    of them (and nothing breaks)."""
    r = _post_raw(gw, "array-names", b'["event", "second"]')
    assert r.status_code == 200, r.text
    [event] = [e for e in events_of(gw, "array-names") if e["eventId"] == r.json()["eventId"]]
    assert event["text"] == "[]second"


def test_an_array_no_rule_matches_is_404_and_a_scalar_is_still_400(gw: GatewayProcess) -> None:
    r = _post_raw(gw, "sendgrid", b'[{"event": "delivered"}]')  # no sg_event_id: no rule
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    for body in (b'"text"', b"42", b"null"):
        r = _post_raw(gw, "sendgrid", body)
        assert r.status_code == 400 and r.json()["code"] == "invalid_body", body
        assert r.json()["error"] == "the body must be a JSON object or array"


def test_wake_and_agent_still_take_only_an_object(gw: GatewayProcess) -> None:
    for name in ("wake", "agent"):
        r = _post_raw(gw, name, b'[{"text": "x", "message": "y"}]')
        assert r.status_code == 400, name
        assert r.json()["code"] == "invalid_body"
        assert r.json()["error"] == "the body must be a JSON object"
