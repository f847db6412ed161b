"""POST {hook_path}/agent: every field of the agent payload, the 202 answer, the queued run."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {
            "defaults": {
                "models": {
                    "openai/gpt-4o": {"alias": "gpt"},
                    "anthropic/claude-sonnet-4": {},
                },
                "maxTimeoutSeconds": 900,
            }
        },
        # configured (a model of an unconfigured provider is refused at the door), unreachable
        "models": {
            "providers": {
                "openai": {"api": "openai", "baseUrl": "http://127.0.0.1:9/v1"},
                "anthropic": {"api": "anthropic", "baseUrl": "http://127.0.0.1:9"},
            }
        },
        "channels": {"telegram": {"botToken": "123:abc"}},
    }
    return start_module_gateway(config, name="agent")


def _run(gw: GatewayProcess, run_id: str) -> dict:
    return gw.admin(f"/api/runs/{run_id}")["run"]


def test_agent_records_a_queued_run_and_answers_202(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "Summarise the build failure", "name": "CI"})
    assert r.status_code == 202
    body = r.json()
    assert body["ok"] is True
    assert re.fullmatch(r"hook:[0-9a-f-]{36}", body["sessionKey"])
    run = _run(gw, body["runId"])
    assert run["state"] in ("queued", "running", "succeeded")  # the runtime may already have it
    assert run["sessionKey"] == body["sessionKey"]
    assert run["name"] == "CI"
    assert run["channel"] == "last" and run["deliver"] is True and run["wakeMode"] == "now"


def test_every_field_is_recorded(gw: GatewayProcess) -> None:
    payload = {
        "message": "hello",
        "name": "Deploys",
        "sessionKey": "hook:deploys",
        "wakeMode": "next-heartbeat",
        "deliver": True,
        "channel": "telegram",
        "to": "-1001234567890",
        "model": "gpt",
        "thinking": "high",
        "timeoutSeconds": 120,
    }
    r = gw.hook("agent", payload)
    assert r.status_code == 202, r.text
    assert r.json()["sessionKey"] == "hook:deploys"
    run = _run(gw, r.json()["runId"])
    assert run["name"] == "Deploys"
    assert run["wakeMode"] == "next-heartbeat"
    assert run["channel"] == "telegram" and run["to"] == "-1001234567890"
    assert run["model"] == "openai/gpt-4o"  # the alias resolved
    assert run["thinking"] == "high" and run["timeoutSeconds"] == 120


def test_channel_aliases_are_normalised(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "channel": "imsg", "deliver": False})
    assert r.status_code == 202
    assert _run(gw, r.json()["runId"])["channel"] == "imessage"


@pytest.mark.parametrize(
    ("payload", "code", "field"),
    [
        ({}, "missing_field", "message"),
        ({"message": "  "}, "missing_field", "message"),
        ({"message": ["x"]}, "invalid_field", "message"),
        ({"message": "m", "name": 3}, "invalid_field", "name"),
        ({"message": "m", "sessionKey": ""}, "invalid_field", "sessionKey"),
        ({"message": "m", "sessionKey": "a\nb"}, "invalid_field", "sessionKey"),
        ({"message": "m", "wakeMode": "soon"}, "invalid_field", "wakeMode"),
        ({"message": "m", "deliver": "yes"}, "invalid_field", "deliver"),
        ({"message": "m", "channel": "fax"}, "unknown_channel", "channel"),
        ({"message": "m", "channel": 7}, "invalid_field", "channel"),
        ({"message": "m", "channel": "slack"}, "channel_not_configured", "channel"),
        ({"message": "m", "to": 5}, "invalid_field", "to"),
        ({"message": "m", "model": ""}, "invalid_field", "model"),
        ({"message": "m", "model": "openai/gpt-3.5"}, "model_not_allowed", "model"),
        ({"message": "m", "thinking": "extreme"}, "invalid_field", "thinking"),
        ({"message": "m", "timeoutSeconds": 0}, "invalid_field", "timeoutSeconds"),
        ({"message": "m", "timeoutSeconds": -5}, "invalid_field", "timeoutSeconds"),
        ({"message": "m", "timeoutSeconds": "60"}, "invalid_field", "timeoutSeconds"),
        ({"message": "m", "timeoutSeconds": True}, "invalid_field", "timeoutSeconds"),
        ({"message": "m", "timeoutSeconds": 901}, "invalid_field", "timeoutSeconds"),
        (
            {"message": "m", "allowUnsafeExternalContent": True},
            "unknown_field",
            "allowUnsafeExternalContent",
        ),
        ({"message": "m", "sessionkey": "x"}, "unknown_field", "sessionkey"),
    ],
)
def test_invalid_agent_payload_is_refused_and_nothing_is_recorded(
    gw: GatewayProcess, payload: dict, code: str, field: str
) -> None:
    before = len(gw.admin("/api/runs", limit=500)["items"])
    r = gw.hook("agent", payload)
    assert r.status_code == 400, r.text
    body = r.json()
    assert (body["ok"], body["code"], body["field"]) == (False, code, field)
    assert len(gw.admin("/api/runs", limit=500)["items"]) == before


def test_an_unconfigured_channel_is_fine_when_not_delivering(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "channel": "slack", "deliver": False})
    assert r.status_code == 202


def test_last_is_never_refused_at_the_door(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "channel": "last", "deliver": True})
    assert r.status_code == 202


def test_allowlisted_model_by_full_name(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "model": "anthropic/claude-sonnet-4"})
    assert r.status_code == 202
    assert _run(gw, r.json()["runId"])["model"] == "anthropic/claude-sonnet-4"
