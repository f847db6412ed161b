"""Grants that ask: `{tool, approve: true}` entries and `approve` globs gate granted tools
(never grant one), on mappings, agents and `agents.defaults`; the `approvals` block is checked
with key paths."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.config.agents import Roster
from hookwise.engine.config.grants import Grant, GrantEntry, check_grant, with_approvals
from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError


def test_an_entry_with_approve_grants_and_gates_its_tool() -> None:
    grant = Grant.parse(["gh.get", GrantEntry("gh.merge", approve=True)])
    assert grant.allows("gh", "merge") and grant.needs_approval("gh", "merge")
    assert grant.allows("gh", "get") and not grant.needs_approval("gh", "get")


def test_an_approve_glob_gates_granted_tools_and_grants_nothing() -> None:
    grant = Grant.parse(with_approvals(["gh.*"], ["gh.merge_*", "other.*"]))
    assert grant.needs_approval("gh", "merge_pull_request")
    assert not grant.needs_approval("gh", "get_pull_request")
    assert not grant.allows("other", "x")  # the glob gates, it does not grant


@pytest.mark.parametrize(
    ("approve", "problem"),
    [(["nodot"], "must be a server.tool glob"), (["gh.has space"], "must be a server.tool glob")],
)
def test_a_malformed_glob_is_an_issue_at_its_key_path(approve: list[str], problem: str) -> None:
    issues, _ = check_grant(["gh.get"], "hooks.mappings[0].tools", {"gh"}, approve)
    assert [(i.path, problem in i.message) for i in issues] == [
        ("hooks.mappings[0].approve[0]", True)
    ]


def _config(**extra: Any) -> dict[str, Any]:
    return {"tools": {"mcpServers": {"gh": {"url": "https://mcp.example/gh"}}}, **extra}


def test_agents_inherit_the_defaults_approve_unless_they_set_their_own() -> None:
    loaded = load_data(
        _config(
            agents={
                "defaults": {"tools": ["gh.*"], "approve": ["gh.merge*"]},
                "list": [{"id": "a"}, {"id": "b", "approve": []}],
            }
        )
    )
    roster = Roster.from_config(loaded.config)
    a, b = (Grant.parse(roster.get(i).tools) for i in ("a", "b"))  # type: ignore[union-attr]
    assert a.needs_approval("gh", "merge") and not b.needs_approval("gh", "merge")


def test_the_approvals_block_is_checked_with_key_paths() -> None:
    with pytest.raises(ConfigError) as e:
        load_data(_config(approvals={"approvers": ["bob"], "timeout": 0, "via": "nochannel"}))
    paths = {i.path for i in e.value.issues}
    assert {"approvals.approvers[0]", "approvals.timeout", "approvals.via"} <= paths
