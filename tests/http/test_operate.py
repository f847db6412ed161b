"""Operating the gateway through real HTTP, on both stores: log lines with ids (text and JSON),
`/metrics` (Prometheus text, read with prometheus_client's own parser), `/readyz`, retention."""

from __future__ import annotations

import asyncio
import json
import platform
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hookwise import __version__
from tests.fakes.channel_servers import start as start_channel
from tests.fakes.model_server import ModelServer
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

SECRET = "payload-secret-9f8e7d"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def config(model_server: ModelServer | None = None, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0, "coalesceMs": 50}}},
        **extra,
    }
    if model_server is not None:
        cfg["models"] = {
            "providers": {
                "fake": {
                    "api": "openai",
                    "baseUrl": model_server.openai_base_url,
                    "apiKey": model_server.api_key,
                    "maxRetries": 0,
                }
            }
        }
    return cfg


def json_lines(gw: GatewayProcess) -> list[dict[str, Any]]:
    """Every stderr line, each parsed as JSON (fails on a line that is not one object)."""
    return [json.loads(line) for line in gw.stderr().splitlines() if line.strip()]


def sql(gw: GatewayProcess, store_kind: str, statement: str) -> Any:
    """Run one statement on the gateway's store directly; the first value of its answer."""
    if store_kind == "sqlite":
        conn = sqlite3.connect(gw.state_dir / "hookwise.db", timeout=30)
        try:
            row = conn.execute(statement).fetchone()
            conn.commit()
            return row[0] if row else None
        finally:
            conn.close()
    url = gw.extra_args[gw.extra_args.index("--store") + 1]

    async def run() -> Any:
        conn = await asyncpg.connect(url)
        try:
            return await conn.fetchval(statement)
        finally:
            await conn.close()

    return asyncio.run(run())


def agent(gw: GatewayProcess, **payload: Any) -> str:
    r = gw.hook("agent", {"wakeMode": "next-heartbeat", "deliver": False, **payload})
    assert r.status_code == 202, r.text
    return r.json()["runId"]


def scrape(gw: GatewayProcess, headers: dict[str, str] | None = None) -> dict[tuple, float]:
    """`/metrics` as {(sample name, sorted labels): value}."""
    assert gw.client is not None
    r = gw.client.get("/metrics", headers=ADMIN if headers is None else headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def sample(samples: dict[tuple, float], name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


# logs ----------------------------------------------------------------------------------------


def test_a_failed_run_is_one_json_warning_with_its_ids_and_no_payload(
    start_gateway, model_server
) -> None:
    model_server.fail(500, message="the model is down")
    gw = start_gateway(config(model_server), extra_args=["--log-format", "json"])
    banner = json.loads(gw.ready_line)
    assert banner["level"] == "INFO" and "listening on" in banner["msg"] and banner["ts"]
    run_id = agent(gw, message=f"deploy {SECRET}", model="fake/m", name="ci")
    assert gw.admin(f"/api/runs/{run_id}")
    eventually(
        lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "failed", what="run failed"
    )
    lines = eventually(
        lambda: [x for x in json_lines(gw) if x.get("runId") == run_id], what="the run's line"
    )
    [line] = lines
    assert line["level"] == "WARNING" and line["logger"] == "hookwise.report"
    assert line["state"] == "failed" and line["agent"] == "main"
    assert line["sessionKey"].startswith("hook:") and "the model is down" in line["error"]
    assert line["durationSeconds"] >= 0 and line["ts"].endswith("Z")
    text = gw.stderr()
    assert SECRET not in text and HOOK_TOKEN not in text and model_server.api_key not in text
    # uvicorn's own lines are JSON objects too
    assert any(x["logger"].startswith("uvicorn") for x in json_lines(gw))


def test_a_succeeded_run_is_one_info_line_in_the_text_format(start_gateway) -> None:
    gw = start_gateway(config())
    run_id = agent(gw, message="hello")
    line = eventually(
        lambda: [x for x in gw.stderr().splitlines() if f"run {run_id}" in x],
        what="the run's line",
    )[0]
    assert " INFO hookwise.report: " in line and "succeeded in" in line
    assert "agent main" in line and "session hook:" in line
    assert not gw.ready_line.startswith("{")


def test_logging_format_in_the_config_makes_every_line_json(start_gateway) -> None:
    gw = start_gateway(config(logging={"format": "json"}))
    assert json.loads(gw.ready_line)["logger"] == "hookwise"
    gw.hook("wake", {"text": "x"}, token="wrong-token-0123456789")
    eventually(
        lambda: any("authentication failed" in x["msg"] for x in json_lines(gw)),
        what="the auth failure line",
    )
    assert "wrong-token" not in gw.stderr()


def test_a_delivery_that_fails_for_good_is_one_warning(start_gateway) -> None:
    tg = start_channel("telegram")
    try:
        tg.missing.add("-100404")
        cfg = config(channels={"telegram": tg.config()})
        gw = start_gateway(cfg, extra_args=["--log-format", "json"])
        r = gw.hook("agent", {"message": "x", "channel": "telegram", "to": "-100404"})
        run_id = r.json()["runId"]
        line = eventually(  # the run's delivery (the heartbeat after it has one of its own)
            lambda: [x for x in json_lines(gw) if "deliveryId" in x and x.get("runId") == run_id],
            what="delivery line",
        )[0]
        assert line["level"] == "WARNING" and line["runId"] == run_id
        assert line["channel"] == "telegram" and line["error"]
        [d] = gw.admin(f"/api/runs/{run_id}")["run"]["deliveries"]
        assert d["deliveryId"] == line["deliveryId"] and d["state"] == "failed"
        samples = scrape(gw)
        assert sample(samples, "hookwise_deliveries_total", channel="telegram", state="failed")
    finally:
        tg.stop()


def test_a_failed_heartbeat_is_one_warning_and_counted(start_gateway, model_server) -> None:
    model_server.fail(503, message="overloaded")
    cfg = config(model_server)
    cfg["agents"]["defaults"]["model"] = "fake/m"
    gw = start_gateway(cfg, extra_args=["--log-format", "json"])
    gw.hook("wake", {"text": "ping"})
    line = eventually(
        lambda: [x for x in json_lines(gw) if "heartbeatId" in x], what="heartbeat line"
    )[0]
    assert line["level"] == "WARNING" and line["state"] == "failed"
    assert "overloaded" in line["error"]
    samples = scrape(gw)
    assert sample(samples, "hookwise_heartbeats_total", agent="main", outcome="failed") == 1
    assert sample(samples, "hookwise_provider_requests_total", provider="fake", status="503") == 1


# metrics -------------------------------------------------------------------------------------


def test_metrics_need_the_gateway_token(start_gateway) -> None:
    gw = start_gateway(config())
    assert gw.client is not None
    r = gw.client.get("/metrics")
    assert r.status_code == 401 and r.json()["code"] == "unauthorized"
    r = gw.client.get("/metrics", headers={"Authorization": f"Bearer {HOOK_TOKEN}"})
    assert r.status_code == 401
    samples = scrape(gw)
    assert sample(samples, "hookwise_auth_failures_total") == 2
    assert sample(samples, "hookwise_http_requests_total", route="/metrics", status="401") == 2


def test_public_metrics_and_disabled_metrics(start_gateway) -> None:
    gw = start_gateway(
        config(gateway={"auth": {"token": ADMIN_TOKEN}, "metrics": {"public": True}})
    )
    assert "hookwise_queue_depth" in str(scrape(gw, headers={}))
    off = start_gateway(
        config(gateway={"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": False}}),
        name="off",
    )
    assert off.client is not None
    r = off.client.get("/metrics", headers=ADMIN)
    assert r.status_code == 404 and r.json()["ok"] is False


def test_metrics_count_requests_runs_and_providers(start_gateway, model_server) -> None:
    model_server.reply("done", times=2)
    gw = start_gateway(config(model_server))
    for _ in range(3):
        assert gw.hook("wake", {"text": "x", "mode": "next-heartbeat"}).status_code == 200
    assert gw.hook("wake", {"text": "x"}, token="not-the-token-0123456789").status_code == 401
    assert gw.hook("nope", {}).status_code == 404
    runs = [agent(gw, message="m", model="fake/m") for _ in range(2)]
    for run_id in runs:
        eventually(lambda r=run_id: gw.admin(f"/api/runs/{r}")["run"]["state"] == "succeeded")
    s = scrape(gw)
    assert sample(s, "hookwise_http_requests_total", route="/hooks/wake", status="200") == 3
    assert sample(s, "hookwise_http_requests_total", route="/hooks/wake", status="401") == 1
    assert sample(s, "hookwise_http_requests_total", route="/hooks/{name}", status="404") == 1
    assert sample(s, "hookwise_http_requests_total", route="/hooks/agent", status="202") == 2
    assert sample(s, "hookwise_http_request_duration_seconds_count", route="/hooks/wake") == 4
    assert sample(s, "hookwise_auth_failures_total") == 1
    assert sample(s, "hookwise_runs_total", agent="main", state="succeeded") == 2
    assert sample(s, "hookwise_run_duration_seconds_count", agent="main", state="succeeded") == 2
    assert sample(s, "hookwise_provider_requests_total", provider="fake", status="200") == 2
    assert sample(s, "hookwise_queue_depth", queue="runs") == 0
    assert sample(s, "hookwise_queue_depth", queue="deliveries") == 0
    assert sample(s, "hookwise_queue_oldest_seconds", queue="runs") == 0


def test_metrics_carry_build_info_and_process_series_under_one_charset(start_gateway) -> None:
    gw = start_gateway(config())
    assert gw.client is not None
    r = gw.client.get("/metrics", headers=ADMIN)
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    s = scrape(gw)
    info = gw.client.get("/readyz").json()
    assert sample(s, "hookwise_build_info", version=info["version"], python=info["python"]) == 1
    assert sample(s, "process_resident_memory_bytes") > 1_000_000  # type: ignore[operator]
    assert sample(s, "process_open_fds") > 0  # type: ignore[operator]
    assert 0 < time.time() - sample(s, "process_start_time_seconds") < 600  # type: ignore[operator]


def test_queue_gauges_show_waiting_runs(start_gateway, model_server) -> None:
    model_server.slow(3, times=1)
    cfg = config(model_server)
    cfg["agents"]["defaults"]["maxConcurrentRuns"] = 1
    gw = start_gateway(cfg)
    for _ in range(3):
        agent(gw, message="m", model="fake/m")

    def waiting() -> dict | None:
        s = scrape(gw)
        depth = sample(s, "hookwise_queue_depth", queue="runs")
        oldest = sample(s, "hookwise_queue_oldest_seconds", queue="runs")
        return s if depth == 2 and oldest and oldest > 0.3 else None

    s = eventually(waiting, what="two queued runs, the oldest waiting")
    queued = [r for r in gw.admin("/api/runs")["items"] if r["state"] == "queued"]
    assert len(queued) == 2 and sample(s, "hookwise_queue_depth", queue="runs") == len(queued)


# health --------------------------------------------------------------------------------------


def test_readyz_answers_ready_with_the_version(start_gateway) -> None:
    gw = start_gateway(config())
    assert gw.client is not None
    r = gw.client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == {"ok": True, "version": __version__, "python": platform.python_version()}
    assert gw.client.get("/healthz").json() == {"ok": True}


def test_readyz_is_503_with_the_reason_when_the_store_does_not_answer(
    start_gateway, store_kind
) -> None:
    gw = start_gateway(config())
    assert gw.client is not None
    sql(gw, store_kind, "ALTER TABLE runs RENAME TO runs_gone")
    r = gw.client.get("/readyz")
    body = r.json()
    assert r.status_code == 503 and body["ok"] is False and body["code"] == "not_ready"
    assert body["version"] == __version__
    assert any("does not answer a read" in reason for reason in body["reasons"])
    assert gw.client.get("/healthz").status_code == 200  # liveness is not readiness


# retention -----------------------------------------------------------------------------------

FAST = {
    "runs": "1s",
    "events": "1s",
    "deliveries": "1s",
    "heartbeats": "1s",
    "transcripts": "1s",
    "requests": "1s",
    "interval": "1s",
}


def test_retention_prunes_finished_records_and_keeps_waiting_work(
    start_gateway, model_server
) -> None:
    model_server.slow(30, times=1)
    cfg = config(model_server, retention=FAST)
    cfg["agents"]["defaults"]["maxConcurrentRuns"] = 1
    # The waiting event belongs to an agent whose every heartbeat fails, so that no heartbeat
    # consumes it (one may legitimately run at any time: on PostgreSQL, a process that takes the
    # heartbeat leadership again asks for one).
    cfg["models"]["providers"]["broken"] = {"api": "command", "command": ["sh", "-c", "exit 3"]}
    cfg["agents"]["list"] = [
        {"id": "main", "default": True},
        {"id": "stuck", "model": "broken/x", "heartbeat": {"every": 0, "coalesceMs": 50}},
    ]
    gw = start_gateway(cfg)
    running = agent(gw, message="slow", model="fake/m")
    eventually(lambda: gw.admin(f"/api/runs/{running}")["run"]["state"] == "running")
    queued = agent(gw, message="waits", model="fake/m")
    consumed = gw.hook("wake", {"text": "now"}).json()["eventId"]
    eventually(
        lambda: any(e["eventId"] == consumed and e["consumedAt"] for e in events(gw)),
        what="the heartbeat to consume the event",
    )
    pending = gw.hook("wake", {"text": "later", "agentId": "stuck"}).json()["eventId"]
    eventually(
        lambda: any(h["state"] == "failed" for h in gw.admin("/api/heartbeats")["items"]),
        what="the stuck agent's heartbeat to fail",
    )

    def pruned() -> bool:
        ids = {e["eventId"] for e in events(gw)}
        return consumed not in ids and not gw.admin("/api/heartbeats")["items"]

    eventually(pruned, timeout=20, what="finished records to be pruned")
    time.sleep(2.5)  # two more rounds, with the waiting work older than its retention
    assert gw.admin(f"/api/runs/{running}")["run"]["state"] == "running"
    assert gw.admin(f"/api/runs/{queued}")["run"]["state"] == "queued"
    assert pending in {e["eventId"] for e in events(gw)}  # never consumed: never pruned
    assert "retention: pruned" in gw.stderr()


def test_retention_prunes_finished_runs_and_their_transcripts(start_gateway, store_kind) -> None:
    gw = start_gateway(config(retention=FAST))
    run_id = agent(gw, message="hello")
    eventually(lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded")
    assert gw.client is not None
    own = f"SELECT count(*) FROM turns WHERE run_id = '{run_id}'"  # a uuid: safe to inline
    assert sql(gw, store_kind, own) == 2

    def gone() -> bool:
        r = gw.client.get(f"/api/runs/{run_id}", headers=ADMIN)  # type: ignore[union-attr]
        return r.status_code == 404

    eventually(gone, timeout=20, what="the finished run to be pruned")
    assert gw.admin("/api/runs")["items"] == []
    eventually(lambda: sql(gw, store_kind, own) == 0, what="the run's turns gone")
    eventually(lambda: gw.admin("/api/requests")["items"] == [], what="the request log pruned")


def events(gw: GatewayProcess) -> list[dict]:
    return gw.admin("/api/events", limit=500)["items"]


def test_transform_calls_are_timed_by_runtime(start_gateway, tmp_path) -> None:
    tdir = tmp_path / "gw" / "hooks" / "transforms"
    tdir.mkdir(parents=True)
    (tdir / "shout.js").write_text(
        "export default function ({ payload }) { return { text: payload.t.toUpperCase() }; }\n"
    )
    (tdir / "shout.py").write_text("def transform(ctx):\n    return {'text': ctx.payload['t']}\n")
    mappings = [
        {
            "id": f"{kind}-shout",
            "match": {"path": kind},
            "action": "wake",
            "textTemplate": "x",
            "wakeMode": "next-heartbeat",
            "transform": {"module": f"shout.{kind}"},
        }
        for kind in ("js", "py")
    ]
    cfg = config()
    cfg["hooks"] |= {"transformsDir": str(tdir), "mappings": mappings}
    gw = start_gateway(cfg, workdir=tmp_path / "gw")
    for kind in ("js", "js", "py"):
        r = gw.hook(kind, {"t": "hi"})
        assert r.status_code == 200, r.text
    s = scrape(gw)
    assert sample(s, "hookwise_transform_duration_seconds_count", runtime="js") == 2
    assert sample(s, "hookwise_transform_duration_seconds_count", runtime="python") == 1
    assert sample(s, "hookwise_http_requests_total", route="/hooks/{name}", status="200") == 3
