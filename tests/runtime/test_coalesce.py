"""Coalescing per key through the real server (SQLite) and a fake model: requests of a mapping
with the same rendered key within the window become one run, started when the window closes
(bounded by maxWait), each request answered at once with that run's id and `coalesced: true`,
and stored with a request-log line naming it; a restart inside the window loses none of them.
(Several processes on PostgreSQL: tests/multi/test_coalesce.py.)"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from tests.fakes.model_server import ModelServer
from tests.runtime.test_runtime_http import config, run_state
from tests.support.gateway import GatewayProcess


def coalescing(model_server: ModelServer, **coalesce: Any) -> dict[str, Any]:
    cfg = config(model_server, model="fake/m")
    cfg["hooks"]["mappings"] = [
        {
            "id": "prs",
            "match": {"path": "github"},
            "action": "agent",
            "messageTemplate": "PR {{ repo }}#{{ number }} event {{ n }}",
            "sessionMode": "per-request",
            "deliver": False,
            "wakeMode": "next-heartbeat",
            "coalesce": {"key": "{{ repo }}#{{ number }}", **coalesce},
        }
    ]
    return cfg


def send(gw: GatewayProcess, n: int, number: int = 7, repo: str = "acme/api") -> dict[str, Any]:
    r = gw.hook("github", {"repo": repo, "number": number, "n": n})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["coalesced"] is True, body
    return dict(body)


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def user_messages(model_server: ModelServer) -> list[str]:
    out = []
    for _, _, body in model_server.spans:
        users = [m["content"] for m in body.get("messages", []) if m.get("role") == "user"]
        out.append(str(users[-1]))
    return out


def logged_runs(gw: GatewayProcess) -> list[list[str]]:
    items = gw.admin("/api/requests", limit=500)["items"]
    return [i["runIds"] for i in items if i["path"] == "/hooks/github"]


def test_ten_requests_in_a_window_make_one_run_with_the_latest(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(coalescing(model_server, window="4s", maxWait="2m"))
    answers = [send(gw, n) for n in range(10)]
    run_id = answers[0]["runId"]
    assert {a["runId"] for a in answers} == {run_id}
    assert {a["sessionKey"] for a in answers} == {answers[0]["sessionKey"]}
    # the window is open: nothing started yet
    assert gw.admin(f"/api/runs/{run_id}")["run"]["state"] == "queued"
    run = run_state(gw, run_id, "succeeded", "failed", timeout=40)
    assert run["state"] == "succeeded"
    assert run["message"] == "PR acme/api#7 event 9"
    assert len(model_server.spans) == 1
    assert "PR acme/api#7 event 9" in user_messages(model_server)[0]
    assert logged_runs(gw) == [[run_id]] * 10
    assert len(gw.admin("/api/runs", limit=500)["items"]) == 1


def test_keep_all_gives_the_model_a_digest_of_every_payload(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(coalescing(model_server, window="4s", maxWait="2m", keep="all"))
    answers = [send(gw, n) for n in range(10)]
    run_id = answers[0]["runId"]
    assert {a["runId"] for a in answers} == {run_id}
    run = run_state(gw, run_id, "succeeded", "failed", timeout=40)
    assert run["message"].startswith("10 events were coalesced into this run, oldest first:")
    positions = [run["message"].index(f"PR acme/api#7 event {n}\n") for n in range(9)]
    assert positions == sorted(positions)
    assert run["message"].endswith("--- event 10 of 10 ---\nPR acme/api#7 event 9")
    assert len(model_server.spans) == 1
    assert "event 10 of 10" in user_messages(model_server)[0]


def test_different_keys_make_different_runs(start_gateway, model_server: ModelServer) -> None:
    gw = start_gateway(coalescing(model_server, window="3s", maxWait="2m"))
    answers = [send(gw, n, number=1 + n % 2) for n in range(6)]
    odd = {a["runId"] for a in answers[0::2]}
    even = {a["runId"] for a in answers[1::2]}
    assert len(odd) == 1 and len(even) == 1 and odd != even
    for run_id, last in (
        (odd.pop(), "PR acme/api#1 event 4"),
        (even.pop(), "PR acme/api#2 event 5"),
    ):
        run = run_state(gw, run_id, "succeeded", "failed", timeout=40)
        assert run["message"] == last
    assert len(model_server.spans) == 2


def test_max_wait_bounds_a_steady_stream(start_gateway, model_server: ModelServer) -> None:
    """A request every 0.3 s keeps a 2 s window open for ever: maxWait (3 s) closes it."""
    gw = start_gateway(coalescing(model_server, window="2s", maxWait="3s"))
    answers = []
    for n in range(40):
        answers.append(send(gw, n))
        time.sleep(0.3)
    runs = list(dict.fromkeys(a["runId"] for a in answers))
    assert len(runs) >= 2, "a steady stream never closed its window"
    for run_id in runs:
        run = run_state(gw, run_id, "succeeded", "failed", timeout=40)
        assert run["state"] == "succeeded"
        # never claimed while its window was open (the window's 2 s at the least)
        waited = at(run["startedAt"]) - at(run["createdAt"])
        assert waited >= 2.0, (run_id, waited)
    # every request is in exactly one run
    logged = logged_runs(gw)
    assert len(logged) == 40 and all(len(ids) == 1 and ids[0] in runs for ids in logged)
    assert len(model_server.spans) == len(runs)


def test_a_restart_inside_the_window_loses_nothing_and_runs_once(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(coalescing(model_server, window="20s", maxWait="2m"))
    before = [send(gw, n) for n in range(5)]
    gw.restart()
    after = [send(gw, n) for n in range(5, 10)]
    run_id = before[0]["runId"]
    assert {a["runId"] for a in before + after} == {run_id}
    run = run_state(gw, run_id, "succeeded", "failed", timeout=60)
    assert run["state"] == "succeeded" and run["attempts"] == 1
    assert run["message"] == "PR acme/api#7 event 9"
    assert len(model_server.spans) == 1
    assert logged_runs(gw) == [[run_id]] * 10


def test_a_hostile_key_is_bounded_and_still_coalesces(
    start_gateway, model_server: ModelServer
) -> None:
    """Keys chosen by the payload: 50,000 characters, control characters, a NUL."""
    gw = start_gateway(coalescing(model_server, window="3s", maxWait="2m"))
    long_repo, odd_repo = "r" * 50_000, "a\x00b\x1b[2J\nc"
    long = [send(gw, n, repo=long_repo) for n in range(3)]
    odd = [send(gw, n, repo=odd_repo) for n in range(3)]
    assert len({a["runId"] for a in long}) == 1 and len({a["runId"] for a in odd}) == 1
    assert long[0]["runId"] != odd[0]["runId"]
    for run_id in (long[0]["runId"], odd[0]["runId"]):
        run = run_state(gw, run_id, "succeeded", "failed", timeout=40)
        assert run["message"].endswith("event 2")
