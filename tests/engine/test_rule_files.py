"""Shipped rule files: the schema describes them, the compiler loads them, the examples work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import yaml

from hookwise.engine.config.convert import data_key
from hookwise.engine.config.mapping import (
    ExtractConfig,
    MappingConfig,
    MatchConfig,
    RespondConfig,
    TransformConfig,
)
from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.ruleset import ActionSpec, RuleSet
from hookwise.engine.rules.tool import explain
from hookwise.server.ingress.refusals import status_of
from tests.engine.conftest import REPO, Rules, make_request

RULE_FILES = sorted((REPO / "rules").rglob("*.yaml"))
SCHEMA = json.loads((REPO / "schemas" / "mapping.schema.json").read_text())
EXAMPLES = REPO / "rules" / "examples"


def validator() -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def test_there_are_rule_files_to_check() -> None:
    names = {p.relative_to(REPO / "rules").as_posix() for p in RULE_FILES}
    assert {
        "presets/gmail.yaml",
        "examples/github.yaml",
        "examples/stripe.yaml",
        "examples/monitoring.yaml",
    } <= names


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_every_rule_file_validates_and_compiles(path: Path) -> None:
    validator().validate(yaml.safe_load(path.read_text()))
    ruleset = RuleSet.compile([], rule_files=[str(path)], transforms_dir=REPO / "transforms")
    try:
        assert ruleset.rules
    finally:
        ruleset.close()


@pytest.mark.parametrize(
    ("cls", "definition"),
    [
        (MappingConfig, "Mapping"),
        (MatchConfig, "Match"),
        (TransformConfig, "Transform"),
        (RespondConfig, "Respond"),
        (ExtractConfig, "Extract"),
    ],
)
def test_the_schema_has_exactly_the_models_keys(cls: type, definition: str) -> None:
    assert set(SCHEMA["$defs"][definition]["properties"]) == {
        data_key(f) for f in attrs.fields(cls)
    }


@pytest.mark.parametrize(
    "mapping",
    [
        {"actoin": "wake"},
        {"action": "call"},
        {"match": {"path": 3}},
        {"match": {"when": {"jsonpath": "$.a"}}},
        {"match": {"when": {"jsonpath": "$.a", "equals": 1, "regex": "x"}}},
        {"match": {"when": {"all": [], "any": []}}},
        {"transform": {"export": "x"}},
        {"extract": {"a": 1}},
        {"forEachMax": 0},
        {"respond": {"status": 500}},
    ],
)
def test_an_invalid_mapping_fails_both_the_schema_and_the_compiler(
    mapping: dict[str, Any], tmp_path: Path
) -> None:
    mapping = {"messageTemplate": "m", **mapping}
    assert list(validator().iter_errors([mapping]))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump([mapping]))
    with pytest.raises(ConfigError):
        RuleSet.compile([], rule_files=["r.yaml"], base_dir=tmp_path).close()


# --- the worked examples, payload in, action out ---------------------------------------------


@pytest.fixture(scope="module")
def examples() -> Any:
    ruleset = RuleSet.compile(
        [], rule_files=["rules/examples/*.yaml"], base_dir=REPO, transforms_dir=REPO / "transforms"
    )
    yield ruleset
    ruleset.close()


def sample(name: str, **changes: Any) -> dict[str, Any]:
    return {**json.loads((EXAMPLES / name).read_text()), **changes}


EXAMPLE_CASES = [
    (
        "github",
        sample("github-pull-request.json"),
        {"X-GitHub-Event": "pull_request"},
        "github-pull-request",
        [
            ActionSpec(
                "agent",
                {
                    "message": "Pull request #42 opened in acme/gateway by octocat: "
                    "Add retry with backoff to the "
                    "delivery queue\nhttps://github.com/acme/gateway/pull/42\n\nDeliveries "
                    "that fail with 5xx are "
                    "retried up to five times.\n\nReview the change and reply with a short "
                    "summary and any risks you see.",
                    "name": "GitHub",
                    "sessionKey": "hook:github:acme/gateway#42",
                    "wakeMode": "now",
                    "channel": "last",
                },
            )
        ],
    ),
    (
        "github",
        sample(
            "github-pull-request.json",
            pull_request={**sample("github-pull-request.json")["pull_request"], "draft": True},
        ),
        {"X-GitHub-Event": "pull_request"},
        "github-other",
        [
            ActionSpec(
                "wake",
                {"text": "GitHub pull_request event on acme/gateway", "mode": "next-heartbeat"},
            )
        ],
    ),
    (
        "github",
        sample("github-issue.json"),
        {"X-GitHub-Event": "issues"},
        "github-issue",
        [
            ActionSpec(
                "agent",
                {
                    "message": "New issue #7 in acme/gateway by hubot: "
                    "Webhook deliveries time out under load\n"
                    "Labels: bug, p1\nhttps://github.com/acme/gateway/issues/7\n\n"
                    "Since Monday, about 2% of deliveries time out after 30 s.",
                    "name": "GitHub",
                    "sessionKey": "hook:github:acme/gateway#7",
                    "wakeMode": "now",
                    "channel": "last",
                },
            )
        ],
    ),
    (
        "stripe",
        sample("stripe-payment-failed.json"),
        {},
        "stripe-payment-failed",
        [
            ActionSpec(
                "agent",
                {
                    "message": "Stripe invoice.payment_failed (evt_1PqR2sT3uV4wX5yZ)\n"
                    "Amount: 49.00 USD from billing@example.com.\nReason: no reason given",
                    "name": "Stripe",
                    "sessionKey": "hook:stripe:cus_QwErTy123",
                    "wakeMode": "now",
                    "channel": "last",
                },
            )
        ],
    ),
    (
        "stripe",
        sample("stripe-payment-failed.json", livemode=False),
        {},
        "stripe-payment-failed",
        [
            ActionSpec(
                "agent",
                {
                    "message": "Stripe invoice.payment_failed (evt_1PqR2sT3uV4wX5yZ) (test mode)\n"
                    "Amount: 49.00 USD from billing@example.com.\nReason: no reason given",
                    "name": "Stripe",
                    "sessionKey": "hook:stripe:test:cus_QwErTy123",
                    "wakeMode": "now",
                    "channel": "last",
                },
            )
        ],
    ),
    (
        "alerts",
        sample("monitoring-alert.json"),
        {},
        "monitoring-alert",
        [
            ActionSpec(
                "agent",
                {
                    "message": "[CRITICAL] Disk usage above 95% on db-1 (postgres)\n"
                    "/var/lib/postgresql is at 96% and growing 1%/h.\nDashboard: https://grafana.example.com/d/disk\n\n"
                    "Investigate: what is failing, since when, and what should a person do first?",
                    "name": "Monitoring",
                    "sessionKey": "hook:alert:disk-db-1",
                    "wakeMode": "now",
                    "channel": "last",
                },
            )
        ],
    ),
    (
        "alerts",
        sample("monitoring-alert.json", severity="warning"),
        {},
        "monitoring-alert",
        [
            ActionSpec(
                "wake", {"text": "[warning] Disk usage above 95% on db-1", "mode": "next-heartbeat"}
            )
        ],
    ),
    ("alerts", sample("monitoring-alert.json", status="resolved"), {}, "monitoring-alert", []),
]


@pytest.mark.parametrize(("path", "payload", "headers", "rule_id", "actions"), EXAMPLE_CASES)
def test_worked_example(
    examples: RuleSet,
    path: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    rule_id: str,
    actions: list[ActionSpec],
) -> None:
    rules = Rules(REPO / "transforms")
    outcome = rules.outcome(examples, make_request(path, payload, headers=headers))
    assert outcome.rule_id == rule_id
    assert list(outcome.actions) == actions
    assert outcome.skipped is (not actions)


def test_stripe_example_acknowledges_with_its_respond_body(examples: RuleSet) -> None:
    outcome = Rules(REPO / "transforms").outcome(
        examples, make_request("stripe", sample("stripe-payment-failed.json"))
    )
    assert outcome.respond is not None
    assert (outcome.respond.status, outcome.respond.body) == (
        200,
        {"received": True, "event": "evt_1PqR2sT3uV4wX5yZ"},
    )


def test_an_unrouted_stripe_event_matches_nothing(examples: RuleSet) -> None:
    assert examples.select(make_request("stripe", {"type": "customer.created"})) is None


# --- hookwise rules test ---------------------------------------------------------------------


def test_explain_reports_the_match_the_others_and_the_actions(examples: RuleSet) -> None:
    report = explain(
        examples,
        make_request("github", sample("github-issue.json"), headers={"X-GitHub-Event": "issues"}),
    )
    assert report["matched"] == "github-issue"
    results = {r["id"]: (r["result"], r["reason"]) for r in report["rules"]}
    assert results["github-pull-request"][0] == "no match"
    assert "x-github-event" in results["github-pull-request"][1]
    assert results["github-issue"] == ("matched", None)
    assert results["github-other"] == ("shadowed", None)
    assert results["stripe-payment-failed"] == (
        "no match",
        "match.path is 'stripe', the request's path is 'github'",
    )
    assert report["extracted"] == {"repo": "acme/gateway", "labels": ["bug", "p1"]}
    assert report["actions"][0]["kind"] == "agent"
    assert report["error"] is None
    json.dumps(report)


def test_explain_when_nothing_matches(examples: RuleSet) -> None:
    report = explain(examples, make_request("nowhere", {}))
    assert report["matched"] is None and report["actions"] == []
    assert all(r["result"] == "no match" for r in report["rules"])


def test_explain_shows_a_transform_error_with_its_detail(
    rules: Rules, write_transform: Any
) -> None:
    write_transform(
        "t.js", "export default (ctx) => { throw new Error('no field ' + ctx.payload.want); };"
    )
    ruleset = rules.compile(
        [
            {
                "id": "boom",
                "match": {"path": "hook"},
                "messageTemplate": "m",
                "transform": {"module": "t.js"},
            }
        ]
    )
    report = explain(ruleset, make_request("hook", {"want": "amount"}))
    # the engine's report has no HTTP status: the server chooses it (`ingress.refusals`)
    assert status_of(report["error"]["code"]) == 500
    assert report["error"] == {
        "ok": False,
        "code": "transform_failed",
        "error": "rule 'boom': transform threw Error",
        "rule": "boom",
        "detail": "no field amount",
    }
