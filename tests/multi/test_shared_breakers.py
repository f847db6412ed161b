"""A model's breaker is shared by gateway processes on one PostgreSQL database: failures seen
by one process open it for all, and each process's model calls are on the record for every
other's admin API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.fakes.model_server import Fail, ModelServer
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually


def config(primary: ModelServer, backup: ModelServer) -> dict[str, Any]:
    def provider(server: ModelServer) -> dict[str, Any]:
        return {
            "api": "openai",
            "baseUrl": server.openai_base_url,
            "apiKey": server.api_key,
            "maxRetries": 0,
        }

    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}, "model": ["po/main", "bk/backup"]}},
        "models": {
            "providers": {"po": provider(primary), "bk": provider(backup)},
            "breaker": {"failures": 2, "window": "60s", "cooldown": "5m"},
        },
    }


def run_calls(server: ModelServer) -> list[object]:
    """The requests of runs (a leader's heartbeat at start-up calls the model too)."""
    return [q for q in server.requests if "hello" in str(q.body)]


def run_on(gw: GatewayProcess) -> dict[str, Any]:
    r = gw.hook("agent", {"message": "hello", "deliver": False, "wakeMode": "next-heartbeat"})
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    return eventually(
        lambda: (x := gw.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and x,
        what=f"run {run_id}",
        timeout=30,
    )


def test_failures_in_one_process_open_the_breaker_for_another(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as primary, ModelServer(default_text="backup") as backup:
        cfg = config(primary, backup)
        one = start_gateway(cfg, name="gw0", extra_args=["--store", postgres_url])
        two = start_gateway(cfg, name="gw1", extra_args=["--store", postgres_url])
        primary.enqueue(Fail(503), Fail(429))
        # either process may claim a run: what counts is that the primary failed twice
        runs = [run_on(one), run_on(one)]
        assert [r["modelUsed"] for r in runs] == ["bk/backup"] * 2
        assert len(run_calls(primary)) == 2
        [breaker] = two.admin("/api/breakers")["items"]
        assert breaker["model"] == "po/main" and breaker["state"] == "open"
        assert breaker["failures"] == 2
        run = run_on(two)
        assert run["modelUsed"] == "bk/backup"
        assert run["modelCalls"][0]["outcome"] == "skipped"
        assert len(run_calls(primary)) == 2  # neither process called it again
        listed = {r["runId"]: r for r in one.admin("/api/runs")["items"]}
        assert listed[run["runId"]]["usage"]["calls"] == 1
