"""The model policy: `agents.defaults.model`, the `agents.defaults.models` allowlist, aliases."""

from __future__ import annotations

import pytest

from hookwise.engine.config.load import load_data
from hookwise.engine.config.model_policy import ModelPolicy
from hookwise.engine.errors import ConfigError, Refusal
from hookwise.server.ingress.refusals import status_of


def policy(defaults: dict) -> ModelPolicy:
    """The policy of an `agents.defaults` block, loaded as the config file would be."""
    config = load_data({"agents": {"defaults": defaults}}).config
    return ModelPolicy.from_config(config.agents.defaults)


OPEN = {}
LISTED = {"model": "openai/gpt-4o", "models": ["openai/gpt-4o", "anthropic/claude-sonnet-4"]}
MAPPED = {
    "model": "fast",
    "models": {
        "openai/gpt-4o-mini": {"alias": "fast"},
        "anthropic/claude-opus-4": {"alias": "smart"},
        "ollama/llama3.1:8b": None,
    },
}


@pytest.mark.parametrize(
    ("defaults", "ref", "canonical"),
    [
        (OPEN, None, "echo/echo"),
        (OPEN, "echo/echo", "echo/echo"),
        (OPEN, "openai/gpt-4o", "openai/gpt-4o"),
        (OPEN, "  openai/gpt-4o  ", "openai/gpt-4o"),
        (OPEN, "openrouter/anthropic/claude-3.5-sonnet", "openrouter/anthropic/claude-3.5-sonnet"),
        (LISTED, None, "openai/gpt-4o"),
        (LISTED, "anthropic/claude-sonnet-4", "anthropic/claude-sonnet-4"),
        (MAPPED, None, "openai/gpt-4o-mini"),
        (MAPPED, "fast", "openai/gpt-4o-mini"),
        (MAPPED, "smart", "anthropic/claude-opus-4"),
        (MAPPED, "anthropic/claude-opus-4", "anthropic/claude-opus-4"),
        (MAPPED, "ollama/llama3.1:8b", "ollama/llama3.1:8b"),
    ],
)
def test_allowed_models_and_aliases_resolve_to_provider_slash_model(defaults, ref, canonical):
    assert policy(defaults).resolve(ref) == canonical


@pytest.mark.parametrize(
    ("defaults", "ref"),
    [
        (LISTED, "openai/gpt-4o-mini"),
        (LISTED, "echo/echo"),
        (MAPPED, "openai/gpt-4o"),
        (MAPPED, "anthropic/claude-sonnet-4"),
    ],
)
def test_models_outside_the_allowlist_are_refused(defaults, ref):
    with pytest.raises(Refusal) as info:
        policy(defaults).resolve(ref)

    error = info.value
    assert (status_of(error.code), error.code, error.field) == (400, "model_not_allowed", "model")
    assert error.message.startswith(f"model {ref!r} is not allowed; allowed models: ")


@pytest.mark.parametrize(
    ("defaults", "ref", "message"),
    [
        (OPEN, "", "model must not be blank"),
        (OPEN, "   ", "model must not be blank"),
        (OPEN, 42, "model must be a string"),
        (OPEN, "gpt-4o", "model 'gpt-4o' must be <provider>/<model> or a known alias"),
        (OPEN, "openai/", "model 'openai/' must be <provider>/<model> or a known alias"),
        (OPEN, "/gpt-4o", "model '/gpt-4o' must be <provider>/<model> or a known alias"),
        (
            OPEN,
            "openai/gpt 4o",
            "model 'openai/gpt 4o' must be <provider>/<model> or a known alias",
        ),
        (MAPPED, "quick", "model 'quick' must be <provider>/<model> or a known alias"),
    ],
)
def test_blank_or_ill_formed_models_are_invalid_fields(defaults, ref, message):
    with pytest.raises(Refusal) as info:
        policy(defaults).resolve(ref)

    error = info.value
    assert (status_of(error.code), error.code, error.field, error.message) == (
        400,
        "invalid_field",
        "model",
        message,
    )


def test_the_refusal_names_the_allowed_models():
    with pytest.raises(Refusal) as info:
        policy(LISTED).resolve("openai/o3")

    assert info.value.to_body() == {
        "ok": False,
        "error": "model 'openai/o3' is not allowed; allowed models: "
        "anthropic/claude-sonnet-4, openai/gpt-4o",
        "code": "model_not_allowed",
        "field": "model",
    }


def test_the_default_model_is_allowed_even_when_not_listed():
    p = policy({"model": "echo/echo", "models": ["openai/gpt-4o"]})

    assert p.resolve("echo/echo") == "echo/echo"
    assert p.enforced


def test_no_allowlist_means_not_enforced():
    assert not policy(OPEN).enforced
    assert policy(OPEN).aliases == {}


@pytest.mark.parametrize(
    ("defaults", "path", "problem"),
    [
        ({"models": ["gpt-4o"]}, "agents.defaults.models[0]", "not of the form provider/model"),
        ({"model": "gpt-4o"}, "agents.defaults.model", "not provider/model or an alias"),
        (
            {"models": {"a/x": {"alias": "fast"}, "b/y": {"alias": "fast"}}},
            "agents.defaults.models.b/y.alias",
            "'fast' is already the alias of a/x",
        ),
        (
            {"models": {"a/x": {"alias": "b/y"}, "b/y": None}},
            "agents.defaults.models.a/x.alias",
            "must not shadow",
        ),
        ({"models": {"a/x": {"alias": " "}}}, "agents.defaults.models.a/x.alias", "non-blank"),
    ],
)
def test_bad_model_configuration_names_its_key(defaults, path, problem):
    with pytest.raises(ConfigError) as info:
        policy(defaults)

    [issue] = info.value.issues
    assert issue.path == path
    assert problem in issue.message
