"""The operating endpoints: `GET /readyz` (readiness, no auth) and `GET /metrics` (Prometheus).

`/healthz` stays the cheap liveness probe (the process answers). `/readyz` answers 200 only
when the store answers a read and its writer runs and answers a probe write within 2 s (a
paused or stuck writer is not ready, not only one that exited), and this process's run, delivery and
heartbeat loops are alive (a process that does not lead the heartbeat checks its leadership
loop instead), and each pull source is connected to its broker; otherwise 503 with the reasons. Both carry the version
(`hookwise.server.version.version_info()`).

`/metrics` is behind the gateway token (`Authorization: Bearer`, as Prometheus' scrape config
sends it) unless `gateway.metrics.public: true`; it exists only while metrics are enabled.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from litestar import Request, Response, get

from .. import metrics
from ..lifecycle.gateway import Gateway
from ..runtime.core import Runtime
from ..store.records import InFlight
from ..version import version_info
from .api import admin_guard


def _alive(task: asyncio.Task[Any] | None) -> bool:
    return task is not None and not task.done()


def runtime_problems(runtime: Runtime) -> list[str]:
    """The runtime loops of this process that are not running (each agent's run lane and
    heartbeat, the delivery worker)."""
    problems = []
    for agent_id, lane in runtime.lanes.items():
        if not _alive(lane._loop_task):
            problems.append(f"the run loop of agent {agent_id} is not running")
    if not _alive(runtime.deliveries._task):
        problems.append("the delivery loop is not running")
    if runtime.leader:
        for agent_id, beat in runtime.heartbeats.items():
            if not _alive(beat._task):
                problems.append(f"the heartbeat loop of agent {agent_id} is not running")
    elif not any(t.get_name() == "hookwise-lead" and _alive(t) for t in runtime._tasks):
        problems.append("the heartbeat leadership loop is not running")
    return problems


@get("/readyz")
async def readyz(request: Request) -> Response[dict[str, Any]]:
    gateway = request.app.state.gateway
    problems = await gateway.store.readiness() + runtime_problems(gateway.runtime)
    problems += gateway.sources.problems()
    if not problems:
        return Response({"ok": True, **version_info()})
    return Response(
        {
            "ok": False,
            "error": "not ready: " + "; ".join(problems),
            "code": "not_ready",
            "reasons": problems,
            **version_info(),
        },
        status_code=503,
    )


async def in_flight(gateway: Gateway, now: float) -> InFlight:
    """Running runs of every configured agent (0 for those with none) and pending events of
    every main session."""
    roster = gateway.runtime.roster
    found = await gateway.store.in_flight(now=now, sessions=[a.main_session for a in roster.agents])
    running = {a.id: (0, None) for a in roster.agents} | found.running
    return InFlight(running, found.pending_events)


async def lane_gauges(gateway: Gateway) -> list[tuple[str, str, int, float | None]]:
    """Each configured lane's depth (runs queued or held) and oldest age; lanes of mappings no
    longer loaded are summed into `other`, so the series stay bounded by the configuration."""
    from .lanes import queues

    found: dict[tuple[str, str], tuple[int, float | None]] = {}
    configured = {r.id for r in gateway.rules.rules} if gateway.rules is not None else set()
    for lane in (await queues(gateway)).lanes:
        name = "direct" if lane.mapping is None else lane.mapping
        if lane.mapping is not None and lane.mapping not in configured:
            name = "other"
        count, age = found.get((lane.agent, name), (0, None))
        ages = [a for a in (age, lane.oldest_seconds) if a is not None]
        found[(lane.agent, name)] = (count + lane.queued + lane.held, max(ages, default=None))
    return [(agent, name, n, age) for (agent, name), (n, age) in sorted(found.items())]


async def _scrape(request: Request) -> Response[bytes]:
    gateway = request.app.state.gateway
    now = time.time()
    queues = await gateway.store.queue_stats(now=now)
    now_running = await in_flight(gateway, now)
    breakers = {b.model: b.state_at(now) for b in await gateway.store.breakers()}
    pending = await gateway.store.pending_approvals()
    age = None if pending.oldest_created_at is None else max(0.0, now - pending.oldest_created_at)
    body = metrics.render(
        queues,
        now_running.running,
        now_running.pending_events,
        await lane_gauges(gateway),
        breakers,
        await gateway.budgets.gauges(),
        await gateway.alerts.open_counts(),
        approvals=(pending.count, age),
    )
    return Response(body, media_type=metrics.CONTENT_TYPE)


def metrics_handler(public: bool) -> Any:
    """The `/metrics` route, behind the gateway token unless `public`."""
    return get("/metrics", guards=[] if public else [admin_guard], name="metrics")(_scrape)
