"""A run is never orphaned: agent runs whose SQLite writer process is killed (while they call
the model, or while their final writes wait at a paused writer) all reach a final state within
`FINAL_BOUND` seconds, without a gateway restart, and the model is called once per run (the
gateway keeps each run's result and writes it again once a new writer runs; see docs/faults.md).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.model_server import ModelServer, Reply, Slow
from tests.support.gateway import GatewayProcess, base_config
from tests.support.processes import running, writer_of
from tests.support.wait import eventually

#: the bound docs/faults.md promises for a run whose writer died, from the writer's return
FINAL_BOUND = 30.0
FINAL = ("succeeded", "failed", "timed_out")


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _config(model_server: ModelServer, concurrency: int) -> dict[str, Any]:
    return base_config() | {
        "agents": {"defaults": {"heartbeat": {"every": 0}, "maxConcurrentRuns": concurrency}},
        "models": {"providers": {"fake": model_server.provider()}},
    }


def _writer(gw: GatewayProcess) -> int:
    assert gw.proc is not None
    return writer_of(gw.proc.pid)


def _post_runs(gw: GatewayProcess, n: int) -> list[str]:
    ids = []
    for i in range(n):
        r = gw.hook(
            "agent",
            {"message": f"job-{i}", "model": "fake/m", "deliver": False, "name": f"j{i}"},
        )
        assert r.status_code == 202, r.text
        ids.append(r.json()["runId"])
    return ids


def _all_final(gw: GatewayProcess, ids: list[str]) -> list[dict[str, Any]]:
    def probe() -> list[dict[str, Any]] | None:
        runs = [gw.admin(f"/api/runs/{i}")["run"] for i in ids]
        return runs if all(r["state"] in FINAL for r in runs) else None

    return eventually(probe, timeout=FINAL_BOUND, interval=0.2, what="every run to be final")


def _calls_per_job(model_server: ModelServer) -> Counter[str]:
    seen: Counter[str] = Counter()
    for request in list(model_server.requests):
        last = request.body["messages"][-1]["content"]
        seen.update(w for w in last.replace("\n", " ").split() if w.startswith("job-"))
    return seen


def _check_once_each(model_server: ModelServer, n: int) -> None:
    calls = _calls_per_job(model_server)
    assert calls == Counter({f"job-{i}": 1 for i in range(n)}), calls


def test_runs_finish_once_when_the_writer_is_killed_during_them(
    tmp_path: Path, model_server: ModelServer
) -> None:
    n = 24
    model_server.enqueue(*[_slow(0.5)] * n)
    gw = GatewayProcess(_config(model_server, 4), tmp_path / "gw").start()
    try:
        ids = _post_runs(gw, n)
        writer = 0
        for under_way in (5, 11, 17):  # three kills, each while runs call the model and end
            eventually(lambda k=under_way: len(model_server.requests) >= k, what="runs under way")
            time.sleep(0.5)  # about when the first of them answer and write
            writer = eventually(lambda w=writer: (p := _writer(gw)) != w and p, what="a writer")
            os.kill(writer, signal.SIGKILL)
        runs = _all_final(gw, ids)
        assert {r["state"] for r in runs} == {"succeeded"}, runs
        _check_once_each(model_server, n)
        assert _writer(gw) != writer
        assert gw.client is not None
        assert gw.client.get("/readyz").status_code == 200
    finally:
        gw.stop()
    assert "exited with signal SIGKILL" in gw.stderr()


def test_final_writes_held_at_a_paused_writer_are_written_by_the_next_one(
    tmp_path: Path, model_server: ModelServer
) -> None:
    n = 6
    model_server.enqueue(*[_slow(1.0)] * n)
    gw = GatewayProcess(_config(model_server, 8), tmp_path / "gw").start()
    writer = 0
    try:
        ids = _post_runs(gw, n)
        eventually(lambda: len(model_server.requests) == n, what="every run calling the model")
        writer = _writer(gw)
        os.kill(writer, signal.SIGSTOP)
        # every model call answers; each run's final write now waits at the paused writer
        eventually(lambda: model_server.in_flight == 0, what="the model calls to end")
        time.sleep(1.0)
        runs = [gw.admin(f"/api/runs/{i}")["run"] for i in ids]  # reads do not need the writer
        assert {r["state"] for r in runs} == {"running"}
        os.kill(writer, signal.SIGKILL)
        runs = _all_final(gw, ids)
        assert {r["state"] for r in runs} == {"succeeded"}, runs
        assert all(r["reply"] for r in runs)
        _check_once_each(model_server, n)
    finally:
        if writer and running(writer):
            os.kill(writer, signal.SIGKILL)
        gw.stop()
    log = gw.stderr()
    # what waited at the paused writer: each run's final write, or before it the records of its
    # model calls (committed before a run's ending is visible: budgets count them)
    assert "its final write failed" in log or "recorded on try" in log
    assert "could not be finished" not in log


def _slow(seconds: float) -> Slow:
    return Slow(seconds, Reply("done"))
