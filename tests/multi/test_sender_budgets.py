"""A budget by sender is counted once per sender across gateway processes on one PostgreSQL
database, and across a restart: a sender's run made by one process counts against that sender
in the other, the sender is held once (one pause row) for both while the other sender's runs
go on, and an operator's release of that sender through either process lets both go on."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.fakes.model_server import ModelServer
from tests.multi.test_budgets import tokens
from tests.runtime.test_budgets import LONG, pauses
from tests.runtime.test_runtime_http import run_state
from tests.runtime.test_sender_budgets import release, sender_config, signed
from tests.support.gateway import GatewayProcess


def test_two_processes_count_each_sender_once_and_hold_it_once(
    start_gateway: Callable[..., GatewayProcess], postgres_url: str
) -> None:
    with ModelServer() as server:
        server.reply(LONG, times=20)
        cfg = sender_config(server, tokens=1500, per="1h")
        one = start_gateway(cfg, name="gw0", extra_args=["--store", postgres_url])
        two = start_gateway(cfg, name="gw1", extra_args=["--store", postgres_url])
        # sender 0: about 1010 tokens through each process, 1500 reached only by both
        a0 = signed(one, 0, 0)
        first = run_state(one, a0, "succeeded", "failed", timeout=30)
        second = run_state(two, signed(two, 0, 1), "succeeded", "failed", timeout=30)
        assert first["state"] == second["state"] == "succeeded"
        spent = tokens(first) + tokens(second)
        held = [signed(two, 0, 2), signed(one, 0, 3)]
        for run_id in held:
            run_state(one, run_id, "held", timeout=30)
        [pause] = pauses(one)
        assert pauses(two) == [pause]
        assert (pause["kind"], pause["name"]) == ("mapping-sender", "shared/github#0")
        m = re.match(r"budget: (\d+) tokens", pause["reason"])
        assert m is not None and int(m.group(1)) == spent, pause["reason"]
        # sender 1 has its own allowance, in either process
        other = run_state(one, signed(two, 1, 0), "succeeded", "failed", timeout=30)
        assert other["state"] == "succeeded" and other["sender"] == "github#1"
        # a restart forgets nothing: the sender stays held, its new run is held too
        two = two.restart()
        later = signed(two, 0, 4)
        run_state(two, later, "held", timeout=30)
        assert len([q for q in server.requests if "alert" in str(q.body)]) == 3
        # released through one process, the other's runs of that sender go too
        r = release(two, "github#0")
        assert r.status_code == 200, r.text
        assert r.json()["released"] == 3
        for run_id in [*held, later]:
            assert run_state(one, run_id, "succeeded", "failed", timeout=30)["state"] == "succeeded"
        assert pauses(one) == []
