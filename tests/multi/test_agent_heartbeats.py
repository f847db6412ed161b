"""Several agents on several gateway processes: the one leader runs every agent's heartbeat, and
a wake for an agent that reaches a follower gets to it (one signal topic per agent)."""

from __future__ import annotations

import httpx

from tests.multi.test_workers import AUTH, config, leader_pids
from tests.support.wait import eventually


def test_each_agent_heartbeats_under_one_leader(start_gateway, backend) -> None:
    cfg = config()
    cfg["agents"]["list"] = [
        {"id": "main", "default": True},
        {"id": "hooks", "heartbeat": {"every": 0, "coalesceMs": 100}},
    ]
    gw = start_gateway(cfg, extra_args=[*backend, "--workers", "2"])
    eventually(lambda: leader_pids(gw), what="a heartbeat leader")
    for i in range(4):
        agent = "hooks" if i % 2 else "main"
        with httpx.Client(base_url=gw.url, timeout=10) as c:  # reaches either worker
            r = c.post("/hooks/wake", json={"text": f"w{i}", "agentId": agent}, headers=AUTH)
            assert r.status_code == 200

    def consumed(session: str) -> bool:
        items = gw.admin("/api/events", session=session)["items"]
        return len(items) == 2 and all(e["consumedAt"] for e in items)

    eventually(lambda: consumed("main"), timeout=10, what="main's events consumed")
    eventually(lambda: consumed("agent:hooks:main"), timeout=10, what="hooks' events consumed")
    beats = gw.admin("/api/heartbeats", limit=100)["items"]
    by_agent = {a: sum(b["events"] for b in beats if b["agentId"] == a) for a in ("main", "hooks")}
    assert by_agent == {"main": 2, "hooks": 2}
    assert len(set(leader_pids(gw))) == 1
