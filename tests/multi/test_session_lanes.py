"""Session lanes across gateway processes on one PostgreSQL database: the lane is a claim in the
store, not a lock in a process, so runs of one session stay serial and in order whichever
process accepts or executes them, and a run held by a process killed with SIGKILL keeps its
session waiting until its lease expires and another process takes it over."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from tests.fakes.model_server import ModelServer
from tests.multi.test_workers import AUTH, all_runs, config, with_fake_model
from tests.support.gateway import GatewayProcess
from tests.support.lanes import assert_serial_and_seen, model_calls, tag
from tests.support.wait import eventually


def post(gw: GatewayProcess, session: str, n: int, **extra: Any) -> str:
    body = {
        "message": f"question {tag(session, n)}",
        "sessionKey": f"hook:{session}",
        "deliver": False,
        "wakeMode": "next-heartbeat",
        "model": "fake/m",
        **extra,
    }
    r = httpx.post(f"{gw.url}/hooks/agent", json=body, headers=AUTH, timeout=30)
    assert r.status_code == 202, r.text
    return str(r.json()["runId"])


def ended(gw: GatewayProcess, count: int, timeout: float) -> list[dict]:
    return eventually(
        lambda: (
            (rs := all_runs(gw))
            and len(rs) == count
            and all(r["state"] not in ("queued", "running") for r in rs)
            and rs
        ),
        timeout=timeout,
        what=f"{count} runs to end",
    )


def test_two_processes_keep_each_session_serial_and_in_order(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as models:
        cfg = with_fake_model(config(maxConcurrentRuns=3), models)
        gws = [
            start_gateway(cfg, name=f"gw{i}", extra_args=["--store", postgres_url])
            for i in range(2)
        ]
        models.slow(0.7, times=12)
        # each session's runs are accepted alternately by the two processes
        for n in range(4):
            for k, session in enumerate(("a", "b", "c")):
                post(gws[(n + k) % 2], session, n)
        runs = ended(gws[0], 12, timeout=60)
        calls = model_calls(models.spans)
    assert all(r["state"] == "succeeded" and r["attempts"] == 1 for r in runs)
    assert_serial_and_seen(calls, {"a": 4, "b": 4, "c": 4})
    assert models.peak_in_flight >= 2  # sessions ran beside each other


def test_a_session_held_by_a_killed_process_resumes_in_another_in_order(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as models:
        cfg = with_fake_model(config(leaseGraceSeconds=1, maxAttempts=3), models)
        store = ["--store", postgres_url]
        doomed = start_gateway(cfg, name="doomed", extra_args=store)
        models.slow(60)
        first = post(doomed, "s", 0, timeoutSeconds=3)
        eventually(lambda: len(models.requests) == 1, what="the first run's model call")
        doomed.kill()  # SIGKILL: the first run stays `running` under its lease (3 s + 1 s)
        # the survivor starts only now: the first run was certainly the doomed process's
        survivor = start_gateway(cfg, name="survivor", extra_args=store)
        rest = [post(survivor, "s", n, timeoutSeconds=3) for n in (1, 2)]
        runs = {r["runId"]: r for r in ended(survivor, 3, timeout=60)}
        calls = model_calls(models.spans)
    assert [runs[i]["state"] for i in [first, *rest]] == ["succeeded"] * 3
    assert runs[first]["attempts"] == 2 and all(runs[i]["attempts"] == 1 for i in rest)
    # the killed call left no turn: the takeover and the runs after it see only their lane
    assert_serial_and_seen([c for c in calls if c.ended - c.began < 30], {"s": 3})
    # nothing of the session ran while the dead process's lease held it
    takeover = next(c for c in calls if c.session == "s" and c.n == 0 and c.ended - c.began < 30)
    assert all(c.began >= takeover.ended for c in calls if c.session == "s" and c.n > 0)
