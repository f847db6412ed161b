"""Coalescing across gateway processes on one PostgreSQL database: requests of one key sent at
once to two processes join one run (the join is made in the store, under an advisory lock on
the key and a row lock on the run), which runs once; other keys get runs of their own."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.fakes.model_server import ModelServer
from tests.multi.test_workers import AUTH, all_runs, config, with_fake_model
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually


def coalescing(models: ModelServer) -> dict[str, Any]:
    cfg = with_fake_model(config(), models)
    cfg["hooks"]["mappings"] = [
        {
            "id": "prs",
            "match": {"path": "github"},
            "action": "agent",
            "messageTemplate": "PR {{ number }} event {{ n }}",
            "sessionMode": "per-request",
            "model": "fake/m",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "coalesce": {"key": "{{ number }}", "window": "6s", "maxWait": "2m"},
        }
    ]
    return cfg


def send(gw: GatewayProcess, number: int, n: int) -> dict[str, Any]:
    r = httpx.post(
        f"{gw.url}/hooks/github", json={"number": number, "n": n}, headers=AUTH, timeout=30
    )
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["coalesced"] is True, body
    return dict(body)


def test_two_processes_receiving_one_key_join_one_run(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as models:
        cfg = coalescing(models)
        gws = [
            start_gateway(cfg, name=f"gw{i}", extra_args=["--store", postgres_url])
            for i in range(2)
        ]
        # 24 requests of two keys, 8 at a time, spread over both processes
        jobs = [(gws[n % 2], 1 + (n // 2) % 2, n) for n in range(24)]
        try:
            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(lambda job: (job[1], send(*job)), jobs))
        except AssertionError:
            for gw in gws:
                gw.stop()
                print(gw.stderr())
            raise
        by_key: dict[int, set[str]] = {}
        for number, answer in answers:
            by_key.setdefault(number, set()).add(answer["runId"])
        assert {k: len(v) for k, v in by_key.items()} == {1: 1, 2: 1}
        runs = eventually(
            lambda: (
                (rs := all_runs(gws[0]))
                and all(r["state"] in ("succeeded", "failed") for r in rs)
                and rs
            ),
            timeout=60,
            what="the coalesced runs to end",
        )
        assert sorted(r["runId"] for r in runs) == sorted(i for v in by_key.values() for i in v)
        assert all(r["state"] == "succeeded" and r["attempts"] == 1 for r in runs)
        assert len(models.spans) == 2
        logged = [
            i["runIds"]
            for i in gws[1].admin("/api/requests", limit=500)["items"]
            if i["path"] == "/hooks/github"
        ]
        assert len(logged) == 24
