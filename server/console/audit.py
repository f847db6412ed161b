"""The console's Audit page: the audit log of operator actions, newest first, filtered by who,
what and outcome (`read` scope). It reads through the same listing and model as `GET /api/audit`
(`admin.audit`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, get
from litestar.response import Template

from ..admin.audit import AuditEntry
from ..store.audit import OUTCOMES
from .common import PAGE, form_filters, gateway_of, render_page, seq_cursor


@get("/audit")
async def audit_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    form = {k: (q.get(k) or "")[:512] for k in ("actor", "action", "outcome", "since", "until")}
    problems: list[str] = []
    outcome = form["outcome"] if form["outcome"] in OUTCOMES else None
    if form["outcome"] and outcome is None:
        problems.append(f"outcome must be one of: {', '.join(OUTCOMES)}")
    found = form_filters(
        problems,
        form,
        actor=form["actor"] or None,
        action=form["action"] or None,
        outcome=outcome,
    )
    page = await gateway_of(request).store.admin_list(
        "audit", found, limit=PAGE, cursor=seq_cursor(q.get("cursor"))
    )
    return render_page(
        request,
        "audit.html",
        items=[AuditEntry.of(r) for r in page.items],
        next_cursor=page.next_cursor,
        form=form,
        outcomes=OUTCOMES,
        problems=problems,
        query=urlencode({k: v for k, v in form.items() if v}),
    )
