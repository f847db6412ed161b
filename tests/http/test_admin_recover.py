"""Sending failed work back to the queue through a running gateway, on both stores: one run or
delivery, and in bulk with a filter (with a dry run), each retry recorded with who and when.

The model is the loopback fake provider (a scripted failure, then its default answer); deliveries
go to the loopback Telegram fake (an unknown chat fails for good, until it exists)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.fakes.channel_servers import FakeServer, start
from tests.fakes.model_server import ModelServer
from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CHAT = "-1001234567890"


@pytest.fixture(scope="module")
def model_server() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeServer]:
    server = start("telegram")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gw(
    start_module_gateway: Callable[..., GatewayProcess],
    model_server: ModelServer,
    telegram: FakeServer,
) -> GatewayProcess:
    config = {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "agents": {"defaults": {"heartbeat": {"every": 0}}},
        "models": {
            "providers": {
                "fake": {
                    "api": "openai",
                    "baseUrl": model_server.openai_base_url,
                    "apiKey": model_server.api_key,
                    "maxRetries": 0,
                }
            }
        },
        "delivery": {"baseDelaySeconds": 0.2, "maxDelaySeconds": 1, "maxAttempts": 2},
        "channels": {"telegram": telegram.config()},
    }
    return start_module_gateway(config, name="recover")


def post(gw: GatewayProcess, path: str, body: Any = None, **headers: str) -> httpx.Response:
    return httpx.post(gw.url + path, json=body, headers={**AUTH, **headers}, timeout=10)


def agent(gw: GatewayProcess, **payload: Any) -> str:
    # runs ask the fake provider; heartbeats the built-in echo model
    defaults = {"message": "m", "model": "fake/m", "wakeMode": "next-heartbeat", "deliver": False}
    r = gw.hook("agent", defaults | payload)
    assert r.status_code == 202, r.text
    return r.json()["runId"]


def run_in(gw: GatewayProcess, run_id: str, *states: str) -> dict[str, Any]:
    return eventually(
        lambda: (r := gw.admin(f"/api/runs/{run_id}")["run"])["state"] in states and r,
        what=f"run {run_id} to reach {states}",
    )


def failed_run(gw: GatewayProcess, model_server: ModelServer, **payload: Any) -> str:
    model_server.fail(400, message="This model does not exist")
    run_id = agent(gw, **payload)
    run = run_in(gw, run_id, "failed", "succeeded")
    assert run["state"] == "failed", run
    return run_id


# --- one run --------------------------------------------------------------------------------------


def test_a_failed_run_goes_back_to_the_queue_and_runs_again(
    gw: GatewayProcess, model_server: ModelServer
) -> None:
    run_id = failed_run(gw, model_server)
    r = post(gw, f"/api/runs/{run_id}/retry", **{"X-Hookwise-Actor": "alice"})
    assert r.status_code == 202 and r.json() == {"ok": True, "runId": run_id}
    run = run_in(gw, run_id, "succeeded")
    assert run["attempts"] == 2  # the failed attempt is kept
    assert run["reply"] == model_server.default_text
    assert run["error"] is None
    [retry] = run["retries"]
    assert retry["by"] == "alice@127.0.0.1" and retry["fromState"] == "failed"
    assert "This model does not exist" in retry["error"] and retry["attempts"] == 1
    assert retry["at"].endswith("Z")
    # a succeeded run cannot be retried
    r = post(gw, f"/api/runs/{run_id}/retry")
    assert r.status_code == 409 and r.json()["code"] == "run_not_retryable"
    assert "succeeded" in r.json()["error"] and r.json()["ok"] is False
    assert len(gw.admin(f"/api/runs/{run_id}")["run"]["retries"]) == 1


def test_retrying_an_unknown_run_is_404(gw: GatewayProcess) -> None:
    r = post(gw, "/api/runs/nope/retry")
    assert r.status_code == 404 and r.json()["code"] == "run_not_found"


def test_an_actor_name_is_recorded_without_its_unsafe_characters(
    gw: GatewayProcess, model_server: ModelServer
) -> None:
    run_id = failed_run(gw, model_server)
    r = post(gw, f"/api/runs/{run_id}/retry", **{"X-Hookwise-Actor": "bob\t<script>"})
    assert r.status_code == 202
    [retry] = run_in(gw, run_id, "succeeded")["retries"]
    assert retry["by"] == "bob__script_@127.0.0.1"


# --- runs in bulk ---------------------------------------------------------------------------------


def test_bulk_retry_counts_with_a_dry_run_then_requeues_in_steps(
    gw: GatewayProcess, model_server: ModelServer
) -> None:
    session = "hook:bulk-runs"
    ok = agent(gw, sessionKey=session)
    run_in(gw, ok, "succeeded")
    failed = [failed_run(gw, model_server, sessionKey=session) for _ in range(3)]
    other = failed_run(gw, model_server)  # another session: not picked
    body = {"session": session}
    r = post(gw, "/api/runs/retry", {**body, "dryRun": True})
    assert r.status_code == 200 and r.json() == {"ok": True, "count": 3, "dryRun": True}
    assert all(gw.admin(f"/api/runs/{i}")["run"]["state"] == "failed" for i in failed)
    r = post(gw, "/api/runs/retry", {**body, "state": "failed", "limit": 2})
    assert r.json() == {"ok": True, "count": 2, "dryRun": False}
    assert post(gw, "/api/runs/retry", body).json()["count"] == 1
    for run_id in failed:
        run = run_in(gw, run_id, "succeeded")
        assert run["attempts"] == 2 and len(run["retries"]) == 1
    assert gw.admin(f"/api/runs/{other}")["run"]["state"] == "failed"
    assert post(gw, "/api/runs/retry", body).json()["count"] == 0
    assert gw.admin(f"/api/runs/{ok}")["run"]["retries"] == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"state": "queued"}, "state"),
        ({"limit": 0}, "limit"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"since": "yesterday"}, "since"),
        ({"dryRun": "yes"}, "dryRun"),
        ({"bogus": 1}, None),
    ],
)
def test_a_bad_bulk_filter_is_400_invalid_body(
    gw: GatewayProcess, body: dict[str, Any], field: str | None
) -> None:
    r = post(gw, "/api/runs/retry", body)
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["ok"] is False and answer["code"] == "invalid_body"
    assert answer.get("field") == field


def test_state_names_what_a_bulk_retry_allows(gw: GatewayProcess) -> None:
    r = post(gw, "/api/deliveries/retry", {"state": "sent"})
    assert r.status_code == 400 and r.json() == {
        "ok": False,
        "error": "state must be one of: failed",
        "code": "invalid_body",
        "field": "state",
    }


# --- deliveries -----------------------------------------------------------------------------------


def failed_delivery(gw: GatewayProcess, telegram: FakeServer, chat: str) -> tuple[str, str]:
    telegram.missing.add(chat)
    run_id = agent(gw, deliver=True, channel="telegram", to=chat)

    def probe() -> dict[str, Any] | None:
        ds = gw.admin(f"/api/runs/{run_id}")["run"]["deliveries"]
        return ds[0] if ds and ds[0]["state"] in ("failed", "sent") else None

    d = eventually(probe, timeout=20, what="the delivery to fail")
    assert d["state"] == "failed", d
    return run_id, d["deliveryId"]


def delivery_in(gw: GatewayProcess, delivery_id: str, *states: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        items = gw.admin("/api/deliveries", limit=500)["items"]
        found = [d for d in items if d["deliveryId"] == delivery_id]
        return found[0] if found and found[0]["state"] in states else None

    return eventually(probe, timeout=20, what=f"delivery {delivery_id} to reach {states}")


def test_a_failed_delivery_goes_back_to_pending_and_is_sent(
    gw: GatewayProcess, telegram: FakeServer
) -> None:
    _, delivery_id = failed_delivery(gw, telegram, CHAT)
    telegram.missing.discard(CHAT)  # the chat exists now
    r = post(gw, f"/api/deliveries/{delivery_id}/retry")
    assert r.status_code == 202 and r.json() == {"ok": True, "deliveryId": delivery_id}
    d = delivery_in(gw, delivery_id, "sent")
    assert d["attempts"] == 2 and d["messageIds"]
    r = post(gw, f"/api/deliveries/{delivery_id}/retry")
    assert r.status_code == 409 and r.json()["code"] == "delivery_not_retryable"
    r = post(gw, "/api/deliveries/nope/retry")
    assert r.status_code == 404 and r.json()["code"] == "delivery_not_found"


def test_failed_deliveries_go_back_in_bulk_by_channel(
    gw: GatewayProcess, telegram: FakeServer
) -> None:
    ids = [failed_delivery(gw, telegram, f"-100777{i}")[1] for i in range(2)]
    r = post(gw, "/api/deliveries/retry", {"channel": "telegram", "dryRun": True})
    assert r.json()["count"] >= 2
    assert post(gw, "/api/deliveries/retry", {"channel": "slack"}).json()["count"] == 0
    for i in range(2):
        telegram.missing.discard(f"-100777{i}")
    r = post(gw, "/api/deliveries/retry", {"channel": "telegram", "state": "failed"})
    assert r.status_code == 200 and r.json()["count"] >= 2
    for delivery_id in ids:
        assert delivery_in(gw, delivery_id, "sent")["attempts"] == 2
    r = post(gw, "/api/deliveries/retry", {"rule": "x"})
    assert r.status_code == 400 and r.json()["field"] == "rule"
