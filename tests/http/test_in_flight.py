"""Gauges of what is in flight, through a running gateway on both stores: `/metrics` shows the
running runs and the age of the oldest per configured agent, and the events waiting for a
heartbeat per main session (labels bounded by the configuration)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway import ADMIN_TOKEN, HOOK_TOKEN, GatewayProcess
from tests.support.wait import eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def config() -> dict[str, Any]:
    beat = {"every": 0, "coalesceMs": 50}
    return {
        "hooks": {"enabled": True, "token": HOOK_TOKEN},
        "gateway": {"auth": {"token": ADMIN_TOKEN}},
        "models": {
            "providers": {"slow": {"api": "command", "command": ["sh", "-c", "sleep 30; echo"]}}
        },
        "agents": {
            "defaults": {"heartbeat": beat},
            "list": [
                {"id": "main", "default": True},
                {"id": "slow", "model": "slow/x", "maxConcurrentRuns": 2, "heartbeat": beat},
            ],
        },
    }


def gauges(gw: GatewayProcess) -> dict[tuple[str, str], float]:
    r = httpx.get(gw.url + "/metrics", headers=ADMIN, timeout=10)
    assert r.status_code == 200, r.text
    found = {}
    for family in text_string_to_metric_families(r.text):
        if family.name.startswith(("hookwise_runs_running", "hookwise_events_pending")):
            for s in family.samples:
                found[(s.name, next(iter(s.labels.values())))] = s.value
    return found


def test_metrics_show_running_runs_their_oldest_age_and_pending_events(
    start_gateway: Callable[..., GatewayProcess],
) -> None:
    gw = start_gateway(config())
    if "--store" in gw.extra_args:  # PostgreSQL: the process that takes the heartbeat's lead
        # asks each agent for a heartbeat, which would consume main's wakes sent before it ran
        # (slow's runs its model for 30 s, having taken the nothing pending when it began)
        eventually(
            lambda: any(
                b["agentId"] == "main" and b["reason"] == "leader" and b["state"] != "started"
                for b in gw.admin("/api/heartbeats")["items"]
            ),
            what="main's heartbeat asked by the new leader",
        )
    before = gauges(gw)
    assert before == {
        ("hookwise_runs_running", "main"): 0,
        ("hookwise_runs_running", "slow"): 0,
        ("hookwise_runs_running_oldest_seconds", "main"): 0,
        ("hookwise_runs_running_oldest_seconds", "slow"): 0,
        ("hookwise_events_pending", "main"): 0,
        ("hookwise_events_pending", "agent:slow:main"): 0,
    }
    for i in range(2):
        r = gw.hook("agent", {"message": f"m{i}", "agentId": "slow", "deliver": False})
        assert r.status_code == 202, r.text
    for i in range(3):
        r = gw.hook("wake", {"text": f"w{i}", "mode": "next-heartbeat"})
        assert r.status_code == 200, r.text
    assert gw.hook("wake", {"text": "x", "agentId": "slow", "mode": "next-heartbeat"}).is_success
    found = eventually(
        lambda: (g := gauges(gw)) and g[("hookwise_runs_running", "slow")] == 2 and g,
        what="two running runs",
    )
    assert found[("hookwise_runs_running", "main")] == 0
    assert found[("hookwise_runs_running_oldest_seconds", "main")] == 0
    assert found[("hookwise_events_pending", "main")] == 3
    assert found[("hookwise_events_pending", "agent:slow:main")] == 1
    first = found[("hookwise_runs_running_oldest_seconds", "slow")]
    later = eventually(
        lambda: (
            (g := gauges(gw))[("hookwise_runs_running_oldest_seconds", "slow")] > first + 1 and g
        ),
        what="the oldest running run to age",
    )
    assert later[("hookwise_runs_running", "slow")] == 2
