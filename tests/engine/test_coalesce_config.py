"""`coalesce` on a mapping: loaded with its defaults, durations in words, bad values refused
naming the key; the key rendered per request; warnings where it cannot apply."""

from __future__ import annotations

from typing import Any

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.errors import ConfigError
from hookwise.engine.rules.ruleset import RuleSet


def _mapping(**extra: Any) -> dict[str, Any]:
    return {"id": "prs", "match": {"path": "github"}, "messageTemplate": "PR {{ n }}", **extra}


def test_coalesce_loads_with_its_defaults() -> None:
    loaded = load_data({"hooks": {"mappings": [_mapping(coalesce={"key": "{{ n }}"})]}})
    [mapping] = loaded.config.hooks.mappings
    assert mapping.coalesce is not None
    assert (mapping.coalesce.window, mapping.coalesce.max_wait, mapping.coalesce.keep) == (
        30.0,
        300.0,
        "latest",
    )
    loaded = load_data(
        {
            "hooks": {
                "mappings": [
                    _mapping(coalesce={"key": "k", "window": "2s", "maxWait": "1m", "keep": "all"})
                ]
            }
        }
    )
    coalesce = loaded.config.hooks.mappings[0].coalesce
    assert coalesce is not None and (coalesce.window, coalesce.max_wait) == (2.0, 60.0)


@pytest.mark.parametrize(
    "coalesce",
    [
        {"window": "30s"},
        {"key": "k", "window": 0},
        {"key": "k", "maxWait": "soon"},
        {"key": "k", "keep": "first"},
        {"key": "k", "every": "1s"},
    ],
)
def test_bad_coalesce_is_refused(coalesce: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        load_data({"hooks": {"mappings": [_mapping(coalesce=coalesce)]}})
    assert "coalesce" in str(info.value)


def test_where_coalesce_cannot_apply_the_load_warns() -> None:
    wake = {"id": "w", "match": {"path": "w"}, "action": "wake", "textTemplate": "t"}
    batch = _mapping(forEach="$.items")
    for m in (wake, batch):
        m["coalesce"] = {"key": "k"}
    loaded = load_data({"hooks": {"mappings": [wake, batch]}})
    rules = RuleSet.compile(loaded.config.hooks.mappings)
    try:
        assert [w for w in rules.warnings if "'w'" in w and "wake mapping" in w]
        assert [w for w in rules.warnings if "'prs'" in w and "forEach" in w]
    finally:
        rules.close()
