"""Senders stay apart (review of budgets by sender, issue 35), on both stores, through the real
server: a request of one sender never joins the coalescing run of another (its spend would be
charged to the other, and a held sender's requests would go on through another's open run); a
budget's senders are its own, not those of a mapping whose id starts with its own and `/`.
(The budgets themselves: tests/runtime/test_sender_budgets.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.model_server import ModelServer
from tests.runtime.test_budgets import LONG, scrape
from tests.runtime.test_sender_budgets import (
    done,
    rule_checked,
    sender_config,
    signature,
    signed,
)
from tests.support.gateway import ADMIN_TOKEN, GatewayProcess


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def store_kind(request: pytest.FixtureRequest) -> Iterator[str]:
    yield request.param


def run_of(gw: GatewayProcess, run_id: str) -> dict[str, Any]:
    return dict(gw.admin(f"/api/runs/{run_id}")["run"])


def test_a_sender_never_joins_another_senders_coalescing_run(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = sender_config(model_server, tokens=500, per="1h")
    # one key for every request: without senders apart, all would fold into one run
    cfg["hooks"]["mappings"][0]["coalesce"] = {"key": "one", "window": "1m", "maxWait": "2m"}
    gw = start_gateway(cfg)
    a1 = signed(gw, 0, 1)
    b1 = signed(gw, 1, 1)
    a2 = signed(gw, 0, 2)
    assert a2 == a1  # the same sender's burst still folds into its run
    assert b1 != a1, "a request of github#1 joined the run of github#0"
    first, other = run_of(gw, a1), run_of(gw, b1)
    assert (first["sender"], other["sender"]) == ("github#0", "github#1")
    assert "alert 1" in other["message"] and "alert 2" in first["message"]


def test_a_budgets_senders_are_its_own_not_those_of_a_mapping_named_under_it(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = sender_config(model_server, tokens=500, per="1h")
    [shared] = cfg["hooks"]["mappings"]
    # a mapping id may hold `/`: `shared/extra`'s senders are not `shared`'s sender `extra/...`
    under = {**shared, "id": "shared/extra", "match": {"path": "extra"}}
    cfg["hooks"]["mappings"] = [shared, under]
    gw = start_gateway(cfg)
    model_server.reply(LONG, times=5)
    assert done(gw, signed(gw, 0, 1, path="extra"))["state"] == "succeeded"
    budgets = {b["name"]: b for b in gw.admin("/api/budgets")["items"]}
    assert [s["sender"] for s in budgets["shared/extra"]["senders"]] == ["github#0"]
    assert budgets["shared"]["senders"] == [], budgets["shared"]
    assert budgets["shared"]["spentTokens"] == 0
    spend = scrape(gw, "hookwise_budget_spend")
    assert spend['{kind="tokens",name="shared",scope="mapping-sender"}'] == 0


def test_an_operators_replay_is_the_sender_replay_wherever_the_signature_is_checked(
    start_gateway, model_server: ModelServer
) -> None:
    cfg = sender_config(model_server, tokens=500, per="1h")
    [shared] = cfg["hooks"]["mappings"]
    cfg["hooks"]["mappings"] = [shared, rule_checked(shared)]  # the rule checks, not the door
    gw = start_gateway(cfg)
    body = json.dumps({"n": 1}).encode()
    originals = [
        gw.hook("checked", content=body, headers=signature(1, body)).json()["runId"],
        signed(gw, 1, 1),
    ]
    assert [run_of(gw, i)["sender"] for i in originals] == ["github#1", "github#1"]
    replayed = []
    for run_id in originals:
        request_id = run_of(gw, run_id)["requestId"]
        assert gw.client is not None
        r = gw.client.post(
            f"/api/requests/{request_id}/replay",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert r.status_code == 200, r.text
        replayed += r.json()["runIds"]
    assert [run_of(gw, i)["sender"] for i in replayed] == ["replay", "replay"]
