"""`wait`: a hook held open until its run ends, through the real server and a slow fake model.

Finished in time: 200 with the outcome. Not finished: 202 with the run's status URL in
`Location`, which the caller polls with the hook token; another caller's run (a run id without
its key, or with another run's key) is refused exactly as a run that does not exist.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.model_server import ModelServer, Reply
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually


def config(model_server: ModelServer, **hooks: Any) -> dict[str, Any]:
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN, **hooks},
        "gateway": {"auth": {"token": ADMIN_TOKEN}, "metrics": {"enabled": True}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "models": {"providers": {"fake": {**model_server.provider(), "maxRetries": 0}}},
    }


def ask(gw: GatewayProcess, message: str, **fields: Any) -> Any:
    """POST /hooks/agent on the fake model (heartbeats stay on the echo model)."""
    params = fields.pop("params", None)
    body = {"message": message, "model": "fake/m", "wakeMode": "next-heartbeat", **fields}
    return gw.hook("agent", body, params=params)


def status(gw: GatewayProcess, location: str, *, token: str | None = HOOK_TOKEN) -> Any:
    assert gw.client is not None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return gw.client.get(location, headers=headers)


def metric(gw: GatewayProcess, name: str) -> str:
    assert gw.client is not None
    text = gw.client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).text
    return "\n".join(line for line in text.splitlines() if line.startswith(name))


def test_a_run_that_ends_in_time_is_answered_with_its_outcome(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server))
    model_server.slow(0.5, then=Reply("the build is green"))
    r = ask(gw, "how is the build?", wait=20, deliver=False)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["ok"] is True and body["state"] == "succeeded"
    assert body["reply"] == "the build is green"
    assert body["model"] == "fake/" + body["model"].split("/", 1)[1]
    assert body["usage"]["inputTokens"] > 0 and body["usage"]["outputTokens"] > 0
    # the run is the stored one, and its status URL says the same
    assert gw.admin(f"/api/runs/{body['runId']}")["run"]["reply"] == "the build is green"
    again = status(gw, r.headers["location"])
    assert again.status_code == 200 and again.json() == body
    assert 'outcome="finished"' in metric(gw, "hookwise_hook_waits_total")


def test_a_run_that_does_not_end_in_time_answers_202_with_a_status_url(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server))
    model_server.slow(3.0, then=Reply("late answer"))
    r = ask(gw, "slow one", wait="1s", deliver=False)
    assert r.status_code == 202, r.text
    run_id = r.json()["runId"]
    location = r.headers["location"]
    assert location.startswith(f"/hooks/runs/{run_id}?key=")
    pending = status(gw, location)
    assert pending.status_code == 202
    assert pending.json() == {"ok": True, "runId": run_id, "state": "running"}
    done = eventually(
        lambda: (s := status(gw, location)).status_code == 200 and s.json(),
        what="the run to end",
    )
    assert done["state"] == "succeeded" and done["reply"] == "late answer"
    assert 'outcome="timeout"' in metric(gw, "hookwise_hook_waits_total")


def test_the_status_url_refuses_other_runs_and_callers_without_the_token(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server))
    model_server.reply("one", times=2)
    mine = ask(gw, "mine", wait=20, deliver=False)
    theirs = ask(gw, "theirs", wait=20, deliver=False)
    assert mine.status_code == theirs.status_code == 200
    my_key = mine.headers["location"].split("?key=", 1)[1]
    their_id = theirs.json()["runId"]
    for url in (
        f"/hooks/runs/{their_id}?key={my_key}",  # my key does not open their run
        f"/hooks/runs/{their_id}",  # nor does knowing the id
        f"/hooks/runs/{their_id}?key=" + "0" * 43,
        "/hooks/runs/no-such-run?key=" + my_key,
    ):
        r = status(gw, url)
        assert r.status_code == 404, url
        assert r.json() == {
            "ok": False,
            "error": "no such run (or not yours to read)",
            "code": "run_not_found",
        }
    # the URL itself still needs the hook token
    assert status(gw, mine.headers["location"], token=None).status_code == 401
    assert status(gw, mine.headers["location"], token="wrong-" + HOOK_TOKEN).status_code == 401


def test_a_mapping_waits_with_respond_wait_bounded_by_max_wait(
    start_gateway, model_server: ModelServer
) -> None:
    mapping = {
        "id": "ask",
        "match": {"path": "ask"},
        "action": "agent",
        "messageTemplate": "{{ question }}",
        "deliver": False,
        "model": "fake/m",
        "wakeMode": "next-heartbeat",
        "respond": {"wait": "10m"},  # more than hooks.maxWait: bounded by it
    }
    gw = start_gateway(config(model_server, mappings=[mapping], maxWait="1s"))
    model_server.slow(3.0, then=Reply("eventually"))
    r = gw.hook("ask", {"question": "anyone?"})
    assert r.status_code == 202 and "location" in r.headers  # held about 1 s, not 10 minutes
    model_server.reply("at once")
    r = gw.hook("ask", {"question": "quick?"})
    assert r.status_code == 200 and r.json()["reply"] == "at once"
    assert r.json()["state"] == "succeeded"


def test_a_fixed_answer_is_not_replaced_by_a_query_wait(
    start_gateway, model_server: ModelServer
) -> None:
    mapping = {
        "id": "fixed",
        "match": {"path": "fixed"},
        "action": "agent",
        "messageTemplate": "{{ q }}",
        "respond": {"status": 200, "body": {"received": True}},
    }
    gw = start_gateway(config(model_server, mappings=[mapping]))
    r = gw.hook("fixed", {"q": "x"}, params={"wait": "5s"})
    assert (r.status_code, r.json()) == (200, {"received": True})
    assert "location" not in r.headers


def test_a_query_wait_and_a_failed_run(start_gateway, model_server: ModelServer) -> None:
    gw = start_gateway(config(model_server))
    model_server.fail(400, message="the model refused")
    r = ask(gw, "boom", deliver=False, params={"wait": ""})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["state"] == "failed" and body["reply"] is None
    assert "the model refused" in body["error"]


@pytest.mark.parametrize("wait", ["soon", -1, True, {"s": 1}])
def test_a_malformed_wait_is_refused_before_anything_is_stored(
    start_gateway, model_server: ModelServer, wait: Any
) -> None:
    gw = start_gateway(config(model_server))
    r = ask(gw, "x", wait=wait)
    assert r.status_code == 400 and r.json()["code"] == "invalid_field"
    assert gw.admin("/api/runs")["items"] == []
    q = gw.hook("agent", {"message": "x"}, params={"wait": "soon"})
    assert q.status_code == 400 and q.json()["code"] == "invalid_field"
    assert gw.admin("/api/runs")["items"] == []


def test_waiting_requests_are_bounded_and_the_rest_answered_at_once(
    start_gateway, model_server: ModelServer
) -> None:
    gw = start_gateway(config(model_server, limits={"maxWaiting": 1}))
    model_server.slow(2.0, times=2, then=Reply("done"))
    import threading

    first: dict[str, Any] = {}

    def hold() -> None:
        first["r"] = ask(gw, "a", wait=20, deliver=False)

    t = threading.Thread(target=hold)
    t.start()
    eventually(lambda: "hookwise_hook_waiting 1.0" in metric(gw, "hookwise_hook_waiting"))
    second = ask(gw, "b", wait=20, deliver=False)
    assert second.status_code == 202 and "location" in second.headers
    t.join(30)
    assert first["r"].status_code == 200
    assert 'outcome="full"' in metric(gw, "hookwise_hook_waits_total")
