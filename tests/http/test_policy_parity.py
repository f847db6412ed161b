"""Policy that fails closed, through a running gateway: `hooks.allowedAgentIds` judged against the
effective agent of every request (mapped or not), and a replayed request judged by exactly the
same function as a live one (issue 30, points 1 and 6)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _config(**hooks: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "retainPayloads": {"for": "1d"}, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {
            "defaults": {"heartbeat": {"every": 0}},
            "list": [{"id": "main", "default": True}, {"id": "hooks"}],
        },
    }


MAPPINGS = [
    {"id": "plain", "match": {"path": "plain"}, "messageTemplate": "{{text}}", "deliver": False},
    {"id": "to-hooks", "match": {"path": "to-hooks"}, "agentId": "hooks",
     "messageTemplate": "{{text}}", "deliver": False},
    {"id": "note", "match": {"path": "note"}, "action": "wake", "textTemplate": "{{text}}"},
    {"id": "pinned", "match": {"path": "pinned"}, "agentId": "hooks", "sessionKey": "hook:pinned",
     "messageTemplate": "{{text}}", "deliver": False},
]  # fmt: skip


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    return start_module_gateway(
        _config(allowedAgentIds=["hooks"], allowRequestSessionKey=False, mappings=MAPPINGS)
    )


def _refused_by_the_list(r: httpx.Response) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["ok"] is False and body["code"] == "agent_not_allowed"
    assert "hooks.allowedAgentIds" in body["error"]


@pytest.mark.parametrize(
    ("hook", "payload"),
    [
        ("agent", {"message": "m"}),
        ("wake", {"text": "t"}),
        ("plain", {"text": "t"}),
        ("note", {"text": "t"}),
        ("agent", {"message": "m", "agentId": "main"}),
    ],
    ids=["agent", "wake", "mapped-agent", "mapped-wake", "explicit-main"],
)
def test_a_request_for_the_default_agent_is_refused_when_the_list_leaves_it_out(
    gw: GatewayProcess, hook: str, payload: dict[str, Any]
) -> None:
    _refused_by_the_list(gw.hook(hook, payload))


def test_the_listed_agent_is_reached_explicitly_or_through_a_mapping(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "agentId": "hooks"})
    assert r.status_code == 202 and r.json()["sessionKey"].startswith("agent:hooks:hook:")
    assert gw.hook("wake", {"text": "t", "agentId": "hooks"}).status_code == 200
    assert gw.hook("to-hooks", {"text": "t"}).status_code == 202


def test_an_empty_list_refuses_every_request_that_would_run_an_agent(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(_config(allowedAgentIds=[], mappings=MAPPINGS))
    for hook, payload in [
        ("agent", {"message": "m"}),
        ("agent", {"message": "m", "agentId": "hooks"}),
        ("wake", {"text": "t"}),
        ("wake", {"text": "t", "agentId": "hooks"}),
        ("to-hooks", {"text": "t"}),
        ("note", {"text": "t"}),
    ]:
        _refused_by_the_list(gw.hook(hook, payload))
    assert gw.admin("/api/runs")["items"] == []
    assert gw.admin("/api/events", session="main")["items"] == []


# -- one judgement for live and replayed requests ------------------------------------------------


def _request_id(gw: GatewayProcess, path: str, status: int) -> str:
    """The newest request-log line for `path` with `status`."""

    def find() -> str | None:
        for item in gw.admin("/api/requests", limit=200)["items"]:
            if item["path"] == path and item["status"] == status and item["client"] != "replay":
                return item["requestId"]
        return None

    return eventually(find, what=f"a {status} for {path} in the request log")


def _replay(gw: GatewayProcess, request_id: str, *, dry: bool = True) -> httpx.Response:
    params = {"dryRun": "true"} if dry else {}
    return httpx.post(
        f"{gw.url}/api/requests/{request_id}/replay", params=params, headers=AUTH, timeout=10
    )


def test_a_wake_for_an_allowed_agent_replays_as_it_was_accepted(gw: GatewayProcess) -> None:
    live = gw.hook("wake", {"text": "replay me", "agentId": "hooks"})
    assert live.status_code == 200
    request_id = _request_id(gw, "/hooks/wake", 200)
    replayed = _replay(gw, request_id)
    assert replayed.status_code == 200, replayed.text
    [action] = replayed.json()["actions"]
    assert action["kind"] == "wake" and action["fields"]["session"] == "agent:hooks:main"


def test_a_mapping_static_key_replays_when_request_keys_are_off(gw: GatewayProcess) -> None:
    live = gw.hook("pinned", {"text": "t"})
    assert live.status_code == 202 and live.json()["sessionKey"] == "agent:hooks:hook:pinned"
    replayed = _replay(gw, _request_id(gw, "/hooks/pinned", 202))
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["actions"][0]["fields"]["sessionKey"] == "agent:hooks:hook:pinned"


def test_a_request_refused_live_is_refused_on_replay_and_nothing_is_stored(
    gw: GatewayProcess,
) -> None:
    _refused_by_the_list(gw.hook("wake", {"text": "sneak in", "mode": "next-heartbeat"}))
    request_id = _request_id(gw, "/hooks/wake", 400)
    for dry in (True, False):
        r = _replay(gw, request_id, dry=dry)
        assert r.status_code == 422 and r.json()["code"] == "replay_refused"
        assert "agent_not_allowed" in r.json()["error"]
        assert "hooks.allowedAgentIds" in r.json()["error"]
    texts = [e["text"] for e in gw.admin("/api/events", session="main", limit=500)["items"]]
    assert "sneak in" not in texts


# -- configurations the peer loads, loaded: warned at check, refused per request -----------------

LOADS_WITH_WARNINGS = [
    {"id": "no-message", "match": {"path": "no-message"}, "name": "Forgot"},
    {"id": "no-text", "match": {"path": "no-text"}, "action": "wake"},
    {"id": "to-main", "match": {"path": "to-main"}, "sessionKey": "main", "messageTemplate": "m"},
    {"id": "off-prefix", "match": {"path": "off-prefix"}, "sessionKey": "ops:x",
     "messageTemplate": "m"},
    {"id": "fine", "match": {"path": "fine"}, "messageTemplate": "{{text}}", "deliver": False},
]  # fmt: skip


def test_a_questionable_mapping_loads_warns_and_refuses_its_requests(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "allowedSessionKeyPrefixes": ["hook:"],
            "mappings": LOADS_WITH_WARNINGS,
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
    }
    gw = start_gateway(config)  # on a config error the gateway would not start at all
    check = subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", "config", "check", "-c",
         str(gw.config_path)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    for rule in ("no-message", "no-text", "to-main", "off-prefix"):
        assert f"warning: rule {rule!r}" in check.stderr
    refused = {
        "no-message": ("missing_field", "message"),
        "no-text": ("missing_field", "text"),
        "to-main": ("session_key_reserved", "sessionKey"),
        "off-prefix": ("session_key_not_allowed", "sessionKey"),
    }
    for path, (code, field) in refused.items():
        r = gw.hook(path, {"text": "t"})
        assert r.status_code == 400, r.text
        body = r.json()
        assert (body["code"], body["field"], body["rule"]) == (code, field, path)
    assert gw.admin("/api/runs")["items"] == []
    assert gw.hook("fine", {"text": "t"}).status_code == 202  # the other hooks work
