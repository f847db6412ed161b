"""`gateway.auth.tokens`: what `config check` refuses (each problem with its entry's key path),
what it warns of, scopes with what they imply, and the principals a presented token names."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.config.tokens import implied
from hookwise.engine.errors import ConfigError
from hookwise.server.admin.scopes import TokenTable, required_scope

HOOK = "a-hook-token-that-is-long-enough-123"
ADMIN = "the-gateway-admin-token-0123456789"
READ = "a-read-token-that-is-long-enough-1"
OPERATE = "an-operate-token-long-enough-1234"


def _data(tokens: list[dict[str, Any]], *, single: str | None = ADMIN) -> dict[str, Any]:
    auth: dict[str, Any] = {"tokens": tokens}
    if single:
        auth["token"] = single
    return {"hooks": {"enabled": True, "token": HOOK}, "gateway": {"auth": auth}}


def _issues(data: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load_data(data, env=env or {})
    return [str(i) for i in e.value.issues]


def test_tokens_with_names_and_scopes_load_and_take_env_references() -> None:
    loaded = load_data(
        _data(
            [
                {"name": "grafana", "token": "${READ_TOKEN}", "scopes": ["read"]},
                {"name": "oncall", "token": OPERATE, "scopes": ["read", "operate"]},
                {"name": "viewer", "token": "a-viewer-token-long-enough-12345"},
            ]
        ),
        env={"READ_TOKEN": READ},
    )
    grafana, oncall, viewer = loaded.config.gateway.auth.tokens
    assert (grafana.name, grafana.token, grafana.scopes) == ("grafana", READ, ("read",))
    assert oncall.scopes == ("read", "operate")
    assert viewer.scopes == ("read",)  # without scopes: read


def test_every_token_problem_is_named_by_its_entry() -> None:
    issues = _issues(
        _data(
            [
                {"name": "oncall", "token": OPERATE, "scopes": ["operate"]},
                {"name": "oncall", "token": "another-token-long-enough-123456"},
                {"name": "has space", "token": "third-token-long-enough-1234567"},
                {"name": "copy", "token": OPERATE},
                {"name": "hooky", "token": HOOK},
                {"name": "same", "token": ADMIN},
                {"name": "admin", "token": "fourth-token-long-enough-1234567"},
                {"name": "none", "token": "fifth-token-long-enough-12345678", "scopes": []},
                {"name": "empty", "token": ""},
            ]
        )
    )
    assert issues == [
        "gateway.auth.tokens[1].name: duplicates gateway.auth.tokens[0]",
        "gateway.auth.tokens[2].name: must be 1 to 64 letters, digits or . _ @ - "
        "(it is shown in the audit log)",
        "gateway.auth.tokens[3].token: is the token of gateway.auth.tokens[0]",
        "gateway.auth.tokens[4].token: must differ from hooks.token (the hook token)",
        "gateway.auth.tokens[5].token: is gateway.auth.token; use another",
        "gateway.auth.tokens[6].name: 'admin' is the name of gateway.auth.token; choose another "
        "name",
        "gateway.auth.tokens[7].scopes: give at least one of read, operate, admin",
        "gateway.auth.tokens[8].token: is required (a long random secret)",
    ]


def test_an_unknown_scope_is_refused_with_its_path() -> None:
    issues = _issues(_data([{"name": "x", "token": READ, "scopes": ["read", "write"]}]))
    assert issues == ["gateway.auth.tokens[0].scopes[1]: must be one of read, operate, admin"]


def test_a_short_token_is_a_warning() -> None:
    loaded = load_data(_data([{"name": "short", "token": "tiny", "scopes": ["read"]}]))
    assert any("gateway.auth.tokens[0].token is shorter" in w for w in loaded.warnings)


def test_admin_implies_operate_implies_read() -> None:
    assert implied(["admin"]) == {"read", "operate", "admin"}
    assert implied(["operate"]) == {"read", "operate"}
    assert implied(["read"]) == {"read"}
    assert implied([]) == set()


def test_the_single_token_is_admin_and_each_token_names_its_principal() -> None:
    auth = load_data(
        _data([{"name": "grafana", "token": READ, "scopes": ["read"]}])
    ).config.gateway.auth
    table = TokenTable.of(auth)
    assert table is not None
    admin, grafana = table.match(ADMIN), table.match(READ)
    assert admin is not None and admin.name == "admin" and admin.can("admin")
    assert grafana is not None and grafana.name == "grafana" and not grafana.can("operate")
    assert table.match(HOOK) is None and table.match("") is None
    assert TokenTable.of(load_data({}).config.gateway.auth) is None  # no admin API


def test_a_route_without_a_declared_scope_needs_read_to_read_and_admin_to_write() -> None:
    assert required_scope({}, {"GET"}) == "read"
    assert required_scope({}, {"POST"}) == "admin"
    assert required_scope({}, {"GET", "DELETE"}) == "admin"
    assert required_scope({"scope": "operate"}, {"POST"}) == "operate"
