"""Separate gateway processes on one database, as on several machines behind a load balancer.

Each gateway is its own `hookwise serve` (own port, own state dir) with `--store` naming one
PostgreSQL database; the test client is the load balancer: it posts round-robin, so every
process accepts a share. On SQLite, separate processes on one file are refused (the processes
of one `--workers N` share it instead: see test_workers.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.model_server import ModelServer
from tests.multi.test_workers import AUTH, all_events, all_runs, config, with_fake_model
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually


@pytest.fixture
def shared_store(postgres_url: str) -> list[str]:
    """`--store` arguments naming one PostgreSQL database for every gateway of the test."""
    return ["--store", postgres_url]


def gateways(
    start_gateway: Callable[..., GatewayProcess], n: int, store: list[str], cfg: dict[str, Any]
) -> list[GatewayProcess]:
    return [start_gateway(cfg, name=f"gw{i}", extra_args=store) for i in range(n)]


def post_round_robin(
    gws: list[GatewayProcess], n: int, threads: int = 8, **payload: Any
) -> list[str]:
    """POST n agent requests, request i to gateway i mod len(gws); the run ids, in order."""
    ids: list[str | None] = [None] * n

    def client(k: int) -> None:
        clients = [httpx.Client(base_url=gw.url, timeout=30) for gw in gws]
        try:
            for i in range(k, n, threads):
                body = {"message": f"job {i}", "deliver": False, "wakeMode": "next-heartbeat"}
                r = clients[i % len(gws)].post(
                    "/hooks/agent", json={**body, **payload}, headers=AUTH
                )
                assert r.status_code == 202, r.text
                ids[i] = r.json()["runId"]
        finally:
            for c in clients:
                c.close()

    ts = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert all(i is not None for i in ids), "a request got no answer"
    return [i for i in ids if i is not None]


@pytest.mark.parametrize("processes", [2, 3])
def test_a_thousand_runs_posted_round_robin_are_each_executed_exactly_once(
    start_gateway, shared_store, processes
) -> None:
    gws = gateways(start_gateway, processes, shared_store, config())
    ids = post_round_robin(gws, 1000)
    assert len(set(ids)) == 1000
    runs = eventually(
        lambda: (
            (rs := all_runs(gws[0]))
            and len(rs) == 1000
            and all(r["state"] == "succeeded" for r in rs)
            and rs
        ),
        timeout=120,
        interval=0.5,  # each look reads 1,000 runs: looking often slowed the runs it waits for
        what="all 1,000 runs to succeed",
    )
    assert {r["runId"] for r in runs} == set(ids)
    assert all(r["attempts"] == 1 for r in runs)  # nobody ran a run twice
    summaries = [e["source"] for e in all_events(gws[-1]) if e["source"].startswith("run:")]
    assert sorted(summaries) == sorted(f"run:{i}" for i in ids)  # one summary per run


def test_a_gateway_killed_mid_run_loses_nothing(start_gateway, shared_store) -> None:
    with ModelServer() as models:
        # two runs at a time per process: four slow runs in flight means each holds two
        cfg = config(leaseGraceSeconds=1, maxAttempts=3, maxConcurrentRuns=2)
        cfg = with_fake_model(cfg, models)
        doomed, survivor = gateways(start_gateway, 2, shared_store, cfg)
        models.slow(60, times=4)
        ids = post_round_robin([doomed, survivor], 4, threads=1, timeoutSeconds=3, model="fake/m")
        eventually(lambda: len(models.requests) == 4, what="four model calls in flight")
        doomed.kill()  # SIGKILL: its two runs stay `running` under its lease
        models.reset()
        models.reply("taken over", times=2)
        runs = eventually(
            lambda: (
                (rs := all_runs(survivor))
                and all(r["state"] in ("succeeded", "timed_out") for r in rs)
                and rs
            ),
            timeout=30,
            what="every run to end",
        )
    assert {r["runId"] for r in runs} == set(ids)
    taken_over = [r for r in runs if r["state"] == "succeeded"]
    own = [r for r in runs if r["state"] == "timed_out"]
    # the killed process's runs: run again by the survivor once their lease (3 s + 1 s) expired
    assert len(taken_over) == 2
    assert all(r["attempts"] == 2 and r["reply"] == "taken over" for r in taken_over)
    # the survivor's own runs: still waiting on the slow model, ended by their 3 s timeout
    assert len(own) == 2 and all(r["attempts"] == 1 for r in own)


def test_a_second_process_on_one_sqlite_file_is_refused(start_gateway, tmp_path: Path) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'one.db'}"]
    first = start_gateway(config(), name="first", extra_args=store)
    with pytest.raises(RuntimeError, match="did not start") as refused:
        start_gateway(config(), name="second", extra_args=store)
    message = str(refused.value)
    assert "another hookwise process is using" in message
    assert "--workers N" in message and "Traceback" not in message
    [run_id] = post_round_robin([first], 1)  # the first one is unharmed
    run = eventually(
        lambda: (r := first.admin(f"/api/runs/{run_id}")["run"])["state"] == "succeeded" and r,
        what="the first gateway's run",
    )
    assert run["attempts"] == 1
