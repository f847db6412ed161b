"""Idempotency-Key: a repeat returns the first answer and creates nothing, across restarts."""

from __future__ import annotations

import pytest

from tests.support.gateway import GatewayProcess, base_config


def test_a_repeated_agent_request_returns_the_first_run(start_gateway) -> None:
    gw = start_gateway()
    headers = {"Idempotency-Key": "delivery-8f2c"}
    first = gw.hook("agent", {"message": "build broke"}, headers=headers)
    again = gw.hook("agent", {"message": "build broke"}, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    runs = gw.admin("/api/runs")["items"]
    assert [r["runId"] for r in runs] == [first.json()["runId"]]


def test_a_repeated_wake_creates_one_event(start_gateway) -> None:
    gw = start_gateway()
    for _ in range(3):
        r = gw.hook("wake", {"text": "once"}, headers={"Idempotency-Key": "w-1"})
        assert r.status_code == 200
    assert len(gw.admin("/api/events")["items"]) == 1


def test_keys_survive_a_restart(start_gateway) -> None:
    gw = start_gateway()
    first = gw.hook("agent", {"message": "m"}, headers={"Idempotency-Key": "k-restart"})
    gw.restart()
    again = gw.hook("agent", {"message": "m"}, headers={"Idempotency-Key": "k-restart"})
    assert again.json()["runId"] == first.json()["runId"]
    assert len(gw.admin("/api/runs")["items"]) == 1


def test_the_same_key_for_another_request_is_422(start_gateway) -> None:
    gw = start_gateway()
    assert gw.hook("wake", {"text": "a"}, headers={"Idempotency-Key": "k"}).status_code == 200
    r = gw.hook("wake", {"text": "b"}, headers={"Idempotency-Key": "k"})
    assert r.status_code == 422 and r.json()["code"] == "idempotency_key_reused"
    r = gw.hook("agent", {"text": "a"}, headers={"Idempotency-Key": "k"})
    assert r.status_code in (400, 422)
    assert len(gw.admin("/api/events")["items"]) == 1


def test_a_refused_request_does_not_use_up_the_key(start_gateway) -> None:
    gw = start_gateway()
    assert gw.hook("wake", {"text": ""}, headers={"Idempotency-Key": "k2"}).status_code == 400
    assert gw.hook("wake", {"text": "fixed"}, headers={"Idempotency-Key": "k2"}).status_code == 200


def test_keys_expire_after_the_window(start_gateway) -> None:
    gw = start_gateway(base_config(idempotencyWindow="1s"))
    first = gw.hook("wake", {"text": "a"}, headers={"Idempotency-Key": "short"})
    import time

    time.sleep(1.2)
    again = gw.hook("wake", {"text": "a"}, headers={"Idempotency-Key": "short"})
    assert again.json()["eventId"] != first.json()["eventId"]


@pytest.mark.parametrize("key", ["", "x" * 257, "tab\there"])
def test_an_invalid_key_is_400(gateway: GatewayProcess, key: str) -> None:
    r = gateway.hook("wake", {"text": "a"}, headers={"Idempotency-Key": key})
    assert r.status_code == 400 and r.json()["code"] == "invalid_idempotency_key"
