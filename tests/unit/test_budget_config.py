"""Budgets in the configuration: their format on a mapping, an agent and `agents.defaults`,
their refusals with the key path, and the windows they count in (rolling, calendar)."""

from __future__ import annotations

import pytest

from hookwise.engine.config.agents import Roster
from hookwise.engine.config.budgets import BudgetConfig
from hookwise.engine.config.durations import Duration
from hookwise.engine.config.load import load_data
from hookwise.engine.config.prices import PerTokens
from hookwise.engine.errors import ConfigError


def test_budgets_load_on_defaults_agents_and_mappings() -> None:
    loaded = load_data(
        {
            "agents": {
                "defaults": {"budget": {"tokens": "2M", "cost": 20, "per": "1d"}},
                "list": [
                    {"id": "main", "default": True},
                    {"id": "cheap", "budget": {"cost": 1.5, "per": "1h", "window": "calendar"}},
                ],
            },
            "hooks": {
                "enabled": True,
                "token": "t" * 32,
                "mappings": [{"id": "m", "match": {"path": "m"}, "budget": {"tokens": "500K"}}],
            },
        }
    )
    roster = Roster.from_config(loaded.config)
    by_id = {a.id: a.budget for a in roster.agents}
    assert by_id["main"] == BudgetConfig(tokens=PerTokens(2_000_000), cost=20, per=Duration(86400))
    assert by_id["cheap"] == BudgetConfig(cost=1.5, per=Duration(3600), window="calendar")
    [mapping] = loaded.config.hooks.mappings
    assert mapping.budget is not None and mapping.budget.tokens == 500_000
    assert mapping.budget.window == "rolling"


@pytest.mark.parametrize(
    ("budget", "says"),
    [
        ({"per": "1d"}, "a budget needs `tokens`, `cost` or both"),
        ({"tokens": 0}, "number of tokens"),
        ({"cost": -1}, "non-negative"),
        ({"tokens": 10, "per": 0}, "positive duration"),
        ({"tokens": 10, "window": "weekly"}, "window"),
        ({"tokens": 10, "by": "nobody"}, "by"),
    ],
)
def test_a_bad_budget_is_refused_with_its_key_path(budget: dict, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"agents": {"defaults": {"budget": budget}}})
    text = str(e.value)
    assert "agents.defaults.budget" in text and says in text, text


def test_windows_rolling_and_calendar() -> None:
    rolling = BudgetConfig(tokens=PerTokens(10), per=Duration(3600))
    assert rolling.window_start(10_000.0) == 6400.0
    assert rolling.window_end(10_000.0) == 13_600.0
    daily = BudgetConfig(tokens=PerTokens(10), per=Duration(86400), window="calendar")
    # 2026-11-29 01:30 UTC: the window started at midnight UTC and ends at the next one
    now = 1795915800.0
    assert daily.window_start(now) == 1795910400.0
    assert daily.window_end(now) == 1795910400.0 + 86400
    assert rolling.exceeded(10, 0.0) and not rolling.exceeded(9, 1e9)
    money = BudgetConfig(cost=2.0)
    assert money.exceeded(0, 2.0) and not money.exceeded(10**9, 1.99)
