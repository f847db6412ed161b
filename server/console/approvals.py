"""The console's Approvals page: tool calls waiting for a person, with Approve and Deny buttons
(CSRF-checked like every console form by `console.door`), and the latest decisions.

It decides through the same function as the admin API (`runtime.approvals.Approvals.decide`),
recorded as `console@<client>` via `console`. A refused decision (already decided, expired) is
said in the notice and recorded like any other.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar import Request, get, post
from litestar.response import Redirect, Template

from ..admin.models import Approval
from ..admin.recover import actor
from ..admin.scopes import requires
from ..runtime.approvals import link_secret, link_signature
from .common import Form, back_to, gateway_of, render_page

RECENT = 50


@get("/approvals")
async def approvals_page(request: Request[Any, Any, Any]) -> Template:
    gateway = gateway_of(request)
    show = gateway.runtime.approvals.show_arguments
    pending = await gateway.store.approvals(state="pending", limit=500)
    decided = [
        a
        for state in ("approved", "denied", "timed_out")
        for a in await gateway.store.approvals(state=state, limit=RECENT)
    ]
    decided.sort(key=lambda a: a.decided_at or 0.0, reverse=True)
    return render_page(
        request,
        "approvals.html",
        pending=[Approval.of(a, arguments=show) for a in pending],
        decided=[Approval.of(a, arguments=show) for a in decided[:RECENT]],
    )


async def _decide(request: Request[Any, Any, Any], approval_id: str, approve: bool) -> Redirect:
    approvals = gateway_of(request).runtime.approvals
    decided = await approvals.decide(
        approve=approve,
        by=actor(request, None),
        via="console",
        approval_id=approval_id,
    )
    a = decided.approval
    if not decided.counted or a is None:
        why = "no such approval" if a is None else f"it was already {a.state.replace('_', ' ')}"
        if a is not None and a.state == "pending":
            why = "it had expired"
        return back_to("/ui/approvals", f"Nothing changed: {why}.")
    then = "the run resumes" if decided.resumed else "other calls of its run still wait"
    return back_to(
        "/ui/approvals", f"{a.state.capitalize()} {a.server}.{a.tool} of run {a.run_id}: {then}."
    )


@get("/approvals/{approval_id:str}")
async def approval_page(request: Request[Any, Any, Any], approval_id: str) -> Template:
    """One approval: the page a signed link points at (`?sig=`); a link whose signature is not
    this gateway's is refused (403) and recorded."""
    gateway = gateway_of(request)
    approvals = gateway.runtime.approvals
    sig = request.query_params.get("sig")
    if sig is not None:
        secret = link_secret(gateway.config.gateway.auth) or ""
        if not secret or not hmac.compare_digest(sig, link_signature(secret, approval_id)):
            await approvals.decide(
                approve=False,
                by=actor(request, None),
                via="link",
                approval_id=approval_id,
                refuse="the link's signature is not valid",
            )
            return render_page(
                request, "missing.html", status=403, what="approval link", ident=approval_id
            )
    found = await gateway.store.approval(approval_id)
    if found is None:
        return render_page(request, "missing.html", status=404, what="approval", ident=approval_id)
    one = Approval.of(found, arguments=approvals.show_arguments)
    pending = [one] if found.state == "pending" else []
    return render_page(
        request,
        "approvals.html",
        pending=pending,
        decided=[] if pending else [one],
        single=True,
        nav="approvals",
    )


@post("/approvals/{approval_id:str}/approve", opt=requires("operate", audit="approve"))
async def approve_page(request: Request[Any, Any, Any], approval_id: str, data: Form) -> Redirect:
    return await _decide(request, approval_id, True)


@post("/approvals/{approval_id:str}/deny", opt=requires("operate", audit="deny"))
async def deny_page(request: Request[Any, Any, Any], approval_id: str, data: Form) -> Redirect:
    return await _decide(request, approval_id, False)
