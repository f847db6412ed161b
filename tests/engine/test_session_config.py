"""Load-time rules of the session-key policy and of `agents.list`: each problem with its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookwise.engine.config.load import check_data, load_data
from hookwise.engine.config.sessions import SessionPolicy
from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.ruleset import RuleSet

TOKEN = "a-hook-token-that-is-long-enough"


def _load(hooks: dict[str, Any] | None = None, agents: dict[str, Any] | None = None) -> Any:
    data: dict[str, Any] = {"hooks": {"enabled": True, "token": TOKEN, **(hooks or {})}}
    if agents is not None:
        data["agents"] = agents
    return load_data(data, env={})


def _problems(hooks: dict[str, Any] | None = None, agents: dict[str, Any] | None = None) -> str:
    """The problems of loading the config and compiling its mappings, as the gateway does."""
    data: dict[str, Any] = {"hooks": {"enabled": True, "token": TOKEN, **(hooks or {})}}
    if agents is not None:
        data["agents"] = agents
    loaded, issues = check_data(data, env={})
    if loaded is not None and not issues:
        try:
            RuleSet.compile(
                loaded.config.hooks.mappings, sessions=SessionPolicy.from_config(loaded.config)
            ).close()
        except ConfigError as e:
            issues = e.issues
    assert issues
    return "\n".join(str(i) for i in issues)


@pytest.mark.parametrize(
    ("hooks", "expected"),
    [
        ({"defaultSessionKey": "main"}, "hooks.defaultSessionKey: 'main' names a main session"),
        ({"defaultSessionKey": "agent:ops:main"}, "hooks.defaultSessionKey: 'agent:ops:main'"),
        (
            {"allowedSessionKeyPrefixes": ["team:"], "defaultSessionKey": "hook:x"},
            "hooks.defaultSessionKey: does not start with one of hooks.allowedSessionKeyPrefixes",
        ),
        (
            {"allowedSessionKeyPrefixes": ["team:"]},
            "hooks.allowedSessionKeyPrefixes: must allow the generated hook:<uuid> keys",
        ),
        ({"allowedSessionKeyPrefixes": [" "]}, "hooks.allowedSessionKeyPrefixes: must list"),
        (
            {"allowRequestSessionKey": False, "mappings": [{"sessionKey": "{{k}}", "messageTemplate": "m"}]},
            "hooks.mappings[0].sessionKey: a templated key depends on the payload",
        ),
        (
            {"mappings": [{"sessionMode": "persistent", "sessionKey": "{{k}}", "messageTemplate": "m"}]},
            "hooks.mappings[0].sessionKey: sessionMode: persistent needs a static key",
        ),
        (
            {"mappings": [{"sessionMode": "per-request", "sessionKey": "hook:x", "messageTemplate": "m"}]},
            "hooks.mappings[0].sessionMode: per-request gives every request a fresh key",
        ),
        (
            {"mappings": [{"sessionMode": "sticky", "messageTemplate": "m"}]},
            "hooks.mappings[0].sessionMode",
        ),
    ],
)  # fmt: skip
def test_session_policy_problems_name_their_key(hooks: dict[str, Any], expected: str) -> None:
    assert expected in _problems(hooks)


def test_the_peer_policy_loads() -> None:
    loaded = _load(
        {
            "allowRequestSessionKey": True,
            "allowedSessionKeyPrefixes": ["hook:"],
            "defaultSessionKey": "hook:ingress",
            "allowedAgentIds": ["hooks", "main"],
            "presets": ["gmail"],
        },
        {"list": [{"id": "main", "default": True}, {"id": "hooks", "name": "Hooks"}]},
    )
    assert loaded.config.hooks.default_session_key == "hook:ingress"


def test_a_templated_preset_key_needs_request_keys(tmp_path: Path) -> None:
    loaded = _load({"allowRequestSessionKey": False, "defaultSessionKey": "hook:x"})
    with pytest.raises(ConfigError) as e:
        RuleSet.compile(
            [],
            presets=["gmail"],
            base_dir=tmp_path,
            sessions=SessionPolicy.from_config(loaded.config),
        )
    assert "preset gmail: rule 'gmail': [0].sessionKey: a templated key" in str(e.value)


@pytest.mark.parametrize(
    ("agents", "expected"),
    [
        ({"list": [{"id": "a"}, {"id": "A"}]}, "agents.list[1].id: duplicates agents.list[0].id"),
        ({"list": [{"id": "a b"}]}, "agents.list[0].id: must be 1 to 64 letters"),
        (
            {"list": [{"id": "a", "default": True}, {"id": "b", "default": True}]},
            "agents.list[1].default: only one agent may be the default",
        ),
        ({"list": [{"id": "a", "model": "nomodel"}]}, "agents.list[0].model: 'nomodel' is not"),
        ({"list": [{"id": "a", "maxConcurrentRuns": 0}]}, "agents.list[0].maxConcurrentRuns"),
        ({"list": [{"id": "a", "workspace": "x"}]}, "agents.list[0].workspace"),
    ],
)
def test_agent_list_problems_name_their_key(agents: dict[str, Any], expected: str) -> None:
    assert expected in _problems(agents=agents)


def test_an_unknown_mapping_agent_is_a_warning_not_an_error(tmp_path: Path) -> None:
    loaded = _load(agents={"list": [{"id": "main"}, {"id": "hooks"}]})
    rules = RuleSet.compile(
        [load_data({"hooks": {"mappings": [{"id": "m", "agentId": "nobody", "messageTemplate": "x"}]}}).config.hooks.mappings[0]],
        base_dir=tmp_path,
        sessions=SessionPolicy.from_config(loaded.config),
    )  # fmt: skip
    try:
        assert rules.warnings == (
            "rule 'm': hooks.mappings[0].agentId: unknown agent 'nobody'; its hooks run as the"
            " default agent 'main'",
        )
    finally:
        rules.close()


def test_unknown_allowed_agent_ids_are_warned() -> None:
    loaded = _load({"allowedAgentIds": ["hooks", "ghost", "*"]}, {"list": [{"id": "hooks"}]})
    assert any("hooks.allowedAgentIds: 'ghost'" in w for w in loaded.warnings)


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"action": "agent"}, "messageTemplate: an agent mapping without messageTemplate"),
        ({"action": "wake"}, "textTemplate: a wake mapping without textTemplate"),
        (
            {"sessionKey": "main", "messageTemplate": "m"},
            "sessionKey: 'main' names a main session, never a hook's; every request it matches"
            " is refused (400 session_key_reserved)",
        ),
    ],
)
def test_mappings_the_peer_loads_load_with_a_warning(
    tmp_path: Path, mapping: dict[str, Any], expected: str
) -> None:
    """The peer loads these and refuses the requests they produce: so does hookwise."""
    config = load_data({"hooks": {"mappings": [mapping]}}).config
    ruleset = RuleSet.compile(config.hooks.mappings, base_dir=tmp_path)
    try:
        assert any(expected in w for w in ruleset.warnings), ruleset.warnings
    finally:
        ruleset.close()


def test_an_agents_heartbeat_block_overrides_only_the_keys_it_sets() -> None:
    """Like every other value of an `agents.list` entry, what a `heartbeat` block leaves out is
    taken from `agents.defaults.heartbeat` (not from the built-in defaults)."""
    from hookwise.engine.config.agents import Roster

    loaded = _load(
        agents={
            "defaults": {"heartbeat": {"every": "10m", "ackMaxChars": 500, "coalesceMs": 100}},
            "list": [
                {"id": "main", "default": True},
                {"id": "hooks", "heartbeat": {"every": "1h"}},
                {"id": "quiet", "heartbeat": {"every": 0, "coalesceMs": 400}},
            ],
        }
    )
    roster = Roster.from_config(loaded.config)
    beats = {a.id: a.heartbeat for a in roster.agents}
    assert (float(beats["main"].every), beats["main"].ack_max_chars, beats["main"].coalesce_ms) == (
        600.0,
        500,
        100,
    )
    assert (float(beats["hooks"].every), beats["hooks"].ack_max_chars) == (3600.0, 500)
    assert beats["hooks"].coalesce_ms == 100
    assert (float(beats["quiet"].every), beats["quiet"].ack_max_chars) == (0.0, 500)
    assert beats["quiet"].coalesce_ms == 400
