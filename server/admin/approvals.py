"""Approvals through the admin API (same token as `admin`): list them, decide them.

`GET /api/approvals?state=pending&runId=...`: approvals, oldest first (`state` one of pending,
approved, denied, timed_out). `GET /api/approvals/{id}`: one. `POST /api/approvals/{id}/approve`
and `/deny`: decide a pending one; `X-Hookwise-Actor` names who (recorded as
`<actor>@<client>`, via `api`). An operator with the admin token may always decide. A decision
that changes nothing (already decided, expired, unknown) is recorded as refused and answered
`409 approval_decided` / `409 approval_expired` / `404 approval_not_found`.

Scopes: reading needs `read`; the decision routes need `operate` (`admin.scopes`) and are
audited (`admin.audit`).
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get, post
from litestar.params import Parameter

from ...engine.errors import RequestError
from ..store.approvals import APPROVAL_STATES, Decided
from .api import admin_guard
from .models import Answer, Approval
from .query import MAX_LIMIT, check_choice, state_parameter, text_parameter
from .recover import ACTOR, actor
from .scopes import requires

#: the guards of the routes that decide (their scope, `operate`, is declared on each route)
DECIDE_GUARDS: list[Any] = [admin_guard]


class ApprovalPage(Answer, kw_only=True):
    items: list[Approval]


class ApprovalAnswer(Answer, kw_only=True):
    approval: Approval


class DecisionAnswer(Answer, kw_only=True):
    approval: Approval
    #: the run's last pending approval was decided: it is queued again and resumes
    resumed: bool


def _show(request: Request) -> bool:
    return bool(request.app.state.gateway.runtime.approvals.show_arguments)


def refused(decided: Decided, approval_id: str) -> RequestError:
    """The error a refused decision answers."""
    a = decided.approval
    if a is None:
        return RequestError(404, "approval_not_found", f"no approval {approval_id!r}")
    if a.state == "pending":
        return RequestError(409, "approval_expired", "the approval had expired; nothing changed")
    return RequestError(
        409, "approval_decided", f"the approval was already {a.state}; nothing changed"
    )


async def decide(request: Request, approval_id: str, approve: bool, who: str) -> DecisionAnswer:
    approvals = request.app.state.gateway.runtime.approvals
    decided = await approvals.decide(approve=approve, by=who, via="api", approval_id=approval_id)
    if not decided.counted or decided.approval is None:
        raise refused(decided, approval_id)
    return DecisionAnswer(
        approval=Approval.of(decided.approval, arguments=_show(request)), resumed=decided.resumed
    )


class ApprovalsController(Controller):
    path = "/api/approvals"
    guards = [admin_guard]
    tags = ["approvals"]
    security = [{"bearer": []}]

    @get("/", summary="Tool calls waiting for (or given) a person's decision, oldest first")
    async def list_approvals(
        self,
        request: Request,
        approval_state: str | None = state_parameter(APPROVAL_STATES, "approvals"),
        run_id: str | None = text_parameter("only approvals of this run", query="runId"),
        limit: int = Parameter(default=100, ge=1, le=MAX_LIMIT, description="at most this many"),
    ) -> ApprovalPage:
        check_choice("state", approval_state, APPROVAL_STATES)
        found = await request.app.state.gateway.store.approvals(
            state=approval_state, run_id=run_id, limit=limit
        )
        show = _show(request)
        return ApprovalPage(items=[Approval.of(a, arguments=show) for a in found])

    @get("/{approval_id:str}", summary="One approval")
    async def one(self, request: Request, approval_id: str) -> ApprovalAnswer:
        found = await request.app.state.gateway.store.approval(approval_id)
        if found is None:
            raise RequestError(404, "approval_not_found", f"no approval {approval_id!r}")
        return ApprovalAnswer(approval=Approval.of(found, arguments=_show(request)))

    @post(
        "/{approval_id:str}/approve",
        status_code=200,
        guards=DECIDE_GUARDS,
        opt=requires("operate", audit="approve"),
        summary="Approve a pending call: the run resumes and makes it",
    )
    async def approve(
        self, request: Request, approval_id: str, by: str | None = ACTOR
    ) -> DecisionAnswer:
        return await decide(request, approval_id, True, actor(request, by))

    @post(
        "/{approval_id:str}/deny",
        status_code=200,
        guards=DECIDE_GUARDS,
        opt=requires("operate", audit="deny"),
        summary="Deny a pending call: the model gets an error result naming the denial",
    )
    async def deny(
        self, request: Request, approval_id: str, by: str | None = ACTOR
    ) -> DecisionAnswer:
        return await decide(request, approval_id, False, actor(request, by))
