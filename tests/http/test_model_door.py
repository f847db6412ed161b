"""A `model` no configured provider can serve is refused at the door, never a run that fails
later: `400 model_not_available`, naming the field, and nothing stored."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess


@pytest.fixture(scope="module")
def gw(start_module_gateway: Callable[..., GatewayProcess]) -> GatewayProcess:
    config = {
        "hooks": {
            "enabled": True,
            "token": HOOK_TOKEN,
            "mappings": [
                {
                    "id": "pick",
                    "match": {"path": "pick"},
                    "messageTemplate": "{{text}}",
                    "model": "{{model}}",
                }
            ],
        },
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "models": {"providers": {"local": {"api": "openai", "baseUrl": "http://127.0.0.1:9/v1"}}},
    }
    return start_module_gateway(config, name="model-door")


def test_a_model_of_an_unconfigured_provider_is_refused_at_the_door(gw: GatewayProcess) -> None:
    r = gw.hook("agent", {"message": "m", "model": "mistral/large", "sessionKey": "hook:door"})
    assert r.status_code == 400
    body = r.json()
    assert (body["ok"], body["code"], body["field"]) == (False, "model_not_available", "model")
    assert "'mistral'" in body["error"] and "local" in body["error"]
    runs = gw.admin("/api/runs")["items"]
    assert [x for x in runs if x["sessionKey"] == "hook:door"] == []


def test_a_mapped_hook_rendering_an_unavailable_model_is_refused_with_its_rule(
    gw: GatewayProcess,
) -> None:
    r = gw.hook("pick", {"text": "t", "model": "nobody/x"})
    assert r.status_code == 400
    assert (r.json()["code"], r.json()["rule"]) == ("model_not_available", "pick")


@pytest.mark.parametrize("model", ["local/llama3.2", "echo/echo"])
def test_models_of_configured_providers_and_echo_are_accepted(
    gw: GatewayProcess, model: str
) -> None:
    r = gw.hook("agent", {"message": "m", "model": model, "deliver": False})
    assert r.status_code == 202, r.text
    run = gw.admin(f"/api/runs/{r.json()['runId']}")["run"]
    assert run["model"] == model
