"""The console's Alerts page: open, acknowledged and resolved alerts (a tab each), one alert with
the requests, runs and deliveries behind it, and its Acknowledge and Retry buttons (CSRF-checked
like every console form by `console.door`).

It reads and acts through the same functions as the admin API's `/api/alerts` routes
(`admin.alerts`): an acknowledgement or a retry is recorded as `console` from the client address.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, get, post
from litestar.response import Redirect, Template

from ..admin.alerts import ALERT_STATES, acknowledge, alert_detail, retry_behind
from ..admin.recover import actor
from ..admin.scopes import requires
from ..store.records import Filters
from .common import Form, back_to, gateway_of, render_page

PAGE = 50


@get("/alerts")
async def alerts_page(request: Request[Any, Any, Any]) -> Template:
    state = request.query_params.get("state") or "open"
    if state not in ALERT_STATES:
        state = "open"
    cursor = request.query_params.get("cursor")
    page = await gateway_of(request).store.admin_list(
        "alerts",
        Filters({"state": state}),
        limit=PAGE,
        cursor=cursor if cursor and cursor.isdigit() else None,
    )
    return render_page(
        request,
        "alerts.html",
        items=page.items,
        next_cursor=page.next_cursor,
        state=state,
        states=ALERT_STATES,
        query=f"state={state}",
    )


@get("/alerts/{alert_id:str}")
async def alert_page(request: Request[Any, Any, Any], alert_id: str) -> Template:
    detail = await alert_detail(gateway_of(request), alert_id)
    return render_page(request, "alert.html", alert=detail, nav="alerts")


@post("/alerts/{alert_id:str}/ack", opt=requires("operate", audit="acknowledge"))
async def ack_alert_page(request: Request[Any, Any, Any], alert_id: str, data: Form) -> Redirect:
    acked = await acknowledge(gateway_of(request), alert_id, actor(request, None))
    return back_to(f"/ui/alerts/{alert_id}", f"Alert {alert_id}: {acked.state}.")


@post("/alerts/{alert_id:str}/retry", opt=requires("operate", audit="retry_bulk"))
async def retry_alert_page(request: Request[Any, Any, Any], alert_id: str, data: Form) -> Redirect:
    done = await retry_behind(gateway_of(request), alert_id, actor(request, None))
    return back_to(
        f"/ui/alerts/{alert_id}",
        f"Queued again: {done.runs} run(s), {done.deliveries} delivery(ies);"
        f" {done.not_retryable} not retryable.",
    )
