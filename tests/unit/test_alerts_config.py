"""`alerts:` configuration: every kind has a check and defaults (the registry and the table
agree), a rule names the scope its kind needs and no other, targets are `<channel>` or
`<channel>:<recipient>` naming configured channels, and each error names its key path."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.config.alerts import KINDS, AlertsConfig, split_target
from hookwise.engine.config.convert import structure
from hookwise.engine.errors import ConfigError
from hookwise.server.alerts.evaluator import check_targets, notification_text
from hookwise.server.alerts.kinds import CHECKS
from hookwise.server.channels.registry import load_channels


def alerts(**data: Any) -> AlertsConfig:
    return structure(data, AlertsConfig, "alerts")


def error(**data: Any) -> str:
    with pytest.raises(ConfigError) as e:
        alerts(**data)
    return str(e.value)


def test_every_kind_has_a_check_and_every_check_a_kind() -> None:
    assert set(CHECKS) == set(KINDS)
    for name, spec in KINDS.items():
        assert spec.threshold > 0 and spec.window >= 0, name


def test_defaults_come_from_the_kind_and_the_rule_overrides_them() -> None:
    [default, tuned] = alerts(
        rules=[
            {"kind": "deliveries_failing", "channel": "slack"},
            {"kind": "signature_failures", "path": "github", "threshold": 3, "window": "2m"},
        ]
    ).rules
    assert (default.limit, default.seconds) == (3, 300)
    assert (tuned.limit, tuned.seconds, tuned.rule_id) == (3, 120, "signature_failures:github")
    assert alerts().interval == 30


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"kind": "nope"}, "alerts.rules[0]: kind must be one of deliveries_failing"),
        ({"kind": "deliveries_failing"}, "needs `channel`"),
        ({"kind": "dead_letters", "channel": "slack"}, "takes no channel"),
        ({"kind": "queue_age", "queue": "events"}, "queue must be runs or deliveries"),
        ({"kind": "dead_letters", "threshold": 0}, "threshold must be a positive number"),
        ({"kind": "dead_letters", "window": "soon"}, "alerts.rules[0].window"),
        ({"kind": "dead_letters", "notify": ["Slack #x"]}, "is not a target"),
        ({"kind": "dead_letters", "id": "bad id!"}, "id must be letters"),
        ({"kind": "dead_letters", "colour": "red"}, "alerts.rules[0].colour"),
    ],
)
def test_a_bad_rule_is_refused_with_its_key_path(rule: dict[str, Any], message: str) -> None:
    assert message in error(rules=[rule])


def test_two_rules_with_one_id_are_refused() -> None:
    rules = [{"kind": "dead_letters"}, {"kind": "dead_letters", "window": "1h"}]
    assert "two rules have the id 'dead_letters'" in error(rules=rules)


CHANNELS = load_channels(
    {
        "slack": {"botToken": "xoxb-1234567890-abcdefghij"},
        "telegram": {"botToken": "123456:ABCdefGhIJKlmnoPQRstuvWXyz", "defaultTo": "-100123"},
    }
)


def test_targets_must_name_configured_channels_and_every_rule_must_tell_someone() -> None:
    good = alerts(notify=["slack:#alerts", "telegram"], rules=[{"kind": "dead_letters"}])
    check_targets(good, CHANNELS)
    with pytest.raises(ConfigError) as e:
        check_targets(
            alerts(
                notify=["discord:123", "slack"],
                rules=[
                    {
                        "kind": "dead_letters",
                        "notify": ["telegram:-100", "matrix:x", "telegram:ops"],
                    }
                ],
            ),
            CHANNELS,
        )
    found = {i.path: i.message for i in e.value.issues}
    assert set(found) == {
        "alerts.notify[0]",
        "alerts.notify[1]",
        "alerts.rules[0].notify[1]",
        "alerts.rules[0].notify[2]",
    }
    assert found["alerts.rules[0].notify[2]"].startswith("invalid recipient: a Telegram recipient")
    assert found["alerts.notify[0]"] == "names no configured channel"
    assert "slack has no defaultTo" in found["alerts.notify[1]"]
    with pytest.raises(ConfigError, match=r"alerts.rules\[0\]: tells nobody"):
        check_targets(alerts(rules=[{"kind": "dead_letters"}]), CHANNELS)


def test_a_target_splits_at_its_first_colon_only() -> None:
    assert split_target("webhook:https://example.com/in") == ("webhook", "https://example.com/in")
    assert split_target("telegram") == ("telegram", None)


def test_a_notification_names_the_alert_and_says_opened_or_resolved() -> None:
    assert (
        notification_text("opened", "r", "k", "3 failing", "a1")
        == "[ALERT] r (k): 3 failing (alert a1)"
    )
    assert notification_text("resolved", "r", "k", "ok", "a1").startswith("[RESOLVED] r (k)")
