"""Selecting a rule: path, source, `match.when` conditions, order; and JSONPath extraction."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.conditions import compile_when
from hookwise.engine.rules.extract import compile_jsonpath
from tests.engine.conftest import Rules, make_request

PR = {
    "action": "opened",
    "number": 5,
    "pull_request": {"draft": False, "title": "Fix", "labels": [{"name": "bug"}, {"name": "p1"}]},
    "status": 503,
    "ok": True,
    "nothing": None,
    "repository": {"name": "gateway-prod"},
}


def holds(when: Any, payload: dict[str, Any] = PR, **request: Any) -> bool:
    condition = compile_when(when)
    assert condition is not None
    return condition.holds(make_request("hook", payload, **request))


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ({"jsonpath": "$.action", "equals": "opened"}, True),
        ({"jsonpath": "$.action", "equals": "closed"}, False),
        ({"jsonpath": "$.number", "equals": 5}, True),
        ({"jsonpath": "$.number", "equals": "5"}, False),
        ({"jsonpath": "$.ok", "equals": True}, True),
        ({"jsonpath": "$.ok", "equals": 1}, False),
        ({"jsonpath": "$.number", "equals": True}, False),
        ({"jsonpath": "$.pull_request.draft", "equals": False}, True),
        ({"jsonpath": "$.action", "in": ["opened", "reopened"]}, True),
        ({"jsonpath": "$.action", "in": ["closed"]}, False),
        ({"jsonpath": "$.action", "in": []}, False),
        ({"jsonpath": "$.action", "regex": "^op"}, True),
        ({"jsonpath": "$.action", "regex": "^closed$"}, False),
        ({"jsonpath": "$.status", "regex": "^5\\d\\d$"}, True),
        ({"jsonpath": "$.ok", "regex": "True|true"}, False),
        ({"jsonpath": "$.pull_request", "regex": "Fix"}, False),
        ({"jsonpath": "$.repository.name", "regex": "prod"}, True),
        ({"jsonpath": "$.pull_request.labels[*].name", "equals": "p1"}, True),
        ({"jsonpath": "$.pull_request.labels[*].name", "equals": "p2"}, False),
        ({"jsonpath": "$.pull_request.labels[?(@.name == 'bug')]", "exists": True}, True),
        ({"jsonpath": "$.nothing", "exists": True}, True),
        ({"jsonpath": "$.missing", "exists": True}, False),
        ({"jsonpath": "$.missing", "exists": False}, True),
        ({"jsonpath": "$.missing", "equals": None}, False),
        ({"jsonpath": "$.nothing", "equals": None}, True),
        ({"header": "X-GitHub-Event", "equals": "pull_request"}, True),
        ({"header": "x-github-event", "in": ["push", "pull_request"]}, True),
        ({"header": "x-github-event", "regex": "^pull"}, True),
        ({"header": "x-missing", "exists": True}, False),
        ({"header": "x-missing", "exists": False}, True),
        ({"header": "x-attempt", "equals": 2}, True),
        ({"header": "x-flag", "equals": True}, True),
        ({"query": "env", "equals": "prod"}, True),
        ({"query": "env", "regex": "^dev"}, False),
        ({"query": "missing", "exists": True}, False),
        ({"not": {"jsonpath": "$.pull_request.draft", "equals": True}}, True),
        ({"not": {"jsonpath": "$.action", "equals": "opened"}}, False),
        ({"all": []}, True),
        ({"any": []}, False),
        ([{"jsonpath": "$.action", "equals": "opened"}, {"query": "env", "equals": "prod"}], True),
        ([{"jsonpath": "$.action", "equals": "opened"}, {"query": "env", "equals": "dev"}], False),
        (
            {"any": [{"query": "env", "equals": "dev"}, {"header": "x-flag", "equals": "true"}]},
            True,
        ),
        (
            {"any": [{"query": "env", "equals": "dev"}, {"header": "x-flag", "equals": "false"}]},
            False,
        ),
        (
            {"all": [{"any": [{"jsonpath": "$.number", "in": [1, 5]}]}, {"not": {"any": []}}]},
            True,
        ),
    ],
)
def test_condition(when: Any, expected: bool) -> None:
    request = {
        "headers": {"X-GitHub-Event": "pull_request", "X-Attempt": "2", "X-Flag": "true"},
        "query": {"env": "prod"},
    }
    assert holds(when, **request) is expected


@pytest.mark.parametrize(
    ("when", "path", "message"),
    [
        ({"jsonpth": "$.a", "equals": 1}, "match.when.jsonpth", "did you mean 'jsonpath'"),
        ({"jsonpath": "$.a"}, "match.when", "exactly one test"),
        ({"jsonpath": "$.a", "header": "x", "equals": 1}, "match.when", "exactly one of"),
        ({"jsonpath": "$.a", "equals": 1, "in": [1]}, "match.when", "exactly one test"),
        ({"jsonpath": "$[", "equals": 1}, "match.when.jsonpath", "invalid JSONPath"),
        ({"header": "", "equals": 1}, "match.when.header", "non-empty"),
        ({"query": "q", "regex": "("}, "match.when.regex", "invalid regular expression"),
        ({"query": "q", "regex": 5}, "match.when.regex", "regular expression"),
        ({"query": "q", "in": "abc"}, "match.when.in", "list"),
        ({"query": "q", "exists": "yes"}, "match.when.exists", "true or false"),
        ({"all": {"query": "q", "exists": True}}, "match.when.all", "list"),
        ({"all": [], "query": "q"}, "match.when", "must stand alone"),
        ({"any": [{"not": "x"}]}, "match.when.any[0].not", "must be a condition"),
        ("text", "match.when", "must be a condition"),
    ],
)
def test_condition_errors_name_the_key_path(when: Any, path: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        compile_when(when)
    assert any(i.path == path and message in i.message for i in caught.value.issues), caught.value


def test_every_condition_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        compile_when({"all": [{"query": "q", "regex": "("}, {"header": "h", "exists": 1}]})
    assert [i.path for i in caught.value.issues] == [
        "match.when.all[0].regex",
        "match.when.all[1].exists",
    ]


# --- selection -------------------------------------------------------------------------------


def select_id(
    ruleset: Any, path: str, payload: dict[str, Any] | None = None, **request: Any
) -> str | None:
    rule = ruleset.select(make_request(path, payload or {}, **request))
    return rule.id if rule else None


def test_match_path_is_exact_with_slashes_trimmed(rules: Rules) -> None:
    ruleset = rules.compile(
        [
            {"id": "a", "match": {"path": "/github/"}, "messageTemplate": "x"},
            {"id": "b", "match": {"path": "ingest/stripe"}, "messageTemplate": "x"},
        ]
    )
    assert select_id(ruleset, "github") == "a"
    assert select_id(ruleset, "/github/") == "a"
    assert select_id(ruleset, "ingest/stripe") == "b"
    assert select_id(ruleset, "githubx") is None
    assert select_id(ruleset, "GitHub") is None
    assert select_id(ruleset, "ingest") is None


def test_match_source_needs_a_string_source_equal_to_it(rules: Rules) -> None:
    ruleset = rules.compile(
        [{"id": "gm", "match": {"path": "ingest", "source": "gmail"}, "messageTemplate": "x"}]
    )
    assert select_id(ruleset, "ingest", {"source": "gmail"}) == "gm"
    assert select_id(ruleset, "ingest", {"source": "Gmail"}) is None
    assert select_id(ruleset, "ingest", {"source": ["gmail"]}) is None
    assert select_id(ruleset, "ingest", {}) is None


def test_a_rule_without_path_matches_every_path_in_order(rules: Rules) -> None:
    ruleset = rules.compile(
        [
            {"id": "by-source", "match": {"source": "stripe"}, "messageTemplate": "x"},
            {"id": "github", "match": {"path": "github"}, "messageTemplate": "x"},
            {"id": "catch-all", "messageTemplate": "x"},
        ]
    )
    assert select_id(ruleset, "github", {"source": "stripe"}) == "by-source"
    assert select_id(ruleset, "github") == "github"
    assert select_id(ruleset, "other") == "catch-all"
    assert select_id(ruleset, "other", {"source": "stripe"}) == "by-source"


def test_first_matching_rule_wins(rules: Rules) -> None:
    ruleset = rules.compile(
        [
            {
                "id": "first",
                "match": {"path": "h", "when": {"header": "x-kind", "equals": "a"}},
                "messageTemplate": "x",
            },
            {"id": "second", "match": {"path": "h"}, "messageTemplate": "x"},
            {"id": "third", "match": {"path": "h"}, "messageTemplate": "x"},
        ]
    )
    assert select_id(ruleset, "h", headers={"x-kind": "a"}) == "first"
    assert select_id(ruleset, "h", headers={"x-kind": "b"}) == "second"


def test_custom_mappings_come_before_rule_files_and_presets(rules: Rules, tmp_path: Any) -> None:
    (tmp_path / "more.yaml").write_text(
        "- {id: from-file, match: {path: gmail}, messageTemplate: f}\n"
    )
    ruleset = rules.compile(
        [
            {
                "id": "mine",
                "match": {"path": "gmail", "when": {"query": "mine", "exists": True}},
                "messageTemplate": "m",
            }
        ],
        rule_files=["more.yaml"],
        presets=["gmail"],
        base_dir=tmp_path,
    )
    assert [r.id for r in ruleset.rules] == ["mine", "from-file", "gmail"]
    assert select_id(ruleset, "gmail", query={"mine": "1"}) == "mine"
    assert select_id(ruleset, "gmail") == "from-file"


def test_ids_default_to_their_1_based_position(rules: Rules, tmp_path: Any) -> None:
    (tmp_path / "a.yaml").write_text("- {match: {path: x}, messageTemplate: f}\n")
    ruleset = rules.compile(
        [
            {"messageTemplate": "a"},
            {"id": "named", "messageTemplate": "b"},
            {"id": "  ", "messageTemplate": "c"},
        ],
        rule_files=["a.yaml"],
        presets=["gmail"],
        base_dir=tmp_path,
    )
    assert [r.id for r in ruleset.rules] == [
        "mapping-1",
        "named",
        "mapping-3",
        "mapping-4",
        "gmail",
    ]


# --- extraction ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extract", "expected"),
    [
        ({"subject": "$.messages[0].subject"}, {"subject": "Hi"}),
        ({"subject": "$.messages[1].subject"}, {"subject": None}),
        ({"ids": {"path": "$.messages[*].id", "all": True}}, {"ids": ["m1", "m2"]}),
        ({"ids": "$.messages[*].id"}, {"ids": "m1"}),
        ({"none": {"path": "$.nope[*]", "all": True}}, {"none": []}),
        ({"big": "$.messages[?(@.size > 10)].id"}, {"big": "m2"}),
        ({"n": "$.messages.`len`"}, {"n": 2}),
        ({"dashed": "$['x-id']"}, {"dashed": 7}),
    ],
)
def test_extract(rules: Rules, extract: dict[str, Any], expected: dict[str, Any]) -> None:
    payload = {
        "messages": [{"id": "m1", "subject": "Hi", "size": 3}, {"id": "m2", "size": 30}],
        "x-id": 7,
    }
    outcome = rules.one({"extract": extract, "messageTemplate": "x"}, payload)
    assert outcome.extracted == expected


def test_extracted_names_are_template_variables_and_win_over_payload_keys(rules: Rules) -> None:
    outcome = rules.one(
        {"extract": {"title": "$.issue.title"}, "messageTemplate": "{{title}}"},
        {"title": "top-level", "issue": {"title": "nested"}},
    )
    assert outcome.actions[0].fields["message"] == "nested"


@pytest.mark.parametrize(
    "path",
    [
        "$",
        "$.a",
        "$.a.b",
        "$.a[0]",
        "$.a[5]",
        "$.list[1]",
        "$.list[1].b",
        "$['x-y']",
        "$.n",
        "$.n.x",
        "$.list.b",
    ],
)
def test_the_fast_path_agrees_with_jsonpath_ng(path: str) -> None:
    from jsonpath_ng.ext import parse

    data = {"a": {"b": 1, "0": "zero"}, "list": [{"b": 1}, {"b": 2}], "x-y": 3, "n": None}
    expected = [m.value for m in parse(path).find(data)]
    assert compile_jsonpath(path).all(data) == expected
