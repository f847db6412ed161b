"""Several gateway processes on one store (`--workers N`, SQLite or PostgreSQL)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from typing import Any

import httpx
import pytest

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

AUTH = {"Authorization": f"Bearer {HOOK_TOKEN}"}


def config(**defaults: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, "authThrottle": {"maxFailures": 4}},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0, "coalesceMs": 100}, **defaults}},
    }


def with_fake_model(cfg: dict[str, Any], models: Any) -> dict[str, Any]:
    """`cfg` with the provider `fake` on a fake model server (no retries); heartbeats stay on
    the echo model."""
    cfg["models"] = {
        "providers": {
            "fake": {
                "api": "openai",
                "baseUrl": models.openai_base_url,
                "apiKey": models.api_key,
                "maxRetries": 0,
            }
        }
    }
    return cfg


def all_runs(gw: GatewayProcess) -> list[dict]:
    out, cursor = [], None
    while True:
        page = gw.admin("/api/runs", limit=500, **({"cursor": cursor} if cursor else {}))
        out += page["items"]
        cursor = page["nextCursor"]
        if not cursor:
            return out


def all_events(gw: GatewayProcess) -> list[dict]:
    out, cursor = [], None
    while True:
        page = gw.admin("/api/events", limit=500, **({"cursor": cursor} if cursor else {}))
        out += page["items"]
        cursor = page["nextCursor"]
        if not cursor:
            return out


def post_many(url: str, n: int, threads: int = 8, **payload: Any) -> list[str]:
    """POST n agent requests from `threads` clients (new connections spread over the workers)."""
    ids: list[str] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        for i in range(k, n, threads):
            with httpx.Client(base_url=url, timeout=30) as c:  # a new connection each time
                body = {
                    "message": f"job {i}",
                    "deliver": False,
                    "wakeMode": "next-heartbeat",
                    **payload,
                }
                r = c.post("/hooks/agent", json=body, headers=AUTH)
                assert r.status_code == 202, r.text
                with lock:
                    ids.append(r.json()["runId"])

    ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return ids


def worker_pids(gw: GatewayProcess) -> set[int]:
    return {int(p) for p in re.findall(r"Started server process \[(\d+)\]", gw.stderr())}


def leader_pids(gw: GatewayProcess) -> list[int]:
    return [int(p) for p in re.findall(r"process (\d+) now leads the heartbeat", gw.stderr())]


@pytest.mark.parametrize("workers", [2, 3])
def test_a_thousand_runs_spread_over_workers_are_each_executed_exactly_once(
    start_gateway, backend, workers
) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", str(workers)])
    ids = post_many(gw.url, 1000)
    assert len(set(ids)) == 1000
    runs = eventually(
        lambda: (
            (rs := all_runs(gw))
            and all(r["state"] == "succeeded" for r in rs)
            and len(rs) == 1000
            and rs
        ),
        timeout=120,
        interval=0.5,  # each look reads 1,000 runs: looking often slowed the runs it waits for
        what="all 1,000 runs to succeed",
    )
    assert {r["runId"] for r in runs} == set(ids)
    assert all(r["attempts"] == 1 for r in runs)
    summaries = [e["source"] for e in all_events(gw) if e["source"].startswith("run:")]
    assert sorted(summaries) == sorted(f"run:{i}" for i in ids)  # one summary per run, no more


def test_an_idempotency_key_sent_to_every_worker_creates_one_run(start_gateway, backend) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", "2"])
    answers: list[str] = []
    lock = threading.Lock()

    def send() -> None:
        with httpx.Client(base_url=gw.url, timeout=30) as c:
            r = c.post(
                "/hooks/agent",
                json={"message": "once", "deliver": False},
                headers={**AUTH, "Idempotency-Key": "shared-key-1"},
            )
            assert r.status_code == 202, r.text
            with lock:
                answers.append(r.json()["runId"])

    ts = [threading.Thread(target=send) for _ in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(set(answers)) == 1
    assert [r["runId"] for r in all_runs(gw)] == answers[:1]


def test_one_process_leads_the_heartbeat(start_gateway, backend) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", "2"])
    eventually(lambda: leader_pids(gw), what="a heartbeat leader")
    time.sleep(0.5)
    for i in range(3):
        before = len(gw.admin("/api/heartbeats")["items"])
        with httpx.Client(base_url=gw.url, timeout=10) as c:  # reaches either worker
            assert c.post("/hooks/wake", json={"text": f"w{i}"}, headers=AUTH).status_code == 200
        eventually(lambda b=before: len(gw.admin("/api/heartbeats")["items"]) > b, timeout=10)
    time.sleep(0.5)
    beats = gw.admin("/api/heartbeats")["items"]
    assert sum(b["events"] for b in beats) == 3
    assert len(set(leader_pids(gw))) == 1


def test_leadership_moves_when_the_leader_dies(start_gateway, backend) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", "2"])
    [first] = eventually(lambda: leader_pids(gw), what="a heartbeat leader")
    os.kill(first, signal.SIGKILL)
    leaders = eventually(
        lambda: (ls := leader_pids(gw)) and len(ls) >= 2 and ls, timeout=20, what="a new leader"
    )
    assert leaders[-1] != first
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        assert c.post("/hooks/wake", json={"text": "after"}, headers=AUTH).status_code == 200
    eventually(
        lambda: any(e["text"] == "after" and e["consumedAt"] for e in all_events(gw)),
        timeout=15,
        what="the new leader's heartbeat",
    )


def test_a_killed_worker_is_restarted_and_its_runs_are_taken_over(start_gateway, backend) -> None:
    from tests.fakes.model_server import ModelServer

    with ModelServer() as models:
        cfg = with_fake_model(config(leaseGraceSeconds=1, maxAttempts=3), models)
        gw = start_gateway(cfg, extra_args=[*backend, "--workers", "2"])
        models.slow(60, times=1)
        [run_id] = post_many(gw.url, 1, threads=1, timeoutSeconds=3, model="fake/m")
        eventually(lambda: models.requests, what="the run's model call")
        # kill every worker (whichever runs it); the supervisor restarts them, and the run is
        # taken over once its lease (timeout 3 s + grace 1 s) has expired
        for pid in worker_pids(gw):
            os.kill(pid, signal.SIGKILL)
        models.reset()
        models.reply("taken over")
        run = eventually(
            lambda: (r := gw.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and r,
            timeout=30,
            what="the run to be taken over",
        )
        assert run["reply"] == "taken over" and run["attempts"] == 2


def test_the_auth_lockout_is_shared_by_the_workers(start_gateway, backend) -> None:
    gw = start_gateway(config(), extra_args=[*backend, "--workers", "2"])
    statuses = []
    for _ in range(6):
        with httpx.Client(base_url=gw.url, timeout=10) as c:  # new connections: both workers
            statuses.append(
                c.post(
                    "/hooks/wake", json={"text": "x"}, headers={"Authorization": "Bearer nope"}
                ).status_code
            )
    assert statuses[:4] == [401, 401, 401, 401]
    assert statuses[4:] == [429, 429]
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        assert c.post("/hooks/wake", json={"text": "x"}, headers=AUTH).status_code == 200
