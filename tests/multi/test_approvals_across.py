"""Approvals with several gateway processes on one PostgreSQL database: a run parked by one
process is decided through another, after the first was killed, and resumes there; two
processes deciding the same approval at once count one decision."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.support.approvals import ADMIN, config
from tests.support.approvals import ended as _ended
from tests.support.approvals import parked as _parked
from tests.support.approvals import start_run as _start
from tests.support.gateway import GatewayProcess


def test_a_run_parked_in_a_killed_process_is_decided_and_resumed_in_another(
    postgres_url: str, start_gateway: Callable[..., GatewayProcess]
) -> None:
    store = ["--store", postgres_url]
    a = start_gateway(config(), name="a", extra_args=store)
    b = start_gateway(config(), name="b", extra_args=store)
    run_id = _start(a, "ops", 'call t.echo {"text": "across"}\ncall t.count {}')
    [approval] = _parked(a, run_id)["approvals"]
    a.kill()
    assert b.client is not None
    r = b.client.post(f"/api/approvals/{approval['approvalId']}/approve", headers=ADMIN)
    assert r.status_code == 200, r.text
    run = _ended(b, run_id)
    assert run["state"] == "succeeded", run
    assert [c["tool"] for c in run["toolCalls"]] == ["echo", "count"]
    assert run["reply"].startswith("echo: across\n")


def test_two_processes_deciding_at_once_count_one_decision(
    postgres_url: str, start_gateway: Callable[..., GatewayProcess]
) -> None:
    store = ["--store", postgres_url]
    a = start_gateway(config(), name="a", extra_args=store)
    b = start_gateway(config(), name="b", extra_args=store)
    run_id = _start(a, "ops", "call t.count {}")
    [approval] = _parked(a, run_id)["approvals"]
    path = f"/api/approvals/{approval['approvalId']}"

    def decide(args: tuple[GatewayProcess, str]) -> httpx.Response:
        gw, what = args
        assert gw.client is not None
        return gw.client.post(f"{path}/{what}", headers=ADMIN)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(decide, [(a, "approve"), (b, "deny")] * 2))
    assert sorted(r.status_code for r in answers) == [200, 409, 409, 409]
    winner = next(r for r in answers if r.status_code == 200).json()["approval"]["state"]
    run = _ended(b, run_id)
    assert run["approvals"][0]["state"] == winner
    assert len(run["refusedDecisions"]) == 3
    assert [c["tool"] for c in run["toolCalls"]] == (["count"] if winner == "approved" else [])
