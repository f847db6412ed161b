"""Fallback chains and breakers through the real server, against fake providers that speak the
OpenAI and Anthropic protocols: a chain moves on exactly when the model is unavailable (429,
5xx, 529 overloaded, quota, connection refused, a timeout) and never for the caller's fault
(400, 401, 403); every attempt is on the run; a model's breaker opens, skips it, and lets one
call try it again once its cool-down is over."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.model_server import Action, Fail, ModelServer, Raw, Reply, Slow
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

BACKUP = "bk/gpt-backup"


@pytest.fixture
def backup() -> Iterator[ModelServer]:
    with ModelServer(default_text="from the backup") as server:
        yield server


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(primary: ModelServer, backup: ModelServer, **extra: Any) -> dict[str, Any]:
    def provider(api: str, server: ModelServer | None, **more: Any) -> dict[str, Any]:
        if server is None:
            base = f"http://127.0.0.1:{closed_port()}/v1"
            key = "sk-none"
        else:
            base = server.openai_base_url if api == "openai" else server.anthropic_base_url
            key = server.api_key
        return {"api": api, "baseUrl": base, "apiKey": key, "maxRetries": 2, **more}

    agents = extra.pop("agents", {})
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **extra.pop("hooks", {})},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}, **agents}},
        "models": {
            "providers": {
                "po": provider("openai", primary, timeoutSeconds=1),
                "pa": provider("anthropic", primary),
                "down": provider("openai", None),
                "bk": provider("openai", backup),
            },
            **extra,
        },
    }


def run_of(gw: GatewayProcess, payload: dict[str, Any]) -> dict[str, Any]:
    # no heartbeat after the run: it would call the agent's models too
    r = gw.hook("agent", {"wakeMode": "next-heartbeat", **payload})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    return eventually(
        lambda: (
            (run := gw.admin(f"/api/runs/{run_id}")["run"])["state"]
            in ("succeeded", "failed", "timed_out")
            and run
        ),
        what=f"run {run_id} to end",
        timeout=30,
    )


UNAVAILABLE: list[tuple[str, Action | None, str]] = [
    ("po/gpt-main", Fail(429), "rate_limited"),
    ("po/gpt-main", Fail(500), "server_error"),
    ("po/gpt-main", Fail(503), "overloaded"),
    (
        "po/gpt-main",
        Fail(429, code="insufficient_quota", message="You exceeded your quota."),
        "quota",
    ),
    ("pa/claude-main", Fail(529), "overloaded"),
    ("pa/claude-main", Fail(429), "rate_limited"),
    ("pa/claude-main", Fail(500), "server_error"),
    ("down/gpt-main", None, "connection"),
    ("po/gpt-main", Slow(5, then=Reply("too late")), "timeout"),
]


@pytest.mark.parametrize(("first", "action", "error_class"), UNAVAILABLE, ids=lambda v: str(v))
def test_an_unavailable_model_falls_back_to_the_next(
    start_gateway,
    model_server: ModelServer,
    backup: ModelServer,
    first: str,
    action: Action | None,
    error_class: str,
) -> None:
    gw = start_gateway(config(model_server, backup))
    if action is not None:
        model_server.enqueue(action)
    run = run_of(gw, {"message": "hello", "model": [first, BACKUP]})
    assert run["state"] == "succeeded", run
    assert run["reply"] == "from the backup"
    assert run["modelUsed"] == BACKUP and run["model"] == first and run["fallbacks"] == [BACKUP]
    failed, answered = run["modelCalls"]
    assert (failed["model"], failed["outcome"], failed["errorClass"]) == (
        first,
        "error",
        error_class,
    )
    assert (answered["model"], answered["outcome"], answered["seq"]) == (BACKUP, "ok", 2)
    # a model that is not the chain's last is tried once: no retries before the fallback
    assert len(model_server.requests) == (0 if action is None else 1)
    assert len(backup.requests) == 1


OPENAI_REFUSAL = json.dumps(
    {
        "id": "chatcmpl-refused",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-main",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
)
ANTHROPIC_REFUSAL = json.dumps(
    {
        "id": "msg_refused",
        "type": "message",
        "role": "assistant",
        "model": "claude-main",
        "content": [],
        "stop_reason": "refusal",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 0},
    }
)

CALLERS_FAULT: list[tuple[str, Action, str]] = [
    ("po/gpt-main", Raw(200, OPENAI_REFUSAL), "refusal"),
    ("pa/claude-main", Raw(200, ANTHROPIC_REFUSAL), "refusal"),
    ("po/gpt-main", Fail(404), "not_found"),
    ("po/gpt-main", Fail(400), "bad_request"),
    ("po/gpt-main", Fail(401), "auth"),
    ("po/gpt-main", Fail(403), "forbidden"),
    ("pa/claude-main", Fail(400), "bad_request"),
    ("pa/claude-main", Fail(401), "auth"),
    ("pa/claude-main", Fail(403), "forbidden"),
]


@pytest.mark.parametrize(("first", "action", "error_class"), CALLERS_FAULT, ids=lambda v: str(v))
def test_the_callers_fault_does_not_fall_back(
    start_gateway,
    model_server: ModelServer,
    backup: ModelServer,
    first: str,
    action: Action,
    error_class: str,
) -> None:
    gw = start_gateway(config(model_server, backup))
    model_server.enqueue(action)
    run = run_of(gw, {"message": "hello", "model": [first, BACKUP]})
    assert run["state"] == "failed"
    [call] = run["modelCalls"]
    assert (call["model"], call["errorClass"]) == (first, error_class)
    assert backup.requests == []


def test_when_every_model_fails_the_error_names_each(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    gw = start_gateway(config(model_server, backup))
    model_server.enqueue(Fail(529))
    backup.enqueue(Fail(500), Fail(500), Fail(500))  # the last model keeps its retries
    run = run_of(gw, {"message": "hello", "model": "pa/claude-main", "fallbacks": [BACKUP]})
    assert run["state"] == "failed"
    assert "pa/claude-main" in run["error"] and BACKUP in run["error"]
    assert [c["errorClass"] for c in run["modelCalls"]] == ["overloaded", "server_error"]
    assert len(backup.requests) == 3  # 1 + maxRetries 2


def test_a_requested_chain_is_checked_against_the_allowlist(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    gw = start_gateway(
        config(model_server, backup, agents={"model": "po/gpt-main", "models": ["po/gpt-main"]})
    )
    r = gw.hook("agent", {"message": "hi", "model": ["po/gpt-main", "bk/not-allowed"]})
    assert r.status_code == 400
    assert r.json()["code"] == "model_not_allowed" and r.json()["field"] == "model[1]"
    r = gw.hook("agent", {"message": "hi", "fallbacks": "bk/gpt-backup"})
    assert r.status_code == 400 and r.json()["field"] == "fallbacks"


def test_an_agents_chain_and_a_mappings_fallbacks_apply(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    mapping = {
        "match": {"path": "alerts"},
        "action": "agent",
        "messageTemplate": "alert {{ payload.id }}",
        "model": "pa/claude-main",
        "fallbacks": [BACKUP],
    }
    gw = start_gateway(
        config(
            model_server,
            backup,
            agents={"model": ["po/gpt-main", BACKUP]},
            hooks={"mappings": [mapping]},
        )
    )
    model_server.enqueue(Fail(503), Fail(529))
    run = run_of(gw, {"message": "hello"})
    assert run["modelUsed"] == BACKUP and [c["model"] for c in run["modelCalls"]] == [
        "po/gpt-main",
        BACKUP,
    ]
    r = gw.hook("alerts", {"id": 7})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    mapped = eventually(
        lambda: (x := gw.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and x
    )
    assert mapped["model"] == "pa/claude-main" and mapped["fallbacks"] == [BACKUP]
    assert [c["errorClass"] for c in mapped["modelCalls"]] == ["overloaded", None]


def console(gw: GatewayProcess, path: str) -> str:
    assert gw.client is not None
    r = gw.client.get(path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200, r.text
    return r.text


def with_breaker(
    start_gateway: Any, primary: ModelServer, backup: ModelServer, *, failures: int, cooldown: str
) -> GatewayProcess:
    """A gateway whose agent's chain is `po/gpt-main -> backup`, with this breaker."""
    return start_gateway(
        config(
            primary,
            backup,
            agents={"model": ["po/gpt-main", BACKUP]},
            breaker={"failures": failures, "window": "60s", "cooldown": cooldown},
        )
    )


def breakers(gw: GatewayProcess) -> dict[str, dict[str, Any]]:
    return {b["model"]: b for b in gw.admin("/api/breakers")["items"]}


def test_the_breaker_opens_skips_the_model_and_half_opens_after_the_cooldown(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    gw = with_breaker(start_gateway, model_server, backup, failures=2, cooldown="3s")
    model_server.enqueue(Fail(429), Fail(500))
    for _ in range(2):
        run = run_of(gw, {"message": "hello"})
        assert run["modelUsed"] == BACKUP
    assert breakers(gw)["po/gpt-main"]["state"] == "open"
    assert breakers(gw)["po/gpt-main"]["failures"] == 2
    assert breakers(gw)["po/gpt-main"]["lastErrorClass"] == "server_error"
    # open: the model is skipped, not called, and the skip is on the run
    run = run_of(gw, {"message": "hello"})
    assert run["modelUsed"] == BACKUP
    skipped, answered = run["modelCalls"]
    assert (skipped["outcome"], skipped["errorClass"]) == ("skipped", "breaker_open")
    assert (answered["model"], answered["outcome"]) == (BACKUP, "ok")
    assert len(model_server.requests) == 2 and run["usage"]["calls"] == 1
    # after the cool-down: one call tries it (half-open); its success closes the breaker
    eventually(lambda: breakers(gw)["po/gpt-main"]["state"] == "half_open", timeout=10)
    run = run_of(gw, {"message": "hello"})
    assert run["modelUsed"] == "po/gpt-main"
    assert len(model_server.requests) == 3
    assert breakers(gw) == {}


def test_a_failed_half_open_try_opens_the_breaker_again(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    gw = with_breaker(start_gateway, model_server, backup, failures=1, cooldown="2s")
    model_server.enqueue(Fail(500), Fail(503))
    run_of(gw, {"message": "hello"})
    first = breakers(gw)["po/gpt-main"]
    assert first["state"] == "open"
    eventually(lambda: breakers(gw)["po/gpt-main"]["state"] == "half_open", timeout=10)
    run = run_of(gw, {"message": "hello"})
    assert [c["outcome"] for c in run["modelCalls"]] == ["error", "ok"]
    again = breakers(gw)["po/gpt-main"]
    assert again["state"] == "open" and again["openUntil"] > first["openUntil"]
    assert again["failures"] == 2
    # the console: the breaker on the overview, every attempt on the run's page
    overview = console(gw, "/ui/")
    assert "Model breakers" in overview and "<code>po/gpt-main</code>" in overview
    page = console(gw, f"/ui/runs/{run['runId']}")
    assert "Model calls" in page and "overloaded (503)" in page and "2 call(s)" in page


def test_the_last_model_of_a_chain_is_tried_even_with_its_breaker_open(
    start_gateway, model_server: ModelServer, backup: ModelServer
) -> None:
    gw = start_gateway(
        config(
            model_server,
            backup,
            agents={"model": "po/gpt-main"},
            breaker={"failures": 1, "window": "60s", "cooldown": "60s"},
        )
    )
    model_server.enqueue(Fail(503), Fail(503), Fail(503))
    assert run_of(gw, {"message": "hello"})["state"] == "failed"
    assert breakers(gw)["po/gpt-main"]["state"] == "open"
    run = run_of(gw, {"message": "hello"})
    assert run["state"] == "succeeded" and run["modelUsed"] == "po/gpt-main"
    assert [c["outcome"] for c in run["modelCalls"]] == ["ok"]
    assert len(model_server.requests) == 4  # 1 + maxRetries 2, then the one that answered
    assert breakers(gw) == {}


def test_every_error_type_of_the_anthropic_api_has_an_error_class() -> None:
    """The classes are mapped from the API's own description of its errors (`error.type`)."""
    from hookwise.server.runtime.providers.anthropic import ERROR_CLASSES as ANTHROPIC
    from hookwise.server.runtime.providers.base import ERROR_CLASSES, UNAVAILABLE
    from tests.fakes.specs import SPEC_DIR

    spec = json.loads((SPEC_DIR / "anthropic.json").read_text())
    types = spec["error_schema"]["properties"]["error"]["properties"]["type"]["enum"]
    assert set(ANTHROPIC) == set(types)
    assert set(ANTHROPIC.values()) <= set(ERROR_CLASSES)
    moves_on = {t for t, c in ANTHROPIC.items() if c in UNAVAILABLE}
    assert moves_on == {
        "rate_limit_error",
        "overloaded_error",
        "api_error",
        "timeout_error",
        "billing_error",
    }
