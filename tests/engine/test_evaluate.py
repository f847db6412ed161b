"""Evaluating a rule: the actions it makes, fan-out, transform merges, respond, load errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookwise.engine.config.mapping import MappingConfig, TransformConfig
from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.ruleset import ActionSpec, RuleSet
from tests.engine.conftest import Rules, make_request, run

MAIL = {
    "source": "gmail",
    "messages": [
        {
            "id": "m1",
            "from": "ann@example.com",
            "subject": "Hello",
            "snippet": "Hi there",
            "body": "Full",
        },
        {
            "id": "m2",
            "from": "bob@example.com",
            "subject": "Invoice",
            "snippet": "Due",
            "body": "Pay",
        },
    ],
}


@pytest.mark.parametrize(
    ("mapping", "payload", "kind", "fields"),
    [
        (
            {"action": "wake", "textTemplate": "Event: {{type}}"},
            {"type": "deploy"},
            "wake",
            {"text": "Event: deploy", "mode": "now"},
        ),
        (
            {"action": "wake", "wakeMode": "next-heartbeat", "textTemplate": "x"},
            {},
            "wake",
            {"text": "x", "mode": "next-heartbeat"},
        ),
        (
            {"messageTemplate": "Hello {{who}}"},
            {"who": "you"},
            "agent",
            {"message": "Hello you", "wakeMode": "now", "channel": "last"},
        ),
        (
            {
                "messageTemplate": "m",
                "name": "  {{svc}} ",
                "sessionKey": "hook:{{svc}}:{{id}}",
                "to": "{{phone}}",
                "model": "{{m}}",
                "thinking": "low",
                "deliver": False,
                "channel": "telegram",
                "fallbackChannel": "whatsapp",
                "timeoutSeconds": 90,
                "allowUnsafeExternalContent": True,
                "wakeMode": "next-heartbeat",
            },
            {"svc": "ci", "id": 7, "phone": "+15550001", "m": "openai/gpt-4o"},
            "agent",
            {
                "message": "m",
                "name": "ci",
                "sessionKey": "hook:ci:7",
                "to": "+15550001",
                "model": "openai/gpt-4o",
                "thinking": "low",
                "deliver": False,
                "channel": "telegram",
                "fallbackChannel": "whatsapp",
                "timeoutSeconds": 90.0,
                "allowUnsafeExternalContent": True,
                "wakeMode": "next-heartbeat",
            },
        ),
        # optional templated fields that render empty are left out
        (
            {
                "messageTemplate": "m",
                "name": "{{nope}}",
                "sessionKey": " ",
                "to": "{{nope}}",
                "model": "{{nope}}",
            },
            {},
            "agent",
            {"message": "m", "wakeMode": "now", "channel": "last"},
        ),
        # the message itself is kept even when empty: validation rejects it with a 400
        (
            {"messageTemplate": "{{nope}}"},
            {},
            "agent",
            {"message": "", "wakeMode": "now", "channel": "last"},
        ),
    ],
)
def test_templated_action(
    rules: Rules,
    mapping: dict[str, Any],
    payload: dict[str, Any],
    kind: str,
    fields: dict[str, Any],
) -> None:
    outcome = rules.one(mapping, payload)
    assert outcome.actions == (ActionSpec(kind, fields),)
    assert outcome.skipped is False
    assert outcome.rule_id == "mapping-1"


def test_gmail_preset_makes_one_agent_run_per_message(rules: Rules) -> None:
    ruleset = rules.compile([], presets=["gmail"])
    outcome = rules.outcome(ruleset, make_request("gmail", MAIL))
    assert outcome.rule_id == "gmail"
    assert outcome.actions == (
        ActionSpec(
            "agent",
            {
                "message": "New email from ann@example.com\nSubject: Hello\nHi there\nFull",
                "name": "Gmail",
                "sessionKey": "hook:gmail:m1",
                "wakeMode": "now",
                "channel": "last",
            },
        ),
        ActionSpec(
            "agent",
            {
                "message": "New email from bob@example.com\nSubject: Invoice\nDue\nPay",
                "name": "Gmail",
                "sessionKey": "hook:gmail:m2",
                "wakeMode": "now",
                "channel": "last",
            },
        ),
    )


def test_gmail_preset_without_messages_is_skipped(rules: Rules) -> None:
    ruleset = rules.compile([], presets=["gmail"])
    outcome = rules.outcome(ruleset, make_request("gmail", {"messages": []}))
    assert (outcome.actions, outcome.skipped) == ((), True)


def test_openclaw_gmail_mapping_loads_unchanged(rules: Rules) -> None:
    openclaw = {
        "id": "gmail",
        "match": {"path": "gmail"},
        "action": "agent",
        "wakeMode": "now",
        "name": "Gmail",
        "sessionKey": "hook:gmail:{{messages[0].id}}",
        "messageTemplate": "New email from {{messages[0].from}}\nSubject: {{messages[0].subject}}\n"
        "{{messages[0].snippet}}\n{{messages[0].body}}",
    }
    ruleset = rules.compile([openclaw])
    outcome = rules.outcome(ruleset, make_request("gmail", MAIL))
    assert [a.fields["sessionKey"] for a in outcome.actions] == ["hook:gmail:m1"]
    assert outcome.actions[0].fields["message"].startswith("New email from ann@example.com\n")


@pytest.mark.parametrize(
    ("for_each", "cap", "payload", "expected"),
    [
        ("$.items", 20, {"items": ["a", "b", "c"]}, ["0:a", "1:b", "2:c"]),
        ("$.items", 3, {"items": ["a", "b", "c"]}, ["0:a", "1:b", "2:c"]),  # at the cap
        ("$.items[*].n", 20, {"items": [{"n": "x"}, {"n": "y"}]}, ["0:x", "1:y"]),
        ("$.items[*]", 20, {"items": ["a", "b"]}, ["0:a", "1:b"]),
        ("$.items", 20, {"items": []}, []),
    ],
)
def test_for_each_fans_out_with_item_and_index(
    rules: Rules, for_each: str, cap: int, payload: dict[str, Any], expected: list[str]
) -> None:
    outcome = rules.one(
        {
            "action": "wake",
            "forEach": for_each,
            "forEachMax": cap,
            "textTemplate": "{{index}}:{{item}}",
        },
        payload,
    )
    assert [a.fields["text"] for a in outcome.actions] == expected
    assert outcome.skipped is (not expected)


def test_respond_renders_string_values_of_its_body(rules: Rules) -> None:
    outcome = rules.one(
        {
            "messageTemplate": "m",
            "respond": {
                "status": 202,
                "body": {"challenge": "{{challenge}}", "n": 1, "list": ["{{path}}", True]},
                "headers": {"x-a": "b"},
            },
        },
        {"challenge": "abc"},
    )
    assert outcome.respond is not None
    assert (outcome.respond.status, outcome.respond.body, outcome.respond.headers) == (
        202,
        {"challenge": "abc", "n": 1, "list": ["hook", True]},
        {"x-a": "b"},
    )


def test_no_respond_means_none(rules: Rules) -> None:
    assert rules.one({"messageTemplate": "m"}, {}).respond is None


# --- transforms: the return contract and the merge rules (real Python transforms) ------------

MERGE_CASES = [
    ("return None", (), True),
    (
        "return {}",
        (
            ActionSpec(
                "agent", {"message": "templated", "name": "N", "wakeMode": "now", "channel": "last"}
            ),
        ),
        False,
    ),
    (
        "return {'message': 'over', 'model': 'openai/gpt-4o', 'name': None}",
        (
            ActionSpec(
                "agent",
                {
                    "message": "over",
                    "name": "N",
                    "wakeMode": "now",
                    "channel": "last",
                    "model": "openai/gpt-4o",
                },
            ),
        ),
        False,
    ),
    (
        "return {'message': 'm', 'text': 'ignored', 'unknown': 1, '__proto__': {'x': 1}}",
        (ActionSpec("agent", {"message": "m", "name": "N", "wakeMode": "now", "channel": "last"}),),
        False,
    ),
    (
        "return {'kind': 'wake', 'text': 'switched'}",
        (ActionSpec("wake", {"text": "switched"}),),
        False,
    ),
    (
        "return {'kind': 'wake', 'mode': 'next-heartbeat'}",
        (ActionSpec("wake", {"mode": "next-heartbeat"}),),
        False,
    ),
    (
        "return {'kind': 'agent', 'sessionKey': 'k'}",
        (
            ActionSpec(
                "agent",
                {
                    "message": "templated",
                    "name": "N",
                    "wakeMode": "now",
                    "channel": "last",
                    "sessionKey": "k",
                },
            ),
        ),
        False,
    ),
]


@pytest.mark.parametrize(("body", "actions", "skipped"), MERGE_CASES)
def test_transform_result_merges_over_the_templated_action(
    rules: Rules, write_transform: Any, body: str, actions: tuple[ActionSpec, ...], skipped: bool
) -> None:
    write_transform("t.py", f"def transform(ctx):\n    {body}\n")
    outcome = rules.one(
        {"messageTemplate": "templated", "name": "N", "transform": {"module": "t.py"}}, {}
    )
    assert outcome.actions == actions
    assert outcome.skipped is skipped


def test_switching_from_wake_to_agent_carries_nothing_over(
    rules: Rules, write_transform: Any
) -> None:
    write_transform(
        "t.py", "def transform(ctx):\n    return {'kind': 'agent', 'message': ctx.action['text']}\n"
    )
    outcome = rules.one(
        {"action": "wake", "textTemplate": "hello", "transform": {"module": "t.py"}}, {}
    )
    assert outcome.actions == (ActionSpec("agent", {"message": "hello"}),)


def test_the_transform_runs_per_item_and_may_skip_some(rules: Rules, write_transform: Any) -> None:
    write_transform(
        "t.py",
        "def transform(ctx):\n"
        "    if ctx.item['spam']:\n        return None\n"
        "    return {'sessionKey': f\"s-{ctx.index}-{ctx['item']['id']}\"}\n",
    )
    outcome = rules.one(
        {
            "forEach": "$.messages",
            "messageTemplate": "{{item.id}}",
            "transform": {"module": "t.py"},
        },
        {
            "messages": [
                {"id": "a", "spam": False},
                {"id": "b", "spam": True},
                {"id": "c", "spam": False},
            ]
        },
    )
    assert [(a.fields["message"], a.fields["sessionKey"]) for a in outcome.actions] == [
        ("a", "s-0-a"),
        ("c", "s-2-c"),
    ]


# --- load errors: every problem at once, with file, rule id and key path ---------------------


def test_compile_reports_every_problem_with_rule_id_and_key_path(rules: Rules) -> None:
    with pytest.raises(ConfigError) as caught:
        rules.compile(
            [
                {"id": "a", "messageTemplate": "{{ broken", "extract": {"x": "$["}},
                {"id": "b", "action": "wake", "match": {"when": {"header": "h", "regex": "("}}},
                {
                    "id": "c",
                    "messageTemplate": "m",
                    "forEach": "$.[",
                    "forEachMax": 0,
                    "respond": {"status": 500},
                },
                {"id": "d", "messageTemplate": "m", "extract": {"path": "$.a", "_x": "$.b"}},
                {"id": "a", "messageTemplate": "m"},
                {"id": "e", "messageTemplate": "m", "transform": {"module": "nope.js"}},
            ]
        )
    found = {(i.rule_id, i.path) for i in caught.value.issues}
    assert found == {
        ("a", "hooks.mappings[0].messageTemplate"),
        ("a", "hooks.mappings[0].extract.x"),
        ("b", "hooks.mappings[1].match.when.regex"),
        ("c", "hooks.mappings[2].forEach"),
        ("c", "hooks.mappings[2].forEachMax"),
        ("c", "hooks.mappings[2].respond.status"),
        ("d", "hooks.mappings[3].extract.path"),
        ("d", "hooks.mappings[3].extract._x"),
        ("a", "hooks.mappings[4].id"),
        ("e", "hooks.mappings[5].transform.module"),
    }


def test_rule_file_problems_name_the_file(rules: Rules, tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "good.yaml").write_text(
        "- {id: ok, match: {path: ok}, messageTemplate: m}\n"
    )
    (tmp_path / "rules" / "bad.yaml").write_text(
        "- id: typo\n  mesageTemplate: m\n- id: tpl\n  messageTemplate: '{{ x'\n"
    )
    (tmp_path / "broken.yaml").write_text("- id: [unclosed\n")
    (tmp_path / "scalar.yaml").write_text("just text\n")
    with pytest.raises(ConfigError) as caught:
        rules.compile(
            [],
            rule_files=["rules/*.yaml", "broken.yaml", "scalar.yaml", "missing.yaml"],
            base_dir=tmp_path,
        )
    found = {(i.file, i.rule_id, i.path) for i in caught.value.issues}
    assert found == {
        ("rules/bad.yaml", "typo", "[0].mesageTemplate"),
        ("rules/bad.yaml", "tpl", "[1].messageTemplate"),
        ("broken.yaml", None, ""),
        ("scalar.yaml", None, ""),
        (None, None, "hooks.rules[3]"),
    }
    typo = next(i for i in caught.value.issues if i.rule_id == "typo")
    assert "did you mean 'messageTemplate'" in str(typo) and str(typo).startswith(
        "rules/bad.yaml: rule 'typo'"
    )


def test_rule_files_and_globs_load_in_order(rules: Rules, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "b.yaml").write_text("- {id: b, messageTemplate: m}\n")
    (tmp_path / "d" / "a.yaml").write_text("- {id: a, messageTemplate: m}\n")
    (tmp_path / "first.yml").write_text("- {id: first, messageTemplate: m}\n")
    (tmp_path / "empty.yaml").write_text("")
    ruleset = rules.compile(
        [], rule_files=["first.yml", "d/*.yaml", "empty.yaml", "none/*.yaml"], base_dir=tmp_path
    )
    assert [r.id for r in ruleset.rules] == ["first", "a", "b"]


def test_unknown_preset_is_a_config_error(rules: Rules) -> None:
    with pytest.raises(ConfigError) as caught:
        rules.compile([], presets=["gmail", "outlook"])
    assert [(i.path, "unknown preset 'outlook'" in i.message) for i in caught.value.issues] == [
        ("hooks.presets[1]", True)
    ]


def test_a_transform_without_transforms_dir_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        RuleSet.compile(
            [MappingConfig(id="t", message_template="m", transform=TransformConfig("x.js"))]
        )
    assert "transformsDir" in caught.value.issues[0].message


def test_transforms_dir_defaults_to_hooks_transforms_beside_the_config(tmp_path: Path) -> None:
    folder = tmp_path / "hooks" / "transforms"
    folder.mkdir(parents=True)
    (folder / "t.py").write_text(
        "def transform(ctx):\n    return {'message': 'from default dir'}\n"
    )
    from hookwise.engine.config.convert import structure

    config = structure(
        {"id": "t", "messageTemplate": "m", "transform": {"module": "t.py"}}, MappingConfig
    )
    ruleset = RuleSet.compile([config], base_dir=tmp_path)
    try:
        request = make_request("x", {})
        outcome = run(ruleset.evaluate(ruleset.select(request), request))
        assert outcome.actions[0].fields["message"] == "from default dir"
    finally:
        ruleset.close()
