"""The price table, the breaker settings and model chains in the configuration: their formats,
their refusals with the key path, the cost of a call, and `config check` naming every model
without a price."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookwise.engine.config.agents import Roster
from hookwise.engine.config.load import load_data
from hookwise.engine.config.prices import PerTokens, PriceConfig
from hookwise.engine.errors import ConfigError
from tests.cli.support import run

PROVIDERS = {
    "openai": {"api": "openai", "apiKey": "sk-x"},
    "anthropic": {"api": "anthropic", "apiKey": "sk-y"},
}


def models(**more: object) -> dict[str, object]:
    return {"models": {"providers": PROVIDERS, **more}}


@pytest.mark.parametrize(
    ("per", "tokens"),
    [("1M", 1_000_000), ("1m", 1_000_000), ("1K", 1000), (1000, 1000), ("2.5K", 2500)],
)
def test_per_is_a_number_of_tokens(per: object, tokens: int) -> None:
    assert PerTokens.parse(per) == tokens


@pytest.mark.parametrize("per", ["1G", 0, -5, "0.5", True, "per million"])
def test_a_bad_per_is_refused_with_its_key(per: object) -> None:
    with pytest.raises(ConfigError) as e:
        load_data(models(prices={"openai/gpt-4.1": {"input": 1, "output": 2, "per": per}}))
    assert "models.prices.openai/gpt-4.1.per" in str(e.value)


def test_a_price_needs_input_and_output_and_no_negative() -> None:
    with pytest.raises(ConfigError) as e:
        load_data(models(prices={"openai/a": {"input": 1}, "openai/b": {"input": -1, "output": 1}}))
    text = str(e.value)
    assert "models.prices.openai/a" in text and "output" in text
    assert "models.prices.openai/b" in text


def test_the_cost_of_a_call() -> None:
    price = PriceConfig(input=2.0, output=8.0, cache_read=0.5, per=PerTokens(1_000_000))
    assert price.cost(1000, 500, 10_000, 2000) == pytest.approx(
        (1000 * 2 + 500 * 8 + 10_000 * 0.5 + 2000 * 2) / 1e6
    )
    assert price.cost(None, None) == 0.0


def test_models_without_a_price_are_warned_about() -> None:
    loaded = load_data(
        {
            **models(prices={"openai/gpt-4.1": {"input": 2, "output": 8}}),
            "agents": {
                "defaults": {
                    "model": ["openai/gpt-4.1", "anthropic/claude-sonnet-4", "echo/echo"],
                    "models": ["openai/gpt-4.1", "openai/gpt-4.1-mini"],
                }
            },
        }
    )
    assert [w for w in loaded.warnings if "models.prices" in w] == [
        "models.prices has no price for anthropic/claude-sonnet-4: its calls are recorded with"
        " cost null",
        "models.prices has no price for openai/gpt-4.1-mini: its calls are recorded with cost null",
    ]


def test_a_model_list_is_the_model_and_its_fallbacks() -> None:
    loaded = load_data(
        {
            **models(),
            "agents": {
                "defaults": {"model": ["openai/gpt-4.1", "anthropic/claude-sonnet-4"]},
                "list": [
                    {"id": "ops", "model": ["anthropic/claude-sonnet-4", "openai/gpt-4.1"]},
                    {"id": "own", "model": "openai/gpt-4.1-mini"},
                    {"id": "same"},
                ],
            },
        }
    )
    roster = Roster.from_config(loaded.config)
    assert roster.get("main") is None
    assert roster.get("ops").default_chain == ("anthropic/claude-sonnet-4", "openai/gpt-4.1")
    # an agent with a model of its own does not inherit the defaults' fallbacks
    assert roster.get("own").default_chain == ("openai/gpt-4.1-mini",)
    assert roster.get("same").default_chain == ("openai/gpt-4.1", "anthropic/claude-sonnet-4")


def test_a_model_list_and_fallbacks_together_are_refused() -> None:
    with pytest.raises(ConfigError) as e:
        load_data({"agents": {"defaults": {"model": ["a/b", "c/d"], "fallbacks": ["e/f"]}}})
    assert "agents.defaults.fallbacks" in str(e.value)


def test_a_bad_fallback_names_its_key() -> None:
    with pytest.raises(ConfigError) as e:
        Roster.from_config(
            load_data({"agents": {"defaults": {"fallbacks": ["not a model"]}}}).config
        )
    assert "agents.defaults.fallbacks[0]" in str(e.value)


def test_breaker_settings_are_read() -> None:
    loaded = load_data(models(breaker={"failures": 3, "window": "2m", "cooldown": "45s"}))
    b = loaded.config.models.breaker
    assert (b.failures, b.window, b.cooldown) == (3, 120.0, 45.0)


def test_config_check_says_which_models_have_no_price(tmp_path: Path) -> None:
    (tmp_path / "hookwise.yaml").write_text(
        "models:\n"
        "  providers: {openai: {api: openai, apiKey: sk-x}}\n"
        "  prices: {openai/gpt-4.1: {input: 2.0, output: 8.0, per: 1M}}\n"
        "agents: {defaults: {model: [openai/gpt-4.1, openai/gpt-4.1-mini]}}\n"
    )
    r = run("config", "check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "models.prices has no price for openai/gpt-4.1-mini" in r.stderr
    assert "no price for openai/gpt-4.1:" not in r.stderr
