"""`wait` with several gateway processes on one PostgreSQL database: the run a request waits for
may be executed by another process, and the waiter still answers with its outcome."""

from __future__ import annotations

from collections.abc import Callable

from tests.fakes.model_server import ModelServer, Reply
from tests.multi.test_workers import config, with_fake_model
from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

ON_FAKE = {"model": "fake/m", "deliver": False, "wakeMode": "next-heartbeat"}


def test_a_run_finished_by_another_process_ends_the_wait(
    postgres_url: str, start_gateway: Callable[..., GatewayProcess]
) -> None:  # the database outlives the gateways (fixtures end in reverse order)
    store = ["--store", postgres_url]
    with ModelServer() as models:
        cfg = with_fake_model(config(maxConcurrentRuns=1), models)
        a = start_gateway(cfg, name="a", extra_args=store)
        # A's only run slot is taken by a slow run before B exists
        models.slow(8.0, then=Reply("slow"))
        slow = a.hook("agent", {"message": "slow", **ON_FAKE})
        assert slow.status_code == 202
        eventually(lambda: models.requests, what="the slow run's model call")
        b = start_gateway(cfg, name="b", extra_args=store)
        models.reply("fast")
        r = a.hook("agent", {"message": "fast", "wait": 30, **ON_FAKE})
        assert r.status_code == 200, r.text
        assert r.json()["reply"] == "fast" and r.json()["state"] == "succeeded"
        # B executed it: A's one slot still holds the slow run
        assert a.admin(f"/api/runs/{slow.json()['runId']}")["run"]["state"] == "running"
        # and B answers A's status URL (the same key in every process)
        assert b.client is not None
        token = {"Authorization": f"Bearer {cfg['hooks']['token']}"}
        again = b.client.get(r.headers["location"], headers=token)
        assert again.status_code == 200 and again.json()["reply"] == "fast"
