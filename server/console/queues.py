"""The console's Queues page: each lane's runs queued and held, the oldest's age, whether it is
paused, with Pause and Resume buttons (CSRF-checked like every console form by `console.door`).

It reads and acts through the same functions as the admin API's `/api/queues`, `/api/pause` and
`/api/resume` (`admin.lanes`): the pause is recorded as `console` from the client address.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.response import Redirect, Template

from ..admin.audit import note
from ..admin.lanes import PauseRequest, pause, queues, resume
from ..admin.recover import actor
from ..admin.scopes import requires
from .common import Form, back_to, gateway_of, render_page

KINDS = ("mapping", "agent")


@get("/queues")
async def queues_page(request: Request[Any, Any, Any]) -> Template:
    answer = await queues(gateway_of(request))
    return render_page(request, "queues.html", lanes=answer.lanes, pauses=answer.pauses)


def _target(data: dict[str, str]) -> PauseRequest:
    kind = data.get("kind", "")
    return PauseRequest(
        kind="agent" if kind == "agent" else "mapping",
        name=data.get("name", ""),
        reason=(data.get("reason") or "").strip() or None,
    )


@post("/queues/pause", opt=requires("operate", audit="pause"))
async def pause_page(request: Request[Any, Any, Any], data: Form) -> Redirect:
    target = _target(data)
    note(request, kind=target.kind, name=target.name)
    answer = await pause(gateway_of(request), target, actor(request, None))
    return back_to(
        "/ui/queues", f"Paused {target.kind} {target.name}: {answer.held} queued run(s) held."
    )


@post("/queues/resume", opt=requires("operate", audit="resume"))
async def resume_page(request: Request[Any, Any, Any], data: Form) -> Redirect:
    target = _target(data)
    note(request, kind=target.kind, name=target.name)
    answer = await resume(gateway_of(request), target, actor(request, None))
    return back_to(
        "/ui/queues",
        f"Resumed {target.kind} {target.name}: {answer.released} run(s) back in the queue.",
    )
