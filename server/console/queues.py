"""The console's Queues page: each lane's runs queued and held, the oldest's age, whether it is
paused, with Pause and Resume buttons (CSRF-checked like every console form by `console.door`);
and each budget's spend against its limits, with Raise and Release buttons.

It reads and acts through the same functions as the admin API's `/api/queues`, `/api/pause` and
`/api/resume` (`admin.lanes`), and `/api/budgets` (`admin.budgets`): the pause, raise or
release is recorded as `console` from the client address.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.response import Redirect, Template

from ..admin.audit import note
from ..admin.budgets import RaiseRequest, list_budgets, raise_budget, release
from ..admin.lanes import PauseRequest, pause, queues, resume
from ..admin.recover import actor
from ..admin.scopes import requires
from .common import Form, back_to, gateway_of, render_page

KINDS = ("mapping", "agent")


@get("/queues")
async def queues_page(request: Request[Any, Any, Any]) -> Template:
    answer = await queues(gateway_of(request))
    budgets = await list_budgets(gateway_of(request))
    return render_page(
        request, "queues.html", lanes=answer.lanes, pauses=answer.pauses, budgets=budgets.items
    )


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


def _number(value: str | None) -> float | None:
    value = (value or "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return float("nan")  # refused by the raise, as the API refuses it


@post("/queues/budget/raise", opt=requires("operate", audit="budget_raise"))
async def budget_raise_page(request: Request[Any, Any, Any], data: Form) -> Redirect:
    kind, name = data.get("kind", ""), data.get("name", "")
    note(request, kind=kind, name=name)
    asked = RaiseRequest(
        tokens=(data.get("tokens") or "").strip() or None,
        cost=_number(data.get("cost")),
        for_=(data.get("for") or "").strip() or None,
    )
    answer = await raise_budget(gateway_of(request), kind, name, asked, actor(request, None))
    b = answer.budget
    until = b.raised.until if b.raised is not None else "?"
    return back_to("/ui/queues", f"Raised the budget of {kind} {name} until {until}.")


@post("/queues/budget/release", opt=requires("operate", audit="budget_release"))
async def budget_release_page(request: Request[Any, Any, Any], data: Form) -> Redirect:
    kind, name = data.get("kind", ""), data.get("name", "")
    sender = (data.get("sender") or "").strip() or None
    note(request, kind=kind, name=name, sender=sender)
    answer = await release(gateway_of(request), kind, name, actor(request, None), sender)
    which = f"{kind} {name}" + ("" if sender is None else f" sender {sender}")
    return back_to(
        "/ui/queues",
        f"Released the budget of {which}: {answer.released} run(s) back in the queue.",
    )
