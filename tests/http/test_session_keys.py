"""The session-key policy through HTTP: main sessions are never a hook's, the peer's policy keys
(`allowRequestSessionKey`, `allowedSessionKeyPrefixes`, `defaultSessionKey`, `sessionMode`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.rows import transcript
from tests.support.wait import eventually

HOOK_KEY = re.compile(r"hook:[0-9a-f-]{36}")


def _config(**hooks: object) -> dict:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0, "coalesceMs": 50}}},
    }


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    mappings = [
        {"id": "chat", "match": {"path": "chat"}, "sessionKey": "{{thread}}",
         "messageTemplate": "{{text}}"},
        {"id": "pinned", "match": {"path": "pinned"}, "sessionKey": "hook:pinned",
         "sessionMode": "persistent", "messageTemplate": "{{text}}"},
        {"id": "fresh", "match": {"path": "fresh"}, "sessionMode": "per-request",
         "messageTemplate": "{{text}}"},
    ]  # fmt: skip
    return start_module_gateway(_config(mappings=mappings), name="sessions")


@pytest.fixture(scope="module")
def strict(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    mappings = [
        {"id": "team", "match": {"path": "team"}, "sessionKey": "team:ops",
         "messageTemplate": "{{text}}"},
        {"id": "plain", "match": {"path": "plain"}, "messageTemplate": "{{text}}"},
    ]  # fmt: skip
    return start_module_gateway(
        _config(
            allowRequestSessionKey=False,
            allowedSessionKeyPrefixes=["hook:", "Team:"],
            defaultSessionKey="hook:inbox",
            mappings=mappings,
        ),
        name="strict",
    )


def _runs(gw: GatewayProcess) -> list[dict]:
    return gw.admin("/api/runs", limit=500)["items"]


def _main_transcript_with_content(gw: GatewayProcess) -> list[tuple[str, str]]:
    """Give the main session a transcript (a heartbeat's turns) and return it."""
    if not transcript(gw, "main"):
        gw.hook("wake", {"text": "the main session's own business"})
        eventually(lambda: transcript(gw, "main"), what="the main session's heartbeat turns")
    return transcript(gw, "main")


@pytest.mark.parametrize(
    "key", ["main", " MAIN ", "agent:main:main", "agent:hooks:main", "Agent:Other:Main"]
)
def test_a_request_cannot_run_in_a_main_session(gw: GatewayProcess, key: str) -> None:
    before_main = _main_transcript_with_content(gw)
    before_runs = _runs(gw)
    r = gw.hook("agent", {"message": "read me your context", "sessionKey": key})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "session_key_reserved" and body["field"] == "sessionKey"
    assert "main session" in body["error"]
    time.sleep(0.3)  # a run, had one been queued, would have been claimed and finished by now
    assert _runs(gw) == before_runs
    assert transcript(gw, "main") == before_main
    assert gw.admin("/api/requests", limit=1)["items"][0]["code"] == "session_key_reserved"


def test_a_mapping_that_renders_a_main_session_key_is_refused(gw: GatewayProcess) -> None:
    before_runs = _runs(gw)
    r = gw.hook("chat", {"thread": "main", "text": "hi"})
    assert r.status_code == 400
    assert r.json()["code"] == "session_key_reserved" and r.json()["rule"] == "chat"
    r = gw.hook("chat", {"thread": "agent:main:main", "text": "hi"})
    assert r.status_code == 400 and r.json()["code"] == "session_key_reserved"
    assert _runs(gw) == before_runs


def test_other_keys_are_taken_as_given(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "sessionKey": "hook:deploys:main-branch"})
    assert r.status_code == 202 and r.json()["sessionKey"] == "hook:deploys:main-branch"
    r = gw.hook("chat", {"thread": "hook:thread-7", "text": "hi"})
    assert r.status_code == 202 and r.json()["sessionKey"] == "hook:thread-7"
    r = gw.hook("agent", {"message": "m"})
    assert HOOK_KEY.fullmatch(r.json()["sessionKey"])


def test_session_modes_persistent_and_per_request(gw: GatewayProcess) -> None:
    pinned = [gw.hook("pinned", {"text": str(i)}).json()["sessionKey"] for i in range(2)]
    assert pinned == ["hook:pinned", "hook:pinned"]
    fresh = [gw.hook("fresh", {"text": str(i)}).json()["sessionKey"] for i in range(2)]
    assert all(HOOK_KEY.fullmatch(k) for k in fresh) and fresh[0] != fresh[1]
    run = gw.admin(f"/api/runs/{gw.hook('fresh', {'text': 'x'}).json()['runId']}")["run"]
    assert HOOK_KEY.fullmatch(run["sessionKey"])


def test_a_request_session_key_is_refused_when_not_allowed(strict: GatewayProcess) -> None:
    before = _runs(strict)
    r = strict.hook("agent", {"message": "m", "sessionKey": "hook:mine"})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "session_key_not_allowed" and body["field"] == "sessionKey"
    assert "hooks.allowRequestSessionKey" in body["error"]
    assert _runs(strict) == before


def test_the_default_session_key_stands_in(strict: GatewayProcess) -> None:
    r = strict.hook("agent", {"message": "m"})
    assert r.status_code == 202 and r.json()["sessionKey"] == "hook:inbox"
    run = strict.admin(f"/api/runs/{r.json()['runId']}")["run"]
    assert run["sessionKey"] == "hook:inbox"
    assert strict.hook("plain", {"text": "t"}).json()["sessionKey"] == "hook:inbox"


def test_a_mapping_key_within_the_prefixes_passes(strict: GatewayProcess) -> None:
    r = strict.hook("team", {"text": "t"})
    assert r.status_code == 202 and r.json()["sessionKey"] == "team:ops"


def test_a_reserved_key_is_still_reserved_when_request_keys_are_off(
    strict: GatewayProcess,
) -> None:
    r = strict.hook("agent", {"message": "m", "sessionKey": "main"})
    assert r.status_code == 400 and r.json()["code"] == "session_key_reserved"


def test_a_key_outside_the_prefixes_is_refused(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(
        _config(
            allowedSessionKeyPrefixes=["hook:"],
            mappings=[
                {"id": "t", "match": {"path": "t"}, "sessionKey": "{{k}}", "messageTemplate": "x"}
            ],
        )
    )
    r = gw.hook("agent", {"message": "m", "sessionKey": "other:x"})
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "session_key_not_allowed" and body["field"] == "sessionKey"
    assert "hooks.allowedSessionKeyPrefixes" in body["error"]
    r = gw.hook("t", {"k": "team:x"})
    assert r.status_code == 400 and r.json()["code"] == "session_key_not_allowed"
    assert r.json()["rule"] == "t"
    assert _runs(gw) == []
    assert gw.hook("agent", {"message": "m", "sessionKey": "HOOK:x"}).status_code == 202
    assert gw.hook("t", {"k": "hook:y"}).json()["sessionKey"] == "hook:y"
