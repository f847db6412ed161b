"""Session lanes through the real server (SQLite) and a slow fake model: runs of one
`sessionKey` run one at a time, in the order they were accepted, each with the turns of its
predecessors; other sessions run beside them up to `maxConcurrentRuns`, and a session's waiting
runs never hold a slot. (Several processes on PostgreSQL: tests/multi/test_session_lanes.py.)"""

from __future__ import annotations

import itertools
import time

from tests.fakes.model_server import ModelServer
from tests.runtime.test_runtime_http import config, run_state
from tests.support.gateway import GatewayProcess
from tests.support.lanes import assert_serial_and_seen, model_calls, tag


def post(gw: GatewayProcess, session: str, n: int) -> str:
    body = {
        "message": f"question {tag(session, n)}",
        "sessionKey": f"hook:{session}",
        "deliver": False,
        "wakeMode": "next-heartbeat",
    }
    r = gw.hook("agent", body)
    assert r.status_code == 202, r.text
    return str(r.json()["runId"])


def test_runs_of_one_session_are_serial_and_each_sees_its_predecessors(
    start_gateway, model_server: ModelServer
) -> None:
    """The issue's case: three requests of one session 50 ms apart, a model taking 1.5 s."""
    gw = start_gateway(config(model_server, model="fake/m"))
    model_server.slow(1.5, times=3)
    ids = []
    for n in range(3):
        ids.append(post(gw, "thread", n))
        time.sleep(0.05)
    for run_id in ids:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
    assert model_server.peak_in_flight == 1
    assert_serial_and_seen(model_calls(model_server.spans), {"thread": 3})
    started = [gw.admin(f"/api/runs/{i}")["run"]["startedAt"] for i in ids]
    assert started == sorted(started)


def test_three_sessions_run_in_parallel_each_serial(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server, model="fake/m", maxConcurrentRuns=3))
    model_server.slow(1.0, times=9)
    ids = [post(gw, s, n) for n in range(3) for s in ("a", "b", "c")]
    for run_id in ids:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=40)["state"] == "succeeded"
    assert model_server.peak_in_flight == 3
    assert_serial_and_seen(model_calls(model_server.spans), {"a": 3, "b": 3, "c": 3})


def test_a_session_whose_runs_wait_takes_no_slot_from_another(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server, model="fake/m", maxConcurrentRuns=2))
    model_server.slow(1.0, times=5)
    busy = [post(gw, "busy", n) for n in range(4)]
    other = post(gw, "other", 0)
    for run_id in [*busy, other]:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=40)["state"] == "succeeded"
    calls = model_calls(model_server.spans)
    assert_serial_and_seen(calls, {"busy": 4, "other": 1})
    [first_busy] = [c for c in calls if c.session == "busy" and c.n == 0]
    [the_other] = [c for c in calls if c.session == "other"]
    # "other" was accepted after four runs of "busy", yet ran beside the first of them
    assert the_other.began < first_busy.ended


def test_a_mappings_max_concurrent_runs_leaves_the_agents_other_slots_free(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = config(model_server, model="fake/m", maxConcurrentRuns=3)
    cfg["hooks"]["mappings"] = [
        {
            "id": "noisy",
            "match": {"path": "noisy"},
            "action": "agent",
            "messageTemplate": "alert {{ n }} [lane noisy-{{ n }} 0]",
            "sessionMode": "per-request",
            "model": "fake/m",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "maxConcurrentRuns": 1,
        }
    ]
    gw = start_gateway(cfg)
    model_server.slow(0.8, times=6)
    noisy = [gw.hook("noisy", {"n": n}).json()["runId"] for n in range(4)]
    direct = [post(gw, f"direct{n}", 0) for n in range(2)]
    for run_id in [*noisy, *direct]:
        assert run_state(gw, run_id, "succeeded", "failed", timeout=40)["state"] == "succeeded"
    calls = model_calls(model_server.spans)
    mapped = sorted((c for c in calls if c.session.startswith("noisy-")), key=lambda c: c.began)
    assert len(mapped) == 4
    for before, after in itertools.pairwise(mapped):
        assert before.ended <= after.began, "two runs of the capped mapping overlapped"
    others = [c for c in calls if c.session.startswith("direct")]
    # the two direct runs, accepted after the four mapped ones, ran beside the first of them
    assert all(c.began < mapped[0].ended for c in others)
    assert all(gw.admin(f"/api/runs/{i}")["run"]["attempts"] == 1 for i in noisy)
