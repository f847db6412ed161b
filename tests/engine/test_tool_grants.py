"""Tool configuration and grants: `tools.mcpServers`, the limits, and `tools:` lists on mappings
and agents (closed by default; an unknown server is a load warning)."""

from __future__ import annotations

import pytest

from hookwise.engine.config.agents import Roster
from hookwise.engine.config.grants import NO_TOOLS, Grant
from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.ruleset import RuleSet

SERVERS = {
    "github": {"command": "github-mcp", "args": ["stdio"], "env": {"T": "${GH}"}, "cwd": "."},
    "monitoring": {"url": "http://127.0.0.1:9400/mcp", "headers": {"Authorization": "Bearer x"}},
}


def test_servers_and_limits_load_with_env_references_resolved() -> None:
    loaded = load_data({"tools": {"mcpServers": SERVERS, "maxCallsPerRun": 3}}, env={"GH": "tok"})
    tools = loaded.config.tools
    assert tools.mcp_servers["github"].env == {"T": "tok"}
    assert tools.mcp_servers["github"].transport == "stdio"
    assert tools.mcp_servers["monitoring"].transport == "http"
    assert (tools.max_calls_per_run, tools.call_timeout_seconds, tools.max_result_bytes) == (
        3,
        30,
        65536,
    )


@pytest.mark.parametrize(
    ("server", "path"),
    [
        ({}, "tools.mcpServers.x"),
        ({"command": "a", "url": "http://h/mcp"}, "tools.mcpServers.x"),
        ({"url": "ftp://h/mcp"}, "tools.mcpServers.x.url"),
        ({"url": "http://h/mcp", "args": ["a"]}, "tools.mcpServers.x.args"),
        ({"command": "a", "headers": {"a": "b"}}, "tools.mcpServers.x.headers"),
    ],
)
def test_a_malformed_server_is_refused_with_its_key_path(server: dict, path: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"tools": {"mcpServers": {"x": server}}})
    assert path in [i.path for i in e.value.issues]


def test_an_unset_env_reference_is_an_error() -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"tools": {"mcpServers": SERVERS}}, env={})
    assert "tools.mcpServers.github.env.T" in [i.path for i in e.value.issues]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"tools": {"maxCallsPerRun": 0, "maxResultBytes": -1}})
    assert {"tools.maxCallsPerRun", "tools.maxResultBytes"} <= {i.path for i in e.value.issues}


def test_grants_match_single_tools_and_whole_servers() -> None:
    grant = Grant.parse(["github.get_pull_request", "monitoring.*", "bad entry"])
    assert grant.allows("github", "get_pull_request")
    assert not grant.allows("github", "delete_repo")
    assert grant.allows("monitoring", "anything")
    assert not grant.allows("other", "get_pull_request")
    assert not NO_TOOLS and not NO_TOOLS.allows("github", "get_pull_request")


def test_agents_get_their_grant_or_the_defaults() -> None:
    loaded = load_data(
        {
            "tools": {"mcpServers": SERVERS},
            "agents": {
                "defaults": {"tools": ["github.*"]},
                "list": [{"id": "a"}, {"id": "b", "tools": []}, {"id": "c", "tools": ["x.y"]}],
            },
        },
        env={"GH": "t"},
    )
    roster = Roster.from_config(loaded.config)
    assert roster.get("a").tools == ("github.*",)
    assert roster.get("b").tools == ()
    assert roster.get("c").tools == ("x.y",)
    assert any("agents.list[2].tools[0]" in w and "'x'" in w for w in loaded.warnings)


def test_nothing_is_granted_when_no_list_is_given() -> None:
    loaded = load_data({})
    assert loaded.config.agents.defaults.tools == ()
    assert Roster.from_config(loaded.config).default.tools == ()


def test_a_malformed_agent_grant_is_an_error() -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"agents": {"defaults": {"tools": ["no-dot"]}}})
    assert "agents.defaults.tools[0]" in [i.path for i in e.value.issues]


def _mapping(**extra: object) -> dict:
    return {"id": "m", "match": {"path": "x"}, "messageTemplate": "hi", **extra}


def test_a_mapping_grant_naming_an_unknown_server_is_a_warning() -> None:
    loaded = load_data({"hooks": {"mappings": [_mapping(tools=["github.a", "nope.*"])]}})
    rules = RuleSet.compile(loaded.config.hooks.mappings, tool_servers=frozenset({"github"}))
    try:
        assert rules.tools_of("m") == ("github.a", "nope.*")
        assert rules.tools_of("gone") == ()
        assert [w for w in rules.warnings if "'nope'" in w and "tools[1]" in w]
        assert len([w for w in rules.warnings if "tools" in w]) == 1
    finally:
        rules.close()


def test_a_mapping_without_tools_grants_none() -> None:
    loaded = load_data({"hooks": {"mappings": [_mapping()]}})
    rules = RuleSet.compile(loaded.config.hooks.mappings, tool_servers=frozenset({"github"}))
    try:
        assert rules.tools_of("m") == ()
    finally:
        rules.close()


def test_a_malformed_mapping_grant_fails_the_rule() -> None:
    loaded = load_data({"hooks": {"mappings": [_mapping(tools=["github"])]}})
    with pytest.raises(ConfigError) as e:
        RuleSet.compile(loaded.config.hooks.mappings)
    assert any(i.path.endswith("tools[0]") for i in e.value.issues)
