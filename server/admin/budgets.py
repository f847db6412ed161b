"""Budgets through the admin API (same token as `admin`): each configured budget with its spend
in the current window, and an operator's raise and release.

`GET /api/budgets`: every budget of a mapping or an agent: its limits (configured, and as raised),
its window, what was spent in the window now, the raise and the waiver in force, and whether its
lane is held by it.

`POST /api/budgets/{kind}/{name}/raise {"tokens"?, "cost"?, "until" | "for"}`: raise the limits
(`tokens` a number or `2M`, `500K`; `cost` a number; at least one) until a time (`until`, ISO
8601) or for a while (`for`: `2h`, at most 30 days); held runs start within a few seconds if the
spend is under the raised limits. Raising again replaces the earlier raise.

`POST /api/budgets/{kind}/{name}/release`: release the runs its budget holds now, as
`POST /api/resume` does for that lane (the budget is waived until the end of its window).
`404 budget_not_found` for a mapping or agent without a budget; `409 not_held` when its lane is
not held by the budget (an operator's own pause is lifted with `/api/resume`).

A budget `by: sender` lists its senders (`senders`: the most spent in the window, and every held
one, each with its spend, `held` and `waivedUntil`); its `spentTokens`/`spentCost` are the most
one sender spent, and `held` says whether any sender is held. `release?sender=<key>` releases
one sender (`409 not_held` when that sender is not held); without `sender`, every held one.
`X-Hookwise-Actor` names who asks (recorded with the client address).
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

import attrs
import msgspec
from litestar import Controller, Request, get, post

from ...engine.config.durations import Duration
from ...engine.config.prices import PerTokens
from ...engine.errors import RequestError
from ..lifecycle.gateway import Gateway
from ..runtime.budgets import Budgets, Scope, raised_limits
from ..runtime.lanes import Target
from ..store.lanes import BY_BUDGET
from .api import admin_guard
from .audit import note
from .models import Answer, Model, iso, iso_or_none
from .recover import ACTOR, actor
from .scopes import requires

#: the longest raise: an operator's decision, not a new configuration
MAX_RAISE = 30 * 86400.0

Kind = Literal["mapping", "agent"]


class RaiseInfo(Model, kw_only=True):
    tokens: int | None
    cost: float | None
    until: str
    by: str
    at: str


class SenderInfo(Model, kw_only=True):
    """One sender of a budget by sender: its spend in the window, whether it is held, and until
    when an operator's release waives it."""

    sender: str
    spent_tokens: int
    spent_cost: float
    held: bool
    waived_until: str | None


class BudgetInfo(Model, kw_only=True):
    """One budget: limits (as configured; `limitTokens`/`limitCost` as in force now), window,
    spend in the current window, the operator's raise and waiver, and whether it holds its lane.
    `by` is `sender` for a budget per sender, with its `senders` (None otherwise)."""

    kind: str
    name: str
    tokens: int | None
    cost: float | None
    per_seconds: float
    window: str
    window_start: str
    spent_tokens: int
    spent_cost: float
    limit_tokens: int | None
    limit_cost: float | None
    raised: RaiseInfo | None
    waived_until: str | None
    held: bool
    by: str | None = None
    senders: list[SenderInfo] | None = None


class BudgetsAnswer(Answer, kw_only=True):
    items: list[BudgetInfo]


class BudgetAnswer(Answer, kw_only=True):
    budget: BudgetInfo


class ReleaseAnswer(Answer, kw_only=True):
    budget: BudgetInfo
    released: int
    #: the senders released (a budget by sender)
    senders: list[str] | None = None


class RaiseRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """New limits, until a time or for a while."""

    tokens: int | str | None = None
    cost: float | None = None
    until: dt.datetime | None = None
    for_: str | float | None = msgspec.field(default=None, name="for")


def _budgets(gateway: Gateway) -> Budgets:
    return gateway.budgets


async def sender_infos(gateway: Gateway, scope: Scope) -> list[SenderInfo]:
    """The senders of a budget by sender worth showing: the most spent, then the held ones."""
    budgets = _budgets(gateway)
    held = await budgets.held_senders(scope.kind, scope.name)
    top = [s for s, _, _ in await budgets.senders(scope)]
    now = budgets.now()
    found = []
    for sender in dict.fromkeys([*top, *held]):
        one = attrs.evolve(scope, sender=sender)
        spent = await budgets.spend(one)
        waived = await gateway.store.budget_waiver(one.held_kind, one.held_name)
        found.append(
            SenderInfo(
                sender=sender,
                spent_tokens=spent.tokens,
                spent_cost=spent.cost,
                held=sender in held,
                waived_until=iso_or_none(waived) if waived is not None and waived > now else None,
            )
        )
    return found


async def info(gateway: Gateway, scope: Scope) -> BudgetInfo:
    budgets = _budgets(gateway)
    store = gateway.store
    b = scope.budget
    spent = await budgets.spend(scope)
    senders = await sender_infos(gateway, scope) if b.by_sender else None
    if senders is not None:  # the most one sender spent
        spent = attrs.evolve(
            spent,
            tokens=max((s.spent_tokens for s in senders), default=0),
            cost=max((s.spent_cost for s in senders), default=0.0),
        )
    r = await budgets.raised(scope.kind, scope.name)
    limits = b if r is None else raised_limits(b, r)
    waived = await store.budget_waiver(scope.kind, scope.name)
    now = budgets.now()
    held = any(
        (p.kind, p.name, p.paused_by) == (scope.kind, scope.name, BY_BUDGET)
        for p in await store.pauses()
    ) or any(s.held for s in senders or ())
    return BudgetInfo(
        kind=scope.kind,
        name=scope.name,
        tokens=None if b.tokens is None else int(b.tokens),
        cost=b.cost,
        per_seconds=float(b.per),
        window=b.window,
        window_start=iso(spent.since),
        spent_tokens=spent.tokens,
        spent_cost=spent.cost,
        limit_tokens=None if limits.tokens is None else int(limits.tokens),
        limit_cost=limits.cost,
        raised=None
        if r is None
        else RaiseInfo(
            tokens=r.tokens, cost=r.cost, until=iso(r.until), by=r.raised_by, at=iso(r.raised_at)
        ),
        waived_until=iso_or_none(waived) if waived is not None and waived > now else None,
        held=held,
        by=b.by,
        senders=senders,
    )


def _scope(gateway: Gateway, kind: str, name: str) -> Scope:
    if kind not in ("mapping", "agent"):
        raise RequestError(400, "invalid_kind", "kind must be mapping or agent", field="kind")
    budget = _budgets(gateway).budget_of(kind, name)
    if budget is None:
        raise RequestError(404, "budget_not_found", f"{kind} {name!r} has no budget")
    return Scope(kind, name, budget)


def _until(data: RaiseRequest, now: float) -> float:
    if (data.until is None) == (data.for_ is None):
        raise RequestError(400, "invalid_body", "give `until` (a time) or `for` (a duration)")
    if data.until is not None:
        when = data.until if data.until.tzinfo else data.until.replace(tzinfo=dt.UTC)
        until, field = when.timestamp(), "until"
    else:
        try:
            until, field = now + Duration.parse(data.for_), "for"
        except ValueError as e:
            raise RequestError(400, "invalid_body", f"for {e}", field="for") from None
    if not now < until <= now + MAX_RAISE:
        raise RequestError(
            400, "invalid_body", "a raise ends in the future, within 30 days", field=field
        )
    return until


def _limits(data: RaiseRequest) -> tuple[int | None, float | None]:
    tokens = None
    if data.tokens is not None:
        try:
            tokens = int(PerTokens.parse(data.tokens))
        except ValueError as e:
            raise RequestError(400, "invalid_body", f"tokens {e}", field="tokens") from None
    cost = data.cost
    if cost is not None and not (cost >= 0 and cost != float("inf")):
        raise RequestError(400, "invalid_body", "cost must be a non-negative number", field="cost")
    if tokens is None and cost is None:
        raise RequestError(400, "invalid_body", "give `tokens`, `cost` or both")
    return tokens, cost


async def list_budgets(gateway: Gateway) -> BudgetsAnswer:
    return BudgetsAnswer(items=[await info(gateway, s) for s in _budgets(gateway).configured()])


async def raise_budget(
    gateway: Gateway, kind: str, name: str, data: RaiseRequest, who: str
) -> BudgetAnswer:
    scope = _scope(gateway, kind, name)
    budgets = _budgets(gateway)
    tokens, cost = _limits(data)
    until = _until(data, budgets.now())
    await budgets.raise_budget(kind, name, tokens=tokens, cost=cost, until=until, by=who)
    return BudgetAnswer(budget=await info(gateway, scope))


async def release(
    gateway: Gateway, kind: str, name: str, who: str, sender: str | None = None
) -> ReleaseAnswer:
    scope = _scope(gateway, kind, name)
    if scope.budget.by_sender:
        return await release_senders(gateway, scope, who, sender)
    if sender is not None:
        raise RequestError(
            400, "invalid_sender", f"the budget of {kind} {name} is not by sender", field="sender"
        )
    held = [p for p in await gateway.store.pauses() if (p.kind, p.name) == (kind, name)]
    if not held or held[0].paused_by != BY_BUDGET:
        raise RequestError(409, "not_held", f"{kind} {name} is not held by its budget")
    names, released = await gateway.lanes.resume(Target(kind, name), by=who)
    if not names:  # lifted meanwhile (the window made room, another process released it)
        raise RequestError(409, "not_held", f"{kind} {name} is not held by its budget")
    return ReleaseAnswer(budget=await info(gateway, scope), released=released)


async def release_senders(
    gateway: Gateway, scope: Scope, who: str, sender: str | None
) -> ReleaseAnswer:
    """Release one held sender of a budget by sender, or every held one."""
    budgets = _budgets(gateway)
    held = await budgets.held_senders(scope.kind, scope.name)
    wanted = held if sender is None else [s for s in held if s == sender]
    what = f"{scope.kind} {scope.name}" + ("" if sender is None else f" sender {sender}")
    if not wanted:
        raise RequestError(409, "not_held", f"{what} is not held by its budget")
    names, released = await budgets.release_senders(scope.kind, scope.name, wanted, by=who)
    if not names:  # lifted meanwhile (the window made room, another process released it)
        raise RequestError(409, "not_held", f"{what} is not held by its budget")
    return ReleaseAnswer(budget=await info(gateway, scope), released=released, senders=names)


class BudgetsController(Controller):
    path = "/api/budgets"
    guards = [admin_guard]
    tags = ["budgets"]
    security = [{"bearer": []}]

    @get("/", summary="Each budget: limits, spend in its window, raise, waiver, held")
    async def budgets(self, request: Request) -> BudgetsAnswer:
        return await list_budgets(request.app.state.gateway)

    @post(
        "/{kind:str}/{name:str}/raise",
        status_code=200,
        summary="Raise a budget for a while",
        opt=requires("operate", audit="budget_raise"),
    )
    async def raise_(
        self, request: Request, kind: str, name: str, data: RaiseRequest, by: str | None = ACTOR
    ) -> BudgetAnswer:
        note(request, kind=kind, name=name)
        return await raise_budget(request.app.state.gateway, kind, name, data, actor(request, by))

    @post(
        "/{kind:str}/{name:str}/release",
        status_code=200,
        summary="Release the runs it holds",
        opt=requires("operate", audit="budget_release"),
    )
    async def release(
        self,
        request: Request,
        kind: str,
        name: str,
        by: str | None = ACTOR,
        sender: str | None = None,
    ) -> ReleaseAnswer:
        note(request, kind=kind, name=name, sender=sender)
        return await release(
            request.app.state.gateway, kind, name, actor(request, by), sender=sender
        )
