"""`config check` and `rules check` report every problem in one pass (structure, templates,
JSONPath, transforms, channels, providers); YAML errors name the file, line and column; unknown
channel ids get a "did you mean"; YAML is read as it is written (1.2: `on` is a string)."""

from __future__ import annotations

from pathlib import Path

from hookwise.engine.config.load import load_config
from tests.cli.support import run

TOKENS = (
    "hooks:\n  enabled: true\n  token: a-hook-token-that-is-long-enough-123\n"
    "gateway: {auth: {token: an-admin-token-that-is-long-enough-456}}\n"
)

EVERYTHING_WRONG = """\
hooks:
  enabled: true
  token: a-hook-token-that-is-long-enough-123
  maxBodyBytes: lots
  mappings:
    - id: typo
      match: {path: a}
      messageTemplat: "x"
    - id: template
      match: {path: b}
      messageTemplate: "{{ unclosed"
    - id: jsonpath
      match: {path: c}
      messageTemplate: "x"
      extract: {who: "$.[[["}
    - id: transform
      match: {path: d}
      messageTemplate: "x"
      transform: {module: missing.js}
    - id: channel
      match: {path: e}
      messageTemplate: "x"
      channel: telegarm
agents:
  defaults:
    timeoutSeconds: soon
    model: mistral/large
models:
  providers:
    x: {api: command}
channels:
  slack: {}
"""


def test_config_check_reports_every_kind_of_problem_at_once(tmp_path: Path) -> None:
    (tmp_path / "hookwise.yaml").write_text(EVERYTHING_WRONG)
    r = run("config", "check", cwd=tmp_path)
    assert r.returncode == 1
    err = r.stderr
    expected = [
        "hooks.maxBodyBytes",  # structure
        "hooks.mappings[0].messageTemplat: unknown key; did you mean 'messageTemplate'?",
        "agents.defaults.timeoutSeconds",
        "rule 'template': hooks.mappings[1].messageTemplate",  # template
        "rule 'jsonpath': hooks.mappings[2].extract.who",  # JSONPath
        "rule 'transform': hooks.mappings[3].transform",  # transform
        "hooks.mappings[4].channel: unknown channel 'telegarm'; did you mean 'telegram'?",
        "channels.slack.botToken: required key is missing",  # channels
        "models.providers.x.command",  # providers
        "agents.defaults.model: model 'mistral/large' names the provider 'mistral'",
    ]
    missing = [e for e in expected if e not in err]
    assert missing == [], err


def test_rules_check_reports_rule_problems_even_with_a_structural_error(tmp_path: Path) -> None:
    (tmp_path / "hookwise.yaml").write_text(EVERYTHING_WRONG)
    r = run("rules", "check", cwd=tmp_path)
    assert r.returncode == 1
    for part in ("hooks.mappings[1].messageTemplate", "hooks.mappings[2].extract.who"):
        assert part in r.stderr, r.stderr


def test_a_yaml_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    cfg = tmp_path / "hookwise.yaml"
    cfg.write_text("hooks:\n  enabled: true\n  path: a: b\n")
    r = run("config", "check", cwd=tmp_path)
    assert r.returncode == 1
    assert f"{cfg} is not valid YAML: line 3, column 10: mapping values are not allowed here" in (
        r.stderr
    )


def test_a_rule_file_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "bad.yaml").write_text("- id: x\n  match: {path: [\n")
    (tmp_path / "hookwise.yaml").write_text(
        TOKENS.replace("  enabled", "  rules: [rules/*.yaml]\n  enabled")
    )
    r = run("rules", "check", cwd=tmp_path)
    assert r.returncode == 1
    assert "rules/bad.yaml: (top level): invalid YAML: line 3, column 1:" in r.stderr, r.stderr


def test_yaml_is_read_as_yaml_1_2_like_it_is_written(tmp_path: Path) -> None:
    cfg = tmp_path / "hookwise.yaml"
    cfg.write_text(
        "hooks:\n  enabled: true\n  token: a-hook-token-that-is-long-enough-123\n"
        "  gmail: {account: me@example.org, password: x, label: on}\n"
    )
    assert load_config(cfg).config.hooks.gmail.label == "on"


def test_gmail_setup_round_trips_a_label_that_yaml_1_1_reads_as_a_boolean(tmp_path: Path) -> None:
    r = run(
        "webhooks",
        "gmail",
        "setup",
        "--account",
        "me@example.org",
        "--password-env",
        "GMAIL_APP_PASSWORD",
        "--label",
        "on",
        "--no-login-check",
        cwd=tmp_path,
        env={"GMAIL_APP_PASSWORD": "x"},
    )
    assert r.returncode == 0, r.stderr
    loaded = load_config(tmp_path / "hookwise.yaml", env={"GMAIL_APP_PASSWORD": "x"})
    assert loaded.config.hooks.gmail.label == "on"


WARNINGS_ONLY = """\
hooks:
  enabled: true
  token: a-hook-token-that-is-long-enough-123
  mappings:
    - id: first
      match: {path: p}
      messageTemplate: "a"
    - id: shadowed
      match: {path: p, source: x}
      messageTemplate: "b"
    - id: stranger
      match: {path: q}
      messageTemplate: "c"
      agentId: nobody
gateway: {auth: {token: an-admin-token-that-is-long-enough-456}}
"""


def test_config_check_prints_the_rules_warnings_and_still_passes(tmp_path: Path) -> None:
    """What `rules check` warns of, `config check` (the one a deployment runs) warns of too: a
    rule that can never match, an agent that does not exist."""
    (tmp_path / "hookwise.yaml").write_text(WARNINGS_ONLY)
    shadowed = (
        "rule 'shadowed' (hooks.mappings[1]) can never match: rule 'first' (hooks.mappings[0])"
        " comes first and matches every request it matches"
    )
    unknown = "rule 'stranger': hooks.mappings[2].agentId: unknown agent 'nobody'"
    config = run("config", "check", cwd=tmp_path)
    assert config.returncode == 0, config.stderr
    assert "the configuration is valid" in config.stdout
    assert f"hookwise: warning: {shadowed}" in config.stderr
    assert f"hookwise: warning: {unknown}" in config.stderr
    rules = run("rules", "check", cwd=tmp_path)
    assert rules.returncode == 0, rules.stderr
    assert f"warning: {shadowed}" in rules.stdout
    assert f"warning: {unknown}" in rules.stdout
