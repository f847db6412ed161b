"""Lanes through the admin API (same token as `admin`): what waits where, and pause / resume.

`GET /api/queues`: each lane (an agent and a mapping; `mapping: null` for `/hooks/agent`
requests) with its runs queued and held, the age of the oldest, and whether it is paused; every
loaded mapping and every agent is listed, queued or not, so that any of them can be paused; and
the pauses in force (who, when, why).

`POST /api/pause {"kind": "mapping"|"agent"|"path", "name", "reason"?}`: pause it (a path
pauses every mapping on it); `X-Hookwise-Actor` names who asks (recorded with the client
address). `POST /api/resume {"kind", "name"}`: lift it; the held runs go back to the queue in
their order. An unknown name is `404 <kind>_not_found`, resuming what is not paused
`409 not_paused`.
"""

from __future__ import annotations

import time
from typing import Literal

import msgspec
from litestar import Controller, Request, get, post

from ...engine.errors import RequestError
from ..lifecycle.gateway import Gateway
from ..runtime.lanes import Target, UnknownTarget
from .api import admin_guard
from .audit import note
from .models import Answer, Model, iso
from .recover import ACTOR, actor
from .scopes import requires

MAX_NAME = 200
MAX_REASON = 500


class LaneInfo(Model, kw_only=True):
    """One lane: an agent's runs made by one mapping (`mapping: null`: `/hooks/agent`)."""

    agent: str
    mapping: str | None
    queued: int
    held: int
    oldest_seconds: float | None
    paused: bool


class PauseInfo(Model, kw_only=True):
    kind: str
    name: str
    reason: str | None
    by: str
    at: str


class QueuesAnswer(Answer, kw_only=True):
    lanes: list[LaneInfo]
    pauses: list[PauseInfo]


class PauseRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """What to pause or resume."""

    kind: Literal["mapping", "agent", "path"]
    name: str
    reason: str | None = None


class PauseAnswer(Answer, kw_only=True):
    kind: str
    #: the mappings or the agent paused (a path: every mapping on it)
    paused: list[str]
    held: int


class ResumeAnswer(Answer, kw_only=True):
    kind: str
    resumed: list[str]
    released: int


async def queues(gateway: Gateway) -> QueuesAnswer:
    """Every lane and pause (the API and the console both call this)."""
    store = gateway.store
    now = time.time()
    pauses = await store.pauses()
    paused = {(p.kind, p.name) for p in pauses}
    rows: dict[tuple[str, str | None], LaneInfo] = {}

    def lane(agent: str, mapping: str | None) -> LaneInfo:
        held = ("agent", agent) in paused or (
            mapping is not None and ("mapping", mapping) in paused
        )
        return LaneInfo(
            agent=agent, mapping=mapping, queued=0, held=0, oldest_seconds=None, paused=held
        )

    roster = gateway.runtime.roster
    for agent in roster.agents:
        rows[(agent.id, None)] = lane(agent.id, None)
    rules = gateway.rules
    for rule in rules.rules if rules is not None else ():
        agent_id = rule.config.agent_id or roster.default.id
        if agent_id not in {a.id for a in roster.agents}:
            agent_id = roster.default.id
        rows[(agent_id, rule.id)] = lane(agent_id, rule.id)
    for stat in await store.lanes():
        row = rows.get((stat.agent_id, stat.rule_id)) or lane(stat.agent_id, stat.rule_id)
        oldest = None if stat.oldest_created_at is None else max(0.0, now - stat.oldest_created_at)
        rows[(stat.agent_id, stat.rule_id)] = msgspec.structs.replace(
            row, queued=stat.queued, held=stat.held, oldest_seconds=oldest
        )
    ordered = sorted(rows.values(), key=lambda r: (r.agent, r.mapping or ""))
    return QueuesAnswer(
        lanes=ordered,
        pauses=[
            PauseInfo(
                kind=p.kind, name=p.name, reason=p.reason, by=p.paused_by, at=iso(p.paused_at)
            )
            for p in pauses
        ],
    )


def _target(data: PauseRequest) -> Target:
    name = data.name.strip()
    if not name or len(name) > MAX_NAME or "\x00" in name:
        raise RequestError(400, "invalid_body", "name must be 1 to 200 characters", field="name")
    if data.reason is not None and (len(data.reason) > MAX_REASON or "\x00" in data.reason):
        raise RequestError(400, "invalid_body", "reason is too long", field="reason")
    return Target(data.kind, name)


async def pause(gateway: Gateway, data: PauseRequest, who: str) -> PauseAnswer:
    target = _target(data)
    try:
        names, held = await gateway.lanes.pause(target, by=who, reason=data.reason or None)
    except UnknownTarget as e:
        raise RequestError(404, f"{target.kind}_not_found", str(e)) from None
    return PauseAnswer(kind=target.kind, paused=names, held=held)


async def resume(gateway: Gateway, data: PauseRequest, who: str) -> ResumeAnswer:
    target = _target(data)
    try:
        names, released = await gateway.lanes.resume(target, by=who)
    except UnknownTarget as e:
        raise RequestError(404, f"{target.kind}_not_found", str(e)) from None
    if not names:
        raise RequestError(409, "not_paused", f"{target.kind} {target.name} is not paused")
    return ResumeAnswer(kind=target.kind, resumed=names, released=released)


class LanesController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["lanes"]
    security = [{"bearer": []}]

    @get("/queues", summary="Each lane's queued and held runs, and the pauses in force")
    async def queues(self, request: Request) -> QueuesAnswer:
        return await queues(request.app.state.gateway)

    @post(
        "/pause",
        status_code=200,
        summary="Hold the runs and wakes of a mapping, path or agent",
        opt=requires("operate", audit="pause"),
    )
    async def pause(
        self, request: Request, data: PauseRequest, by: str | None = ACTOR
    ) -> PauseAnswer:
        note(request, kind=data.kind, name=data.name)
        return await pause(request.app.state.gateway, data, actor(request, by))

    @post(
        "/resume",
        status_code=200,
        summary="Release what a pause held, in order",
        opt=requires("operate", audit="resume"),
    )
    async def resume(
        self, request: Request, data: PauseRequest, by: str | None = ACTOR
    ) -> ResumeAnswer:
        note(request, kind=data.kind, name=data.name)
        return await resume(request.app.state.gateway, data, actor(request, by))
