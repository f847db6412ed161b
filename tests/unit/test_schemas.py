"""The JSON Schemas agree with the models: generated config schema, example configs, payloads."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from hookwise.engine.actions import ValidationPolicy, validate_agent, validate_wake
from hookwise.engine.config.load import load_config, read_file
from hookwise.engine.config.schema import config_schema
from hookwise.engine.errors import ConfigError, Refusal

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
EXAMPLE_CONFIGS = sorted((REPO / "examples").glob("*.yaml")) + sorted(
    (REPO / "examples").glob("*.json*")
)


def _schema(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_config_schema_is_generated_from_the_models() -> None:
    committed = json.loads((SCHEMAS / "config.schema.json").read_text())
    assert committed == config_schema(), (
        "run: python -m hookwise.engine.config.schema > schemas/config.schema.json"
    )


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=lambda p: p.name)
def test_every_example_config_validates_and_loads(path: Path, monkeypatch) -> None:
    for name, value in {
        "HOOKWISE_HOOK_TOKEN": "example-hook-token-0123456789abcdef",
        "HOOKWISE_ADMIN_TOKEN": "example-admin-token-0123456789abcdef",
        "OPENAI_API_KEY": "sk-example",
        "ANTHROPIC_API_KEY": "sk-ant-example",
        "TELEGRAM_BOT_TOKEN": "123456:example",
        "SLACK_BOT_TOKEN": "xoxb-example",
        # the worked examples' signature secrets (production.yaml guards their paths)
        "GITHUB_WEBHOOK_SECRET": "gh-example",
        "STRIPE_WEBHOOK_SECRET": "whsec_example",
        "SHOPIFY_WEBHOOK_SECRET": "shpss_example",
        "SLACK_SIGNING_SECRET": "slack-example",
        "DISCORD_PUBLIC_KEY": "ab" * 32,
        "TWILIO_AUTH_TOKEN": "twilio-example",
    }.items():
        monkeypatch.setenv(name, value)
    data = read_file(path)
    _schema("config.schema.json").validate(json.loads(json.dumps(data)))
    loaded = load_config(path)
    # the whole thing must also start: rules compile, channels and providers build
    from hookwise.server.channels.registry import load_channels
    from hookwise.server.lifecycle.gateway import compile_rules
    from hookwise.server.runtime.providers.registry import Providers

    compile_rules(loaded).close()
    load_channels(loaded.config.channels)
    Providers.from_config(loaded.config.models, base_dir=loaded.base_dir)


INVALID_CONFIGS = [
    {"hooks": {"enabled": "yes"}},
    {"hooks": {"maxBodyBytes": "big"}},
    {"hooks": {"mappings": [{"action": "call"}]}},
    {"hooks": {"tokn": "x"}},
    {"agents": {"defaults": {"heartbeat": {"every": "soon"}}}},
    {"store": {"synchronous": "off"}},
]


@pytest.mark.parametrize("data", INVALID_CONFIGS)
def test_an_invalid_config_fails_both_the_schema_and_the_models(data: dict) -> None:
    from hookwise.engine.config.load import load_data

    assert list(_schema("config.schema.json").iter_errors(data))
    with pytest.raises(ConfigError):
        load_data(data)


PAYLOADS = [
    ("wake", {"text": "x"}),
    ("wake", {"text": "x", "mode": "next-heartbeat"}),
    ("wake", {"text": " "}),
    ("wake", {}),
    ("wake", {"text": "x", "mode": "later"}),
    ("wake", {"text": "x", "extra": 1}),
    ("agent", {"message": "m"}),
    (
        "agent",
        {
            "message": "m",
            "channel": "teams",
            "deliver": False,
            "thinking": "low",
            "timeoutSeconds": 3,
        },
    ),
    ("agent", {"message": "m", "channel": "fax"}),
    ("agent", {"message": "m", "deliver": "no"}),
    ("agent", {"message": "m", "timeoutSeconds": 0}),
    ("agent", {"message": "m", "thinking": "max"}),
    ("agent", {"message": "m", "sessionKey": "a\u0000b"}),
    ("agent", {"message": 1}),
    ("agent", {"msg": "m"}),
]


@pytest.mark.parametrize(("kind", "payload"), PAYLOADS)
def test_payload_schemas_agree_with_validation(kind: str, payload: dict) -> None:
    schema_ok = not list(_schema(f"{kind}.schema.json").iter_errors(payload))
    try:
        if kind == "wake":
            validate_wake(payload)
        else:
            validate_agent(payload, ValidationPolicy())
        model_ok = True
    except Refusal:
        model_ok = False
    assert schema_ok == model_ok
