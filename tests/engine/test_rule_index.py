"""Indexed rule selection (`hookwise.engine.rules.index`): the same rule as trying every rule in
order, for hand-written tables and for seeded random rule sets; discriminator choice; shadowing."""

from __future__ import annotations

import random
from typing import Any

import pytest

from hookwise.engine.request import InboundRequest
from hookwise.engine.rules.index import RuleIndex, shadowed
from hookwise.engine.rules.ruleset import CompiledRule, RuleSet
from tests.engine.conftest import Rules, make_request


def linear(ruleset: RuleSet, request: InboundRequest) -> CompiledRule | None:
    """Selection without the index: the first rule, in configured order, that matches."""
    return next((r for r in ruleset.rules if r.matches(request)), None)


def wake(rule_id: str, match: dict[str, Any]) -> dict[str, Any]:
    return {"id": rule_id, "match": match, "action": "wake", "textTemplate": "x"}


TABLE_RULES = [
    wake(
        "gh-pr", {"path": "ingest", "when": {"header": "X-GitHub-Event", "equals": "pull_request"}}
    ),
    wake("stripe", {"path": "ingest", "source": "stripe"}),
    wake("regex-any", {"path": "ingest", "when": {"jsonpath": "$.kind", "regex": "^alert"}}),
    wake(
        "gh-push-main",
        {
            "path": "ingest",
            "when": [
                {"header": "x-github-event", "equals": "push"},
                {"jsonpath": "$.ref", "equals": "refs/heads/main"},
            ],
        },
    ),
    wake(
        "gh-push", {"path": "ingest", "when": {"header": "x-github-event", "in": ["push", "ping"]}}
    ),
    wake("num-1", {"path": "ingest", "when": {"jsonpath": "$.n", "equals": 1}}),
    wake("bool-true", {"path": "ingest", "when": {"jsonpath": "$.n", "equals": True}}),
    wake("text-1", {"path": "ingest", "when": {"jsonpath": "$.n", "equals": "1"}}),
    wake("null", {"path": "ingest", "when": {"jsonpath": "$.n", "equals": None}}),
    wake("status-200", {"path": "ingest", "when": {"header": "x-status", "equals": 200}}),
    wake("labels", {"path": "ingest", "when": {"jsonpath": "$.labels[*]", "equals": "urgent"}}),
    wake("list-value", {"path": "ingest", "when": {"jsonpath": "$.pair", "equals": [1, 2]}}),
    wake("query", {"path": "ingest", "when": {"query": "env", "equals": "prod"}}),
    wake("any-of", {"path": "ingest", "when": {"any": [{"jsonpath": "$.a", "equals": 1}]}}),
    wake("not-b", {"path": "ingest", "when": {"not": {"jsonpath": "$.b", "exists": True}}}),
    wake("everywhere-ping", {"source": "ping"}),
    wake("other", {"path": "other", "source": "stripe"}),
    wake("fallback", {"path": "ingest"}),
]

# (path, payload, headers, query) -> the rule selected
TABLE = [
    ("ingest", {"b": 1}, {"X-GitHub-Event": "pull_request"}, {}, "gh-pr"),
    ("ingest", {"source": "stripe", "b": 1}, {}, {}, "stripe"),
    ("ingest", {"source": " stripe ", "b": 1}, {}, {}, "stripe"),
    ("ingest", {"source": "stripe", "kind": "alert-1"}, {}, {}, "stripe"),
    ("ingest", {"kind": "alert-1", "b": 1}, {"x-github-event": "push"}, {}, "regex-any"),
    ("ingest", {"ref": "refs/heads/main", "b": 1}, {"x-github-event": "push"}, {}, "gh-push-main"),
    ("ingest", {"ref": "refs/heads/dev", "b": 1}, {"x-github-event": "push"}, {}, "gh-push"),
    ("ingest", {"b": 1}, {"x-github-event": "ping"}, {}, "gh-push"),
    ("ingest", {"n": 1, "b": 1}, {}, {}, "num-1"),
    ("ingest", {"n": 1.0, "b": 1}, {}, {}, "num-1"),
    ("ingest", {"n": True, "b": 1}, {}, {}, "bool-true"),
    ("ingest", {"n": "1", "b": 1}, {}, {}, "text-1"),
    ("ingest", {"n": None, "b": 1}, {}, {}, "null"),
    ("ingest", {"n": 2, "b": 1}, {"x-status": "200"}, {}, "status-200"),
    ("ingest", {"labels": ["x", "urgent"], "b": 1}, {}, {}, "labels"),
    ("ingest", {"pair": [1, 2], "b": 1}, {}, {}, "list-value"),
    ("ingest", {"b": 1}, {}, {"env": "prod"}, "query"),
    ("ingest", {"a": 1, "b": 1}, {}, {}, "any-of"),
    ("ingest", {}, {}, {}, "not-b"),
    ("ingest", {"source": "ping", "b": 1}, {}, {}, "everywhere-ping"),
    ("ingest", {"b": 1}, {}, {}, "fallback"),
    ("other", {"source": "stripe"}, {}, {}, "other"),
    ("other", {"source": "ping"}, {}, {}, "everywhere-ping"),
    ("other", {"source": "github"}, {}, {}, None),
    ("nowhere", {"source": "ping"}, {}, {}, "everywhere-ping"),
    ("nowhere", {"source": "stripe"}, {}, {}, None),
]


@pytest.mark.parametrize(("path", "payload", "headers", "query", "expected"), TABLE)
def test_indexed_selection_picks_the_rule_trying_every_rule_in_order_picks(
    rules: Rules,
    path: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    query: dict[str, str],
    expected: str | None,
) -> None:
    ruleset = rules.compile(TABLE_RULES)
    request = make_request(path, payload, headers=headers, query=query)
    selected = ruleset.select(request)
    reference = linear(ruleset, request)
    assert (selected.id if selected else None) == expected
    assert selected is reference


# ---------------------------------------------------------------------- seeded random rule sets

VALUES: list[Any] = ["a", "b", "1", 1, 1.0, 2, True, False, None, [1], {"k": 1}, " a "]
SUBJECTS = [("jsonpath", "$.x"), ("jsonpath", "$.y.z"), ("jsonpath", "$.l[*]"), ("header", "X-K")]
SUBJECTS += [("query", "q")]


def _leaf(rng: random.Random) -> dict[str, Any]:
    kind, name = rng.choice(SUBJECTS)
    test = rng.choice(["equals", "equals", "in", "in", "regex", "exists"])
    if test == "equals":
        value: Any = rng.choice(VALUES)
    elif test == "in":
        value = rng.sample(VALUES, rng.randint(0, 3))
    elif test == "regex":
        value = rng.choice(["^a", "1", "b$"])
    else:
        value = rng.choice([True, False])
    return {kind: name, test: value}


def _when(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth < 2 and roll < 0.25:
        return [_when(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    if depth < 2 and roll < 0.35:
        return {"any": [_when(rng, depth + 1) for _ in range(rng.randint(0, 2))]}
    if depth < 2 and roll < 0.42:
        return {"not": _when(rng, depth + 1)}
    return _leaf(rng)


def _random_rules(rng: random.Random, count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        match: dict[str, Any] = {}
        if rng.random() < 0.85:
            match["path"] = rng.choice(["p", "p", "p", "q"])
        if rng.random() < 0.4:
            match["source"] = rng.choice(["s1", "s2", "s3", " s1"])
        if rng.random() < 0.8:
            match["when"] = _when(rng)
        out.append(wake(f"r{i}", match))
    return out


def _random_value(rng: random.Random) -> Any:
    return rng.choice([*VALUES, ["a", 1], ["b", True], [None, "1"]])


def _random_request(rng: random.Random) -> InboundRequest:
    payload: dict[str, Any] = {}
    if rng.random() < 0.6:
        payload["source"] = rng.choice(["s1", "s2", "s3", " s2 ", 5])
    if rng.random() < 0.7:
        payload["x"] = _random_value(rng)
    if rng.random() < 0.5:
        payload["y"] = {"z": _random_value(rng)} if rng.random() < 0.8 else "flat"
    if rng.random() < 0.5:
        payload["l"] = [_random_value(rng) for _ in range(rng.randint(0, 3))]
    headers = {"x-k": str(rng.choice(["a", "1", "True", "true", "None", "2"]))}
    query = {"q": rng.choice(["a", "1", "b"])} if rng.random() < 0.5 else {}
    path = rng.choice(["p", "p", "q", "r"])
    return make_request(path, payload, headers=headers if rng.random() < 0.6 else {}, query=query)


@pytest.mark.parametrize("seed", range(40))
def test_random_rule_sets_select_the_same_rule_with_and_without_the_index(
    rules: Rules, seed: int
) -> None:
    rng = random.Random(seed)
    ruleset = rules.compile(_random_rules(rng, rng.randint(1, 60)))
    for _ in range(150):
        request = _random_request(rng)
        assert ruleset.select(request) is linear(ruleset, request), (seed, request)


# --------------------------------------------------------------------------- what it looks up


def test_a_thousand_rules_on_one_path_give_one_candidate_per_request(rules: Rules) -> None:
    mappings = [wake(f"src-{i}", {"path": "ingest", "source": f"system-{i}"}) for i in range(1000)]
    ruleset = rules.compile(mappings)
    index = RuleIndex(ruleset.rules)
    request = make_request("ingest", {"source": "system-999"})
    assert list(index.candidates(request)) == [999]
    assert ruleset.select(request).id == "src-999"
    assert list(index.candidates(make_request("ingest", {"source": "unknown"}))) == []


def test_unindexed_rules_keep_their_place_among_indexed_ones(rules: Rules) -> None:
    ruleset = rules.compile(
        [
            wake("first", {"path": "p", "source": "a"}),
            wake("catch", {"path": "p", "when": {"jsonpath": "$.v", "regex": "."}}),
            wake("late", {"path": "p", "source": "a"}),
        ]
    )
    index = RuleIndex(ruleset.rules)
    assert list(index.candidates(make_request("p", {"source": "a"}))) == [0, 1, 2]
    assert list(index.candidates(make_request("p", {"source": "b"}))) == [1]
    assert ruleset.select(make_request("p", {"source": "x", "v": "y"})).id == "catch"


def test_indexed_by_names_each_rules_discriminator_preferring_the_shared_subject(
    rules: Rules,
) -> None:
    ruleset = rules.compile(
        [
            wake(
                "both",
                {
                    "path": "p",
                    "source": "gh",
                    "when": {"header": "X-Event", "in": ["push", "ping"]},
                },
            ),
            wake("hdr", {"path": "p", "when": {"header": "x-event", "equals": "issue"}}),
            wake("hdr-2", {"path": "p", "when": {"header": "x-event", "equals": 7}}),
            wake("jp", {"path": "p", "when": [{"jsonpath": "$.t", "equals": 3}]}),
            wake("none", {"path": "p", "when": {"jsonpath": "$.t", "regex": "x"}}),
            wake("anywhere", {"source": "ping"}),
        ]
    )
    report = ruleset.indexed_by()
    assert report["p"] == [
        ("both", "header 'x-event' in ['push', 'ping']"),
        ("hdr", "header 'x-event' = 'issue'"),
        ("hdr-2", "header 'x-event' = '7'"),
        ("jp", "jsonpath '$.t' = 3"),
        ("none", None),
        ("anywhere", "match.source = 'ping'"),
    ]
    assert report["*"] == [("anywhere", "match.source = 'ping'")]


# ---------------------------------------------------------------------------------- shadowing

SHADOW_CASES = [
    # (earlier rule's match, later rule's match, later is shadowed)
    ({"path": "p"}, {"path": "p", "source": "a"}, True),
    ({}, {"path": "p"}, True),
    ({"path": "p", "source": "a"}, {"path": "p", "source": "a"}, True),
    ({"path": "p", "source": "a"}, {"path": "p", "source": "b"}, False),
    ({"path": "p"}, {"path": "q"}, False),
    ({"path": "p"}, {}, False),
    (
        {"path": "p", "when": {"header": "x-e", "in": ["a", "b"]}},
        {"path": "p", "when": [{"header": "X-E", "equals": "a"}, {"query": "v", "exists": True}]},
        True,
    ),
    (
        {"path": "p", "when": {"header": "x-e", "equals": "a"}},
        {"path": "p", "when": {"header": "x-e", "in": ["a", "b"]}},
        False,
    ),
    (
        {"path": "p", "when": {"jsonpath": "$.n", "equals": 1}},
        {"path": "p", "when": {"jsonpath": "$.n", "equals": True}},
        False,
    ),
    (
        {"path": "p", "when": {"jsonpath": "$.v", "regex": "."}},
        {"path": "p", "when": {"jsonpath": "$.v", "regex": "."}},
        False,  # not shown (regex): never claimed
    ),
]


@pytest.mark.parametrize(("earlier", "later", "is_shadowed"), SHADOW_CASES)
def test_shadowed_rules_are_found_when_an_earlier_rule_matches_all_they_match(
    rules: Rules, earlier: dict[str, Any], later: dict[str, Any], is_shadowed: bool
) -> None:
    ruleset = rules.compile([wake("earlier", earlier), wake("later", later)])
    found = [(a.id, b.id) for a, b in shadowed(ruleset.rules)]
    assert found == ([("later", "earlier")] if is_shadowed else [])
