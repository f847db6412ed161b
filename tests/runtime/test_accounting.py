"""Usage and cost of every model call, through the real server: one record per call with the
tokens the provider reported (cache reads and writes included), the cost from `models.prices`,
sums on the run and on heartbeats, in the admin API and the metrics."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from tests.fakes.model_server import ModelServer, Reply
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

PRICE = {"input": 2.0, "output": 8.0, "cacheRead": 0.5, "cacheWrite": 2.5, "per": "1M"}


def config(server: ModelServer, api: str = "openai", **models: Any) -> dict[str, Any]:
    base = server.openai_base_url if api == "openai" else server.anthropic_base_url
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": True}},
        "agents": {"defaults": {"model": "fake/gpt-test", "heartbeat": {"every": 0}}},
        "models": {
            "providers": {
                "fake": {
                    "api": api,
                    "baseUrl": base,
                    "apiKey": server.api_key,
                    "maxRetries": 0,
                }
            },
            **models,
        },
    }


def finished(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    return eventually(
        lambda: (
            (r := gw.admin(f"/api/runs/{run_id}")["run"])["state"]
            in ("succeeded", "failed", "timed_out")
            and r
        ),
        what=f"run {run_id} to end",
    )


def usage_of(server: ModelServer) -> dict[str, Any]:
    """What the fake reported for its last answer (its usage object, as sent)."""
    return server.requests[-1].body


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_each_call_is_recorded_with_its_tokens_cache_and_cost(
    start_gateway, model_server: ModelServer, api: str
) -> None:
    gw = start_gateway(config(model_server, api, prices={"fake/gpt-test": PRICE}))
    model_server.enqueue(Reply("four words of reply", cache_read=1000, cache_write=200))
    run_id = gw.hook("agent", {"message": "hello there"}).json()["runId"]
    run = finished(gw, run_id)
    assert run["state"] == "succeeded", run
    [call] = run["modelCalls"]
    assert call["model"] == "fake/gpt-test" and call["outcome"] == "ok"
    assert call["errorClass"] is None and call["attempt"] == 1 and call["seq"] == 1
    assert call["outputTokens"] == 4
    assert call["cacheReadTokens"] == 1000 and call["cacheWriteTokens"] == 200
    # OpenAI counts cached tokens inside prompt_tokens; hookwise records the uncached apart
    tokens_in = call["inputTokens"]
    assert tokens_in > 0
    expected = (tokens_in * 2.0 + 4 * 8.0 + 1000 * 0.5 + 200 * 2.5) / 1_000_000
    assert call["cost"] == pytest.approx(expected)
    usage = run["usage"]
    assert usage == {
        "inputTokens": tokens_in,
        "outputTokens": 4,
        "cacheReadTokens": 1000,
        "cacheWriteTokens": 200,
        "cost": pytest.approx(expected),
        "calls": 1,
    }
    listed = next(r for r in gw.admin("/api/runs")["items"] if r["runId"] == run_id)
    assert listed["usage"] == usage


def test_a_model_without_a_price_has_cost_null(start_gateway, model_server: ModelServer) -> None:
    gw = start_gateway(config(model_server, prices={"fake/other": PRICE}))
    run_id = gw.hook("agent", {"message": "hello"}).json()["runId"]
    run = finished(gw, run_id)
    assert run["usage"]["outputTokens"] > 0
    assert run["usage"]["cost"] is None and run["modelCalls"][0]["cost"] is None


def test_a_failed_call_is_recorded_with_its_error_class(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server, prices={"fake/gpt-test": PRICE}))
    model_server.fail(400)
    run_id = gw.hook("agent", {"message": "hello"}).json()["runId"]
    run = finished(gw, run_id)
    assert run["state"] == "failed"
    [call] = run["modelCalls"]
    assert call["outcome"] == "error" and call["errorClass"] == "bad_request"
    assert call["status"] == 400 and "Invalid request" in call["error"]
    assert call["inputTokens"] is None and call["cost"] is None
    assert run["usage"]["calls"] == 1 and run["usage"]["cost"] is None


def test_heartbeats_carry_their_usage(start_gateway, model_server: ModelServer) -> None:
    gw = start_gateway(config(model_server, prices={"fake/gpt-test": PRICE}))
    model_server.enqueue(Reply("noted, nothing to do"))
    gw.hook("wake", {"text": "disk almost full"})
    beat = eventually(lambda: gw.admin("/api/heartbeats")["items"], what="a heartbeat")[0]
    assert beat["state"] == "succeeded"
    [call] = beat["modelCalls"]
    assert call["attempt"] == 0 and call["outcome"] == "ok"
    assert beat["usage"]["outputTokens"] == 4 and beat["usage"]["calls"] == 1
    assert beat["usage"]["cost"] == pytest.approx(call["cost"]) and call["cost"] > 0


def samples(gw: GatewayProcess, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """The scrape's samples of `name`, by their label sets."""
    from prometheus_client.parser import text_string_to_metric_families

    assert gw.client is not None
    body = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    return {
        frozenset(s.labels.items()): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == name
    }


def test_metrics_count_calls_tokens_and_cost_by_agent_mapping_and_model(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server, prices={"fake/gpt-test": PRICE}))
    model_server.enqueue(Reply("one two three"))
    finished(gw, gw.hook("agent", {"message": "hello"}).json()["runId"])
    labels = {("agent", "main"), ("mapping", "none"), ("model", "fake/gpt-test")}
    calls = samples(gw, "hookwise_model_calls_total")
    assert calls[frozenset(labels | {("outcome", "ok")})] == 1
    tokens = samples(gw, "hookwise_model_tokens_total")
    assert tokens[frozenset(labels | {("kind", "output")})] == 3
    cost = samples(gw, "hookwise_model_cost_total")
    assert cost[frozenset(labels)] > 0


def test_records_held_at_a_paused_writer_are_written_by_the_next_one(
    tmp_path, model_server: ModelServer
) -> None:
    """A record the store could not take (its writer process paused, then killed) is tried
    again until the next writer stores it: what a run spent is never lost with the writer."""
    import os
    import signal

    from tests.fakes.model_server import Slow
    from tests.runtime.test_runs_outlive_the_writer import _all_final, _post_runs, _writer

    n = 4
    model_server.enqueue(*[Slow(1.0, Reply("done"))] * n)
    cfg = config(model_server, prices={"fake/m": PRICE})
    gw = GatewayProcess(cfg, tmp_path / "gw").start()
    writer = 0
    try:
        ids = _post_runs(gw, n)
        eventually(lambda: len(model_server.requests) == n, what="every run calling the model")
        writer = _writer(gw)
        os.kill(writer, signal.SIGSTOP)
        eventually(lambda: model_server.in_flight == 0, what="the model calls to end")
        time.sleep(1.0)
        os.kill(writer, signal.SIGKILL)
        runs = _all_final(gw, ids)
        assert {r["state"] for r in runs} == {"succeeded"}
        for run_id in ids:
            run = eventually(
                lambda i=run_id: (r := gw.admin(f"/api/runs/{i}")["run"])["modelCalls"] and r,
                what=f"the record of {run_id}",
            )
            [call] = run["modelCalls"]
            assert call["outcome"] == "ok" and call["cost"] > 0
    finally:
        if writer:
            with contextlib.suppress(ProcessLookupError):
                os.kill(writer, signal.SIGKILL)
        gw.stop()
    assert "could not be recorded" in gw.stderr()
    assert "given up" not in gw.stderr()
