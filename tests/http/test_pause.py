"""Pause and resume through the real server, on both stores: a paused mapping's requests are
still authenticated, stored and answered, their runs `held` (none started, none timed out),
across a restart; resuming releases them in acceptance order. From the CLI, the admin API and
the configuration (`paused: true`); an agent's pause holds its wakes too. A run in flight when
its agent is paused comes back `held` after a clean stop, and the resume releases it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.cli.support import run as hookwise
from tests.fakes.model_server import ModelServer
from tests.http.test_operate import sample, scrape
from tests.runtime.test_runtime_http import config as runtime_config
from tests.runtime.test_runtime_http import heartbeats, run_state
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def config(*, paused: bool = False) -> dict[str, Any]:
    github: dict[str, Any] = {
        "id": "github",
        "match": {"path": "github"},
        "action": "agent",
        "messageTemplate": "PR {{ number }}",
        "deliver": False,
        "wakeMode": "next-heartbeat",
    }
    if paused:
        github["paused"] = True
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "mappings": [github]},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0, "coalesceMs": 100}}},
    }


def cli(gw: GatewayProcess, *args: str) -> str:
    env = {"HOOKWISE_ADMIN_TOKEN": ADMIN_TOKEN, "HOOKWISE_URL": gw.url}
    done = hookwise(*args, cwd=gw.workdir, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def post_admin(gw: GatewayProcess, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{gw.url}{path}", json=body, headers=ADMIN, timeout=30)


def runs(gw: GatewayProcess) -> list[dict[str, Any]]:
    return gw.admin("/api/runs", limit=500)["items"]


def lane(gw: GatewayProcess, mapping: str | None) -> dict[str, Any]:
    [found] = [x for x in gw.admin("/api/queues")["lanes"] if x["mapping"] == mapping]
    return found


def test_a_paused_mapping_holds_100_runs_across_a_restart_and_resume_runs_them_in_order(
    start_gateway,
) -> None:
    gw = start_gateway(config())
    said = cli(gw, "pause", "mapping", "github", "--reason", "deploy")
    assert "paused mapping github: 0 queued run(s) held" in said
    ids = []
    for n in range(100):
        r = gw.hook("github", {"number": n})
        assert r.status_code == 202, r.text
        ids.append(r.json()["runId"])
    time.sleep(1.0)  # time enough for a lane to claim, were it allowed to
    held = runs(gw)
    assert len(held) == 100 and {r["state"] for r in held} == {"held"}
    assert all(r["startedAt"] is None and r["attempts"] == 0 for r in held)

    gw.restart()  # the pause is the store's: it outlives the process
    time.sleep(1.0)
    assert {r["state"] for r in runs(gw)} == {"held"}
    github = lane(gw, "github")
    assert github["oldestSeconds"] > 0
    assert {**github, "oldestSeconds": None} == {
        "agent": "main",
        "mapping": "github",
        "queued": 0,
        "held": 100,
        "oldestSeconds": None,
        "paused": True,
    }
    [pause] = gw.admin("/api/queues")["pauses"]
    assert (pause["kind"], pause["name"], pause["reason"]) == ("mapping", "github", "deploy")
    assert pause["by"].endswith("@127.0.0.1")  # the CLI's user, from this machine
    gauges = scrape(gw)
    assert sample(gauges, "hookwise_queue_depth", agent="main", lane="github") == 100
    assert sample(gauges, "hookwise_queue_depth", agent="main", lane="direct") == 0
    assert sample(gauges, "hookwise_queue_oldest_seconds", agent="main", lane="github") > 0
    assert sample(gauges, "hookwise_queue_depth", queue="runs") == 0  # held is not queued
    table = cli(gw, "queues")
    assert "github" in table and "100" in table and "deploy" in table

    answer = post_admin(gw, "/api/resume", {"kind": "mapping", "name": "github"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"ok": True, "kind": "mapping", "resumed": ["github"], "released": 100}
    done = eventually(
        lambda: (rs := runs(gw)) and all(r["state"] == "succeeded" for r in rs) and rs,
        timeout=60,
        what="the 100 released runs",
    )
    by_id = {r["runId"]: r for r in done}
    started = [by_id[i]["startedAt"] for i in ids]
    assert started == sorted(started)  # released in acceptance order
    assert [by_id[i]["reply"] for i in ids] == [f"echo: PR {n}" for n in range(100)]
    assert lane(gw, "github")["paused"] is False


def test_paused_true_in_the_configuration_pauses_at_start_and_lifts_when_it_goes(
    start_gateway,
) -> None:
    gw = start_gateway(config(paused=True))
    run_id = gw.hook("github", {"number": 1}).json()["runId"]
    [pause] = gw.admin("/api/queues")["pauses"]
    assert (pause["name"], pause["by"]) == ("github", "config")
    time.sleep(0.5)
    assert gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "held"
    gw.config = config()
    gw.restart()
    eventually(
        lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded",
        what="the run released once the configuration no longer pauses it",
    )
    assert gw.admin("/api/queues")["pauses"] == []


def test_pausing_what_does_not_exist_or_resuming_what_is_not_paused_is_refused(
    start_gateway,
) -> None:
    gw = start_gateway(config())
    r = post_admin(gw, "/api/pause", {"kind": "mapping", "name": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "mapping_not_found"
    r = post_admin(gw, "/api/pause", {"kind": "agent", "name": "nope"})
    assert r.status_code == 404 and r.json()["code"] == "agent_not_found"
    r = post_admin(gw, "/api/resume", {"kind": "mapping", "name": "github"})
    assert r.status_code == 409 and r.json()["code"] == "not_paused"
    r = post_admin(gw, "/api/pause", {"kind": "queue", "name": "github"})
    assert r.status_code == 400 and r.json()["ok"] is False
    r = httpx.post(f"{gw.url}/api/pause", json={"kind": "agent", "name": "main"}, timeout=10)
    assert r.status_code == 401
    r = post_admin(gw, "/api/pause", {"kind": "path", "name": "/github"})
    assert r.status_code == 200 and r.json()["paused"] == ["github"]


def test_a_paused_agent_holds_its_runs_and_its_wakes(start_gateway) -> None:
    gw = start_gateway(config())
    assert post_admin(gw, "/api/pause", {"kind": "agent", "name": "main"}).status_code == 200
    run_id = gw.hook("agent", {"message": "later", "deliver": False}).json()["runId"]
    gw.hook("wake", {"text": "disk almost full"})
    time.sleep(1.0)
    assert gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "held"
    assert all(hb["events"] == 0 for hb in heartbeats(gw))  # the wake is not consumed
    assert lane(gw, None)["held"] == 1 and lane(gw, None)["paused"] is True
    said = cli(gw, "resume", "agent", "main")
    assert "resumed agent main: 1 run(s) back in the queue" in said
    eventually(
        lambda: gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "succeeded",
        what="the released run",
    )
    eventually(
        lambda: any(hb["events"] >= 1 for hb in heartbeats(gw)), what="the held wake consumed"
    )


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def test_a_run_in_flight_when_its_agent_is_paused_comes_back_held_after_a_clean_stop(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(runtime_config(model_server, model="fake/m"))
    model_server.slow(30)
    payload = {"message": "patience", "deliver": False, "wakeMode": "next-heartbeat"}
    run_id = gw.hook("agent", payload).json()["runId"]
    eventually(lambda: model_server.requests, what="the run's model call")
    paused = post_admin(gw, "/api/pause", {"kind": "agent", "name": "main"})
    assert paused.status_code == 200 and paused.json()["held"] == 0  # it runs: not held yet
    model_server.reset()
    gw.restart()  # the clean stop puts the run in flight back in the queue, its agent paused
    time.sleep(1.0)  # time enough for a lane to claim it, were it allowed to
    run = gw.admin(f"/api/runs/{run_id}")["run"]
    assert (run["state"], run["attempts"], run["startedAt"]) == ("held", 0, None)
    assert not _asked(model_server, "patience")
    assert lane(gw, None)["held"] == 1 and lane(gw, None)["queued"] == 0
    resumed = post_admin(gw, "/api/resume", {"kind": "agent", "name": "main"})
    assert resumed.status_code == 200 and resumed.json()["released"] == 1
    run = run_state(gw, run_id, "succeeded", "failed")
    assert (run["state"], run["attempts"]) == ("succeeded", 1)
    assert _asked(model_server, "patience")


def _asked(model_server: ModelServer, text: str) -> bool:
    """Whether a model call (a run's, not a heartbeat's) carried `text`."""
    return any(text in json.dumps(r.body) for r in model_server.requests)
