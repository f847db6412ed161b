"""An OpenClaw 2026.9 hooks configuration (agents.list, the session policy, the gmail preset's
fan-out) loads unchanged and behaves as the peer's own tests say."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess

OPENCLAW: dict[str, Any] = {
    "hooks": {
        "enabled": True,
        "token": HOOK_TOKEN,
        "path": "/hooks",
        "allowRequestSessionKey": True,
        "allowedSessionKeyPrefixes": ["hook:"],
        "defaultSessionKey": "hook:ingress",
        "allowedAgentIds": ["hooks", "main"],
        "presets": ["gmail"],
        "mappings": [
            {
                "id": "github",
                "match": {"path": "github"},
                "action": "agent",
                "agentId": "hooks",
                "wakeMode": "now",
                "name": "GitHub",
                "sessionKey": "hook:github:{{repository.full_name}}",
                "messageTemplate": "{{action}} on {{repository.full_name}}",
                "deliver": False,
            }
        ],
    },
    "agents": {"list": [{"id": "main", "default": True}, {"id": "hooks", "name": "Hooks"}]},
    "gateway": {"auth": {"token": ADMIN_TOKEN}},
}
GMAIL = {
    "source": "gmail",
    "messages": [
        {"id": "a1", "from": "ann@example.com", "subject": "Invoice", "snippet": "", "body": "x"},
        {"id": "b2", "from": "bob@example.com", "subject": "Lunch", "snippet": "", "body": "y"},
    ],
}


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(OPENCLAW, name="openclaw")


def test_the_gmail_batch_makes_one_run_per_message(gw: GatewayProcess) -> None:
    r = gw.hook("gmail", GMAIL)
    assert r.status_code == 202
    runs = r.json()["runs"]
    assert [x["sessionKey"] for x in runs] == ["hook:gmail:a1", "hook:gmail:b2"]
    messages = [gw.admin(f"/api/runs/{x['runId']}")["run"]["message"] for x in runs]
    assert messages[0].startswith("New email from ann@example.com\nSubject: Invoice")
    assert messages[1].startswith("New email from bob@example.com\nSubject: Lunch")
    again = gw.hook("gmail", GMAIL)  # the provider retries without an Idempotency-Key
    assert again.json()["runs"] == runs and again.headers["idempotent-replayed"] == "true"


def test_the_session_policy_holds(gw: GatewayProcess) -> None:
    assert gw.hook("agent", {"message": "m"}).json()["sessionKey"] == "hook:ingress"
    assert gw.hook("agent", {"message": "m", "sessionKey": "hook:x"}).status_code == 202
    for key, code in (("main", "session_key_reserved"), ("other:x", "session_key_not_allowed")):
        r = gw.hook("agent", {"message": "m", "sessionKey": key})
        assert r.status_code == 400 and r.json()["code"] == code


def test_agents_route_and_rebind(gw: GatewayProcess) -> None:
    r = gw.hook("github", {"action": "opened", "repository": {"full_name": "o/r"}})
    run = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]
    assert (run["agentId"], run["sessionKey"]) == ("hooks", "agent:hooks:hook:github:o/r")
    r = gw.hook("agent", {"message": "m", "agentId": "hooks", "sessionKey": "agent:main:hook:y"})
    assert r.json()["sessionKey"] == "agent:hooks:hook:y"
    r = gw.hook("agent", {"message": "m", "agentId": "x"})
    assert r.status_code == 400 and r.json()["error"].startswith("unknown agentId 'x'")


def test_the_templated_preset_key_needs_request_keys_as_there(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    strict = {**OPENCLAW, "hooks": {**OPENCLAW["hooks"], "allowRequestSessionKey": False}}
    with pytest.raises(RuntimeError) as e:
        start_gateway(strict)
    assert "sessionKey: a templated key depends on the payload" in str(e.value)
