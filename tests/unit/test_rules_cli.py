"""`hookwise rules test` and `hookwise rules check`, run as the command line, and the channel check
`config check` shares (`hookwise.server.cli.rules.unconfigured_channel_issues`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hookwise.engine.config.load import load_data
from hookwise.server.cli.rules import unconfigured_channel_issues

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "rules" / "examples"
TOKEN = "a-hook-token-that-is-long-enough-123"


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookwise.server.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=60,
    )


def _config(tmp_path: Path, **hooks: Any) -> Path:
    data = {"hooks": {"enabled": True, "token": TOKEN, **hooks}}
    path = tmp_path / "hookwise.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _examples(tmp_path: Path, **more: Any) -> Path:
    # the repo's transforms, where a configuration finds them: <config dir>/hooks/transforms
    (tmp_path / "hooks").mkdir(exist_ok=True)
    link = tmp_path / "hooks" / "transforms"
    if not link.exists():
        link.symlink_to(REPO / "transforms")
    return _config(tmp_path, rules=[str(EXAMPLES / "*.yaml")], **more)


def _test(
    config: Path, path: str, payload: Path | dict[str, Any], *extra: str
) -> tuple[int, dict[str, Any]]:
    if isinstance(payload, dict):
        file = config.parent / "payload.json"
        file.write_text(json.dumps(payload), encoding="utf-8")
        payload = file
    r = _cli(
        "rules", "test", "--config", str(config), "--path", path, "--payload", str(payload), *extra
    )
    assert r.stdout, r.stderr
    return r.returncode, json.loads(r.stdout)


# ------------------------------------------------------------------------------------ test


def test_rules_test_shows_the_matched_rule_extracted_values_and_validated_action(
    tmp_path: Path,
) -> None:
    code, out = _test(
        _examples(tmp_path),
        "github",
        EXAMPLES / "github-pull-request.json",
        "--header",
        "X-GitHub-Event: pull_request",
    )
    assert code == 0
    assert (out["matched"], out["status"], out["error"]) == ("github-pull-request", 202, None)
    assert out["extracted"] == {"repo": "acme/gateway", "number": 42, "author": "octocat"}
    [action] = out["actions"]
    assert action["kind"] == "agent" and action["error"] is None
    validated = action["validated"]
    assert validated["sessionKey"] == "hook:github:acme/gateway#42"
    assert (validated["name"], validated["channel"], validated["deliver"]) == (
        "GitHub",
        "last",
        True,
    )
    assert validated["message"].startswith("Pull request #42 opened in acme/gateway by octocat")
    results = {r["id"]: r["result"] for r in out["rules"]}
    assert results["github-pull-request"] == "matched"
    assert results["github-other"] == "shadowed"
    assert results["stripe-payment-failed"] == "no match"


def test_rules_test_shows_the_200_ignored_of_a_path_behind_a_signature_block(
    tmp_path: Path,
) -> None:
    config = _config(
        tmp_path,
        verify={"github": {"scheme": "github", "secret": "s", "auth": "signature"}},
        mappings=[
            {
                "id": "prs",
                "match": {"path": "github", "when": {"header": "x-github-event", "equals": "pr"}},
                "messageTemplate": "m",
            }
        ],
    )
    code, out = _test(config, "github", {"ref": "main"}, "--header", "X-GitHub-Event: push")
    assert (code, out["matched"], out["status"], out["ignored"]) == (1, None, 200, True)
    [rule] = out["rules"]
    assert rule["result"] == "no match" and "x-github-event" in rule["reason"]


def test_rules_test_says_why_no_rule_matched_and_exits_1(tmp_path: Path) -> None:
    code, out = _test(_examples(tmp_path), "github", EXAMPLES / "github-issue.json")
    # No X-GitHub-Event header: only the catch-all github-other rule matches.
    assert (code, out["matched"]) == (0, "github-other")
    code, out = _test(_examples(tmp_path), "gitlab", {"x": 1})
    assert code == 1
    assert (out["matched"], out["status"], out["actions"], out["ignored"]) == (None, 404, [], False)
    assert all(r["result"] == "no match" and r["reason"] for r in out["rules"])
    assert any("match.path is 'github'" in r["reason"] for r in out["rules"])


def test_rules_test_reports_a_validation_error_as_json_and_exits_1(tmp_path: Path) -> None:
    mapping = {"id": "to-slack", "match": {"path": "x"}, "messageTemplate": "m", "channel": "slack"}
    code, out = _test(_config(tmp_path, mappings=[mapping]), "x", {})
    assert code == 1
    assert out["status"] == 400
    error = out["error"]
    assert (error["code"], error["field"], error["rule"]) == (
        "channel_not_configured",
        "channel",
        "to-slack",
    )
    [action] = out["actions"]
    assert action["validated"] is None and action["error"] == error
    assert action["rendered"]["channel"] == "slack"


def test_rules_test_checks_the_model_allowlist(tmp_path: Path) -> None:
    mapping = {"id": "m", "match": {"path": "x"}, "messageTemplate": "m", "model": "{{model}}"}
    config = _config(tmp_path, mappings=[mapping])
    data = yaml.safe_load(config.read_text())
    data["agents"] = {"defaults": {"models": {"openai/gpt-4o": {"alias": "gpt"}}}}
    data["models"] = {"providers": {"openai": {"api": "openai", "baseUrl": "http://127.0.0.1:9"}}}
    config.write_text(yaml.safe_dump(data))
    code, out = _test(config, "x", {"model": "gpt"})
    assert (code, out["actions"][0]["validated"]["model"]) == (0, "openai/gpt-4o")
    code, out = _test(config, "x", {"model": "openai/gpt-3.5"})
    assert (code, out["error"]["code"], out["error"]["field"]) == (1, "model_not_allowed", "model")


def test_rules_test_passes_headers_and_query_to_templates(tmp_path: Path) -> None:
    mapping = {
        "id": "ctx",
        "match": {"path": "x", "when": {"query": "env", "equals": "prod"}},
        "messageTemplate": "{{headers['x-trace']}} {{query.env}}",
    }
    config = _config(tmp_path, mappings=[mapping])
    code, out = _test(config, "x", {}, "--header", "X-Trace:t-1", "--query", "env=prod")
    assert code == 0
    assert out["actions"][0]["validated"]["message"] == "t-1 prod"
    code, out = _test(config, "x", {}, "--query", "env=dev")
    assert (code, out["matched"]) == (1, None)


def test_rules_test_runs_the_transform_and_shows_a_skip(tmp_path: Path) -> None:
    payload = json.loads((EXAMPLES / "monitoring-alert.json").read_text())
    code, out = _test(_examples(tmp_path), "alerts", {**payload, "status": "resolved"})
    assert (code, out["matched"], out["skipped"], out["actions"], out["status"]) == (
        0,
        "monitoring-alert",
        True,
        [],
        204,
    )
    code, out = _test(_examples(tmp_path), "alerts", {**payload, "severity": "warning"})
    assert code == 0 and out["status"] == 200
    assert out["actions"][0]["validated"] == {
        "text": "[warning] Disk usage above 95% on db-1",
        "mode": "next-heartbeat",
        "agentId": "main",
        "session": "main",
    }


def test_rules_test_shows_respond_and_the_status_it_gives(tmp_path: Path) -> None:
    code, out = _test(_examples(tmp_path), "stripe", EXAMPLES / "stripe-payment-failed.json")
    assert code == 0
    assert out["respond"] == {
        "status": 200,
        "body": {"received": True, "event": "evt_1PqR2sT3uV4wX5yZ"},
        "headers": {},
    }
    assert out["status"] == 200
    assert out["actions"][0]["validated"]["sessionKey"] == "hook:stripe:cus_QwErTy123"


def test_rules_test_shows_a_transform_error_with_its_detail(tmp_path: Path) -> None:
    tdir = tmp_path / "hooks" / "transforms" / "t"
    tdir.mkdir(parents=True)
    (tdir / "bad.js").write_text('export default function () { throw new Error("no field q"); }\n')
    mapping = {
        "id": "bad",
        "match": {"path": "x"},
        "messageTemplate": "m",
        "transform": {"module": "bad.js"},
    }
    code, out = _test(_config(tmp_path, transformsDir=str(tdir), mappings=[mapping]), "x", {})
    assert code == 1
    assert (out["status"], out["error"]["code"], out["error"]["rule"]) == (
        500,
        "transform_failed",
        "bad",
    )
    assert "no field q" in out["error"]["detail"]


def test_rules_test_reads_a_form_body(tmp_path: Path) -> None:
    mapping = {"id": "f", "match": {"path": "x"}, "messageTemplate": "{{action}}"}
    body = tmp_path / "body.txt"
    body.write_text("payload=%7B%22action%22%3A%22opened%22%7D")
    config = _config(tmp_path, mappings=[mapping])
    code, out = _test(
        config, "x", body, "--header", "Content-Type: application/x-www-form-urlencoded"
    )
    assert (code, out["actions"][0]["validated"]["message"]) == (0, "opened")


def test_rules_test_dispatches_nothing(tmp_path: Path) -> None:
    config = _examples(tmp_path)
    r = _cli(
        "rules", "test", "--config", str(config), "--path", "alerts",
        "--payload", str(EXAMPLES / "monitoring-alert.json"), cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    # no store, no state: only the config and the link to the transforms
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hooks", "hookwise.yaml"]


def test_rules_test_with_a_broken_config_prints_the_problems_and_exits_1(tmp_path: Path) -> None:
    mapping = {"id": "b", "match": {"path": "x"}, "messageTemplate": "{{ oops"}
    r = _cli(
        "rules", "test", "--config", str(_config(tmp_path, mappings=[mapping])), "--path", "x",
        "--payload", str(EXAMPLES / "monitoring-alert.json"),
    )  # fmt: skip
    assert r.returncode == 1 and r.stdout == ""
    assert "rule 'b': hooks.mappings[0].messageTemplate:" in r.stderr


# ----------------------------------------------------------------------------------- check


def test_rules_check_accepts_the_examples(tmp_path: Path) -> None:
    r = _cli("rules", "check", "--config", str(_examples(tmp_path, presets=["gmail"])))
    assert r.returncode == 0, r.stderr
    assert "11 rule(s) compiled without problems" in r.stdout
    assert "github-pull-request" in r.stdout and "gmail" in r.stdout


def test_rules_check_reports_each_rules_discriminator_and_warns_of_shadowed_rules(
    tmp_path: Path,
) -> None:
    mappings = [
        {"id": "gh", "match": {"path": "in", "when": {"header": "X-Event", "equals": "push"}}},
        {"id": "stripe", "match": {"path": "in", "source": "stripe"}},
        {"id": "any-in", "match": {"path": "in", "when": {"jsonpath": "$.v", "regex": "."}}},
        {"id": "stripe-again", "match": {"path": "in", "source": "stripe"}},
        {"id": "everything", "match": {"path": "in"}},
        {"id": "never", "match": {"path": "in", "source": "mail"}},
    ]
    mappings = [{**m, "messageTemplate": "m"} for m in mappings]
    r = _cli("rules", "check", "--config", str(_config(tmp_path, mappings=mappings)))
    assert r.returncode == 0, r.stderr
    lines = [line.strip() for line in r.stdout.splitlines()]
    start = lines.index("path in:")
    assert lines[start + 1 : start + 7] == [
        "gh: header 'x-event' = 'push'",
        "stripe: match.source = 'stripe'",
        "any-in: no discriminator: tried on every request",
        "stripe-again: match.source = 'stripe'",
        "everything: no discriminator: tried on every request",
        "never: match.source = 'mail'",
    ]
    warnings = [line for line in lines if line.startswith("warning:")]
    assert warnings == [
        "warning: rule 'stripe-again' (hooks.mappings[3]) can never match: rule 'stripe' "
        "(hooks.mappings[1]) comes first and matches every request it matches",
        "warning: rule 'never' (hooks.mappings[5]) can never match: rule 'everything' "
        "(hooks.mappings[4]) comes first and matches every request it matches",
    ]


def test_rules_check_reports_every_problem_with_file_rule_and_key_path(tmp_path: Path) -> None:
    (tmp_path / "extra.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "id": "file-rule",
                    "match": {"path": "f"},
                    "extract": {"x": "$.[[["},
                    "messageTemplate": "m",
                },
                {"id": "file-rule-2", "match": {"path": "g"}, "messageTemplat": "m"},
            ]
        )
    )
    mappings = [
        {"id": "bad-template", "match": {"path": "a"}, "messageTemplate": "{% if %}"},
        {
            "id": "no-module",
            "match": {"path": "b"},
            "messageTemplate": "m",
            "transform": {"module": "nope.js"},
        },
        {
            "id": "outside",
            "match": {"path": "c"},
            "messageTemplate": "m",
            "transform": {"module": "../x.py"},
        },
        {
            "id": "bad-when",
            "match": {"path": "d", "when": {"jsonpath": "$.a", "regex": "("}},
            "messageTemplate": "m",
        },
        {"match": {"path": "e"}, "textTemplate": "t", "action": "wake", "respond": {"status": 500}},
    ]
    config = _config(tmp_path, mappings=mappings, rules=["extra.yaml"])
    r = _cli("rules", "check", "--config", str(config))
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert lines[0].endswith("problem(s):")
    expected = [
        "rule 'bad-template': hooks.mappings[0].messageTemplate:",
        "rule 'no-module': hooks.mappings[1].transform.module:",
        "rule 'outside': hooks.mappings[2].transform.module:",
        "rule 'bad-when': hooks.mappings[3].match.when",
        "rule 'mapping-5': hooks.mappings[4].respond.status:",
        "extra.yaml: rule 'file-rule': [0].extract.x:",
        "extra.yaml: rule 'file-rule-2': [1].messageTemplat:",
    ]
    for prefix in expected:
        assert any(line.strip().startswith(prefix) for line in lines), (prefix, r.stderr)


def test_rules_check_reports_a_channel_that_is_not_configured(tmp_path: Path) -> None:
    mappings = [
        {"id": "to-slack", "match": {"path": "a"}, "messageTemplate": "m", "channel": "slack"},
        {
            "id": "to-telegram",
            "match": {"path": "b"},
            "messageTemplate": "m",
            "channel": "telegram",
        },
    ]
    config = _config(tmp_path, mappings=mappings)
    data = yaml.safe_load(config.read_text())
    data["channels"] = {"telegram": {"botToken": "123:abc"}}
    config.write_text(yaml.safe_dump(data))
    r = _cli("rules", "check", "--config", str(config))
    assert r.returncode == 1
    assert "rule 'to-slack': hooks.mappings[0].channel: channel slack is not configured" in r.stderr
    assert "to-telegram" not in r.stderr


@pytest.mark.parametrize(
    ("mapping", "channels", "expected"),
    [
        ({"channel": "slack"}, {}, ["hooks.mappings[0].channel: channel slack is not configured"]),
        ({"channel": "slack", "deliver": False}, {}, []),
        ({"channel": "slack"}, {"slack": {"botToken": "xoxb-1"}}, []),
        ({"channel": "imsg"}, {"imessage": {}}, []),
        ({"channel": "last"}, {}, []),
        ({"channel": "fax"}, {}, ["hooks.mappings[0].channel: unknown channel 'fax'"]),
        (
            {"fallbackChannel": "signal"},
            {},
            ["hooks.mappings[0].fallbackChannel: channel signal is not configured"],
        ),
        ({"channel": "slack", "action": "wake", "textTemplate": "t"}, {}, []),
    ],
)
def test_unconfigured_channel_issues(
    mapping: dict[str, Any], channels: dict[str, Any], expected: list[str]
) -> None:
    rule = {"id": "r", "match": {"path": "p"}, "messageTemplate": "m", **mapping}
    if rule.get("action") == "wake":
        del rule["messageTemplate"]
    loaded = load_data(
        {"hooks": {"enabled": True, "token": TOKEN, "mappings": [rule]}, "channels": channels}
    )
    issues = unconfigured_channel_issues(loaded)
    assert [i.rule_id for i in issues] == ["r"] * len(expected)
    assert len(issues) == len(expected)
    for issue, want in zip(issues, expected, strict=True):
        assert f"{issue.path}: {issue.message}".startswith(want)


def test_unconfigured_channel_issues_covers_rule_files(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "id": "in-file",
                    "match": {"path": "p"},
                    "messageTemplate": "m",
                    "channel": "discord",
                }
            ]
        )
    )
    data = {"hooks": {"enabled": True, "token": TOKEN, "rules": ["r.yaml"]}}
    loaded = load_data(data, source=tmp_path / "hookwise.yaml")
    [issue] = unconfigured_channel_issues(loaded)
    assert (issue.file, issue.rule_id, issue.path) == ("r.yaml", "in-file", "[0].channel")


# ------------------------------------------------------------------------------------ help


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        (("rules",), ("test", "check")),
        (
            ("rules", "test"),
            ("--config", "--path", "--payload", "--header", "--query", "exit status"),
        ),
        (("rules", "check"), ("--config", "exit status")),
        (("serve",), ("--watch",)),
    ],
)
def test_help_is_complete(args: tuple[str, ...], flags: tuple[str, ...]) -> None:
    r = _cli(*args, "--help")
    assert r.returncode == 0
    assert "usage: hookwise" in r.stdout
    for flag in flags:
        assert flag in r.stdout


def test_rules_test_polices_session_keys_as_the_gateway_does(tmp_path: Path) -> None:
    mappings = [
        {"id": "pinned", "match": {"path": "p"}, "sessionKey": "hook:pinned",
         "messageTemplate": "m"},
        {"id": "fresh", "match": {"path": "f"}, "sessionMode": "per-request",
         "messageTemplate": "m"},
    ]  # fmt: skip
    config = _config(
        tmp_path, allowRequestSessionKey=False, defaultSessionKey="hook:d", mappings=mappings
    )
    code, out = _test(config, "p", {})
    assert code == 0 and out["actions"][0]["validated"]["sessionKey"] == "hook:pinned"
    code, out = _test(config, "f", {})
    assert code == 0 and out["actions"][0]["validated"]["sessionKey"].startswith("hook:")
    assert out["actions"][0]["validated"]["sessionKey"] != "hook:d"


def test_rules_test_takes_a_top_level_array_payload(tmp_path: Path) -> None:
    mapping = {
        "id": "sendgrid",
        "match": {"path": "sendgrid", "when": {"jsonpath": "$[0].event", "exists": True}},
        "action": "wake",
        "forEach": "$",
        "textTemplate": "{{ item.event }}: {{ item.email }}",
    }
    file = tmp_path / "events.json"
    file.write_text('[{"event": "open", "email": "a@x"}, {"event": "click", "email": "b@x"}]')
    code, out = _test(_config(tmp_path, mappings=[mapping]), "sendgrid", file)
    assert code == 0, out
    assert [a["validated"]["text"] for a in out["actions"]] == ["open: a@x", "click: b@x"]
