"""The console's pages and actions: one handler per page, thin, built on the admin API.

Pages read through the same store listings, filters and typed models as `/api/...` (`admin`,
`admin_query`, `admin_models`), and the actions call the same functions as the API's retry and
replay routes (`admin_recover`, `admin_replay`): the console has no second source of truth.
`console_router()` returns the routes under `/ui`, guarded by `console.door` (login, the session
and CSRF check of every request, refusals as pages) and sent with the security headers of
`console.headers`; what the pages share (rendering, forms) is in `console.common`. With no
gateway token configured, every console URL answers 403.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from litestar import Request, Router, get, post
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router

from ...engine.errors import RequestError
from ...engine.request import InboundRequest
from ..admin.audit import note
from ..admin.models import (
    Approval,
    Breaker,
    Delivery,
    Event,
    Heartbeat,
    ModelCall,
    Replayed,
    RequestEntry,
    Retry,
    Run,
    Session,
    SessionTurn,
    ToolCall,
)
from ..admin.operate import in_flight
from ..admin.query import DELIVERY_STATES, RUN_STATES, key_in_path
from ..admin.recover import RetryFilter, actor, retry_bulk, retry_one
from ..admin.replay import replay_request
from ..admin.scopes import requires
from ..store.records import Filters
from . import STATIC
from .activity import overview_activity
from .alerts import ack_alert_page, alert_page, alerts_page, retry_alert_page
from .approvals import approval_page, approvals_page, approve_page, deny_page
from .audit import audit_page
from .common import (
    PAGE,
    Form,
    back_to,
    form_filters,
    form_pairs,
    form_time,
    gateway_of,
    paths_of,
    render_page,
    rules_of,
    seq_cursor,
    text_cursor,
)
from .door import (
    check_request,
    login,
    login_form,
    logout,
    refused_page,
    safe_next,
)
from .headers import secure_headers
from .queues import (
    budget_raise_page,
    budget_release_page,
    pause_page,
    queues_page,
    resume_page,
)

# -------------------------------------------------------------------------------- overview


@get("/")
async def overview(request: Request[Any, Any, Any]) -> Template:
    gw = gateway_of(request)
    store = gw.store
    now = time.time()
    failed = await store.admin_list("runs", Filters({"state": "failed"}), limit=10, cursor=None)
    beats = await store.admin_list("heartbeats", Filters(), limit=100, cursor=None)
    now_running = await in_flight(gw, now)
    agents = []
    for agent in gw.runtime.roster.agents:
        last = next((h for h in beats.items if h.agent_id == agent.id), None)
        running, oldest = now_running.running.get(agent.id, (0, None))
        agents.append(
            {
                "agent": agent,
                "heartbeat": Heartbeat.of(last) if last else None,
                "running": running,
                "oldest": oldest,
                "pending": now_running.pending_events.get(agent.main_session, 0),
            }
        )
    return render_page(
        request,
        "overview.html",
        activity=await overview_activity(store, now),
        queues=await store.queue_stats(now=now),
        failed=[Run.of(r) for r in failed.items],
        agents=agents,
        channels=sorted(gw.channels) if isinstance(gw.channels, dict) else [],
        sources=gw.sources.states(),
        breakers=[Breaker.of(b, now) for b in await store.breakers()],
    )


# -------------------------------------------------------------------------------- requests


@get("/requests")
async def requests_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    status = q.get("status") or None
    form = {
        "rule": q.get("rule") or "",
        "status": status or "",
        "path": q.get("path") or "",
        "since": q.get("since") or "",
        "until": q.get("until") or "",
    }
    problems: list[str] = []
    found = form_filters(
        problems,
        form,
        rule=form["rule"] or None,
        status=int(status) if status and status.isdigit() else None,
        path=form["path"] or None,
    )
    if status and not status.isdigit():
        problems.append("status must be a number such as 202 or 401")
    page = await gateway_of(request).store.admin_list(
        "requests", found, limit=PAGE, cursor=seq_cursor(q.get("cursor"))
    )
    items = [RequestEntry.of(e) for e in page.items]
    partial = q.get("partial") == "rows"
    return render_page(
        request,
        "requests_rows.html" if partial else "requests.html",
        items=items,
        next_cursor=page.next_cursor,
        form=form,
        problems=problems,
        live=not q.get("cursor"),
        query=urlencode({k: v for k, v in form.items() if v}),
    )


@get("/requests/{request_id:str}")
async def request_page(request: Request[Any, Any, Any], request_id: str) -> Template:
    store = gateway_of(request).store
    entry = await store.get_request(request_id)
    if entry is None:
        return render_page(request, "missing.html", status=404, what="request", ident=request_id)
    kept = await store.get_payload(request_id)
    body = None
    if kept is not None:
        body = kept.body.decode("utf-8", "replace")
    return render_page(
        request,
        "request.html",
        entry=RequestEntry.of(entry),
        kept=kept,
        body=body,
        replay=None,
        nav="requests",
    )


@post("/requests/{request_id:str}/replay", opt=requires("operate", audit="replay"))
async def replay_page(
    request: Request[Any, Any, Any], request_id: str, data: Form
) -> Template | Redirect:
    dry_run = data.get("dryRun") == "true"
    note(request, dryRun=dry_run or None)
    result = await replay_request(gateway_of(request), request_id, dry_run=dry_run)
    if dry_run:
        store = gateway_of(request).store
        entry = await store.get_request(request_id)
        kept = await store.get_payload(request_id)
        return render_page(
            request,
            "request.html",
            entry=RequestEntry.of(entry) if entry else None,
            kept=kept,
            body=kept.body.decode("utf-8", "replace") if kept else None,
            replay=result,
            nav="requests",
        )
    assert isinstance(result, Replayed)  # not a dry run
    return back_to(
        f"/ui/requests/{result.request_id}", f"Replayed as a new request ({result.status})."
    )


@post("/requests/{request_id:str}/payload/delete", opt=requires("admin", audit="forget_payload"))
async def forget_page(request: Request[Any, Any, Any], request_id: str) -> Redirect:
    if not await gateway_of(request).store.delete_payload(request_id):
        raise RequestError(404, "payload_not_found", "no payload is kept for this request")
    return back_to(f"/ui/requests/{request_id}", "The kept payload is deleted.")


# -------------------------------------------------------------------------------- runs


@get("/runs")
async def runs_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    form = {k: q.get(k) or "" for k in ("state", "agent", "rule", "session", "since", "until")}
    problems: list[str] = []
    state = form["state"] if form["state"] in RUN_STATES else None
    found = form_filters(
        problems,
        form,
        state=state,
        agent=form["agent"] or None,
        rule=form["rule"] or None,
        session=form["session"] or None,
    )
    page = await gateway_of(request).store.admin_list(
        "runs", found, limit=PAGE, cursor=seq_cursor(q.get("cursor"))
    )
    return render_page(
        request,
        "runs.html",
        items=[Run.of(r) for r in page.items],
        next_cursor=page.next_cursor,
        form=form,
        states=RUN_STATES,
        agents=[a.id for a in gateway_of(request).runtime.roster.agents],
        problems=problems,
        query=urlencode({k: v for k, v in form.items() if v}),
    )


@get("/runs/{run_id:str}")
async def run_page(request: Request[Any, Any, Any], run_id: str) -> Template:
    store = gateway_of(request).store
    record = await store.get_run(run_id)
    if record is None:
        return render_page(request, "missing.html", status=404, what="run", ident=run_id)
    deliveries = await store.admin_list(
        "deliveries", Filters({"run_id": run_id}), limit=500, cursor=None
    )
    retries = await store.list_retries(run_id)
    turns = await store.admin_list(
        "turns", Filters({"session_key": record.session_key}), limit=200, cursor=None
    )
    mine = [SessionTurn.of(t) for t in reversed(turns.items) if t.run_id == run_id]
    summary = await store.admin_list(
        "events", Filters({"source": f"run:{run_id}"}), limit=1, cursor=None
    )
    attempts: dict[str, list[Any]] = {}
    for a in await store.delivery_attempts([d.delivery_id for d in deliveries.items]):
        attempts.setdefault(a.delivery_id, []).append(a)
    model_calls = await store.model_calls_of([run_id])
    return render_page(
        request,
        "run.html",
        run=Run.of(record, model_calls),
        model_calls=[ModelCall.of(c) for c in model_calls],
        deliveries=[Delivery.of(d) for d in deliveries.items],
        attempts=attempts,
        retries=[Retry.of(r) for r in retries],
        tool_calls=[ToolCall.of(c) for c in await store.tool_calls(run_id)],
        approvals=[Approval.of(a, arguments=False) for a in await store.approvals(run_id=run_id)],
        turns=mine,
        summary=Event.of(summary.items[0]) if summary.items else None,
        nav="runs",
    )


@post("/runs/{run_id:str}/retry", opt=requires("operate", audit="retry"))
async def retry_run_page(request: Request[Any, Any, Any], run_id: str) -> Redirect:
    await retry_one(gateway_of(request), "run", run_id, actor(request, None))
    return back_to(f"/ui/runs/{run_id}", "The run is queued again.")


# -------------------------------------------------------------------------------- deliveries


@get("/deliveries")
async def deliveries_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    form = {k: q.get(k) or "" for k in ("state", "channel", "since", "until")}
    problems: list[str] = []
    state = form["state"] if form["state"] in DELIVERY_STATES else None
    found = form_filters(problems, form, state=state, channel=form["channel"] or None)
    page = await gateway_of(request).store.admin_list(
        "deliveries", found, limit=PAGE, cursor=seq_cursor(q.get("cursor"))
    )
    return render_page(
        request,
        "deliveries.html",
        items=[Delivery.of(d) for d in page.items],
        next_cursor=page.next_cursor,
        form=form,
        states=DELIVERY_STATES,
        problems=problems,
        query=urlencode({k: v for k, v in form.items() if v}),
    )


@post("/deliveries/{delivery_id:str}/retry", opt=requires("operate", audit="retry"))
async def retry_delivery_page(
    request: Request[Any, Any, Any], delivery_id: str, data: Form
) -> Redirect:
    await retry_one(gateway_of(request), "delivery", delivery_id, actor(request, None))
    back = safe_next(data.get("back")) if data.get("back") else "/ui/deliveries"
    return back_to(back.split("?", 1)[0], f"Delivery {delivery_id[-8:]} is pending again.")


@post("/deliveries/retry", opt=requires("operate", audit="retry_bulk"))
async def bulk_retry_page(request: Request[Any, Any, Any], data: Form) -> Template | Redirect:
    """Bulk retry of the failed deliveries the filter picks: first a confirmation with the count
    (a dry run), then, with `confirm`, the retry itself."""
    channel = data.get("channel") or None
    problems: list[str] = []
    retry = RetryFilter(
        channel=channel,
        since=form_time(data.get("since"), "since", problems),
        until=form_time(data.get("until"), "until", problems),
        dry_run=data.get("confirm") != "yes",
    )
    if problems:
        raise RequestError(400, "invalid_body", "; ".join(problems))
    note(request, kind="delivery", channel=channel, dryRun=retry.dry_run or None)
    counted = await retry_bulk(gateway_of(request), "delivery", retry, actor(request, None))
    if retry.dry_run:
        return render_page(
            request,
            "bulk_retry.html",
            count=counted.count,
            form={k: data.get(k, "") for k in ("channel", "since", "until")},
            nav="deliveries",
        )
    return back_to("/ui/deliveries", f"{counted.count} failed deliveries are pending again.")


# -------------------------------------------------------------------------------- sessions


@get("/sessions")
async def sessions_page(request: Request[Any, Any, Any]) -> Template:
    gw = gateway_of(request)
    page = await gw.store.list_sessions(limit=PAGE * 2, cursor=text_cursor(request))
    mains = {a.main_session: a.id for a in gw.runtime.roster.agents}
    return render_page(
        request,
        "sessions.html",
        mains=mains,
        sessions=[Session.of(s) for s in page.items if s.session_key not in mains],
        next_cursor=page.next_cursor,
    )


@get("/sessions/{key:path}")
async def session_page(request: Request[Any, Any, Any], key: str) -> Template:
    key = key_in_path(request.scope, "/sessions/", key)  # keys hold `/`, `#`, spaces
    store = gateway_of(request).store
    cursor = seq_cursor(request.query_params.get("cursor"))
    turns = await store.admin_list(
        "turns", Filters({"session_key": key}), limit=PAGE, cursor=cursor
    )
    events = await store.admin_list("events", Filters({"session": key}), limit=PAGE, cursor=None)
    return render_page(
        request,
        "session.html",
        key=key,
        turns=[SessionTurn.of(t) for t in reversed(turns.items)],
        events=[Event.of(e) for e in events.items],
        next_cursor=turns.next_cursor,
        nav="sessions",
    )


# -------------------------------------------------------------------------------- rules


@get("/rules")
async def rules_page(request: Request[Any, Any, Any]) -> Template:
    blank = {"path": "", "headers": "", "query": "", "payload": "{}"}
    return render_page(
        request,
        "rules.html",
        rules=rules_of(request),
        paths=paths_of(request),
        report=None,
        form=blank,
    )


@post("/rules/test", opt={"scope": "read", "audit": False})
async def rules_test(request: Request[Any, Any, Any], data: Form) -> Template:
    from ..ingress.explain import explain_with_validation_async
    from ..ingress.payload import parse_payload

    gw = gateway_of(request)
    form = {k: data.get(k, "") for k in ("path", "headers", "query", "payload")}
    problems: list[str] = []
    headers = form_pairs(form["headers"], ":", "header", problems, lower=True)
    for name, value in headers.items():
        if not value.isascii() and not _latin1(value):
            problems.append(f"header {name}: an HTTP header holds Latin-1 text only")
    query = form_pairs(form["query"], "=", "query parameter", problems)
    body = form["payload"].encode("utf-8")
    payload: Any = None
    try:
        ctype = headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
        payload = parse_payload(body, ctype.encode("latin-1", "replace"), arrays=True)
    except RequestError as e:
        problems.append(f"payload: {e.message}")
    report = None
    if gw.rules is None:
        problems.append("hooks are disabled in this gateway's config: there are no rules")
    elif not problems:
        inbound = InboundRequest(
            path=form["path"].strip().strip("/"),
            payload=payload,
            headers=headers,
            query=query,
            raw_body=body,
            now=datetime.now(UTC),
        )
        assert gw.hooks is not None  # rules exist only where hooks are enabled
        report = await explain_with_validation_async(gw.rules, inbound, gw.hooks.settings.policy)
    return render_page(
        request,
        "rules.html",
        rules=rules_of(request),
        paths=paths_of(request),
        report=report,
        problems=problems,
        form=form,
    )


def _latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


def console_router() -> Router:
    """The console's routes under `/ui` (static files included)."""
    static = create_static_files_router(
        path="/static", directories=[STATIC], name="console-static", send_as_attachment=False
    )
    return Router(
        path="/ui",
        route_handlers=[
            login_form,
            login,
            logout,
            overview,
            requests_page,
            request_page,
            replay_page,
            forget_page,
            runs_page,
            run_page,
            retry_run_page,
            deliveries_page,
            retry_delivery_page,
            bulk_retry_page,
            sessions_page,
            session_page,
            rules_page,
            rules_test,
            queues_page,
            pause_page,
            resume_page,
            audit_page,
            budget_raise_page,
            budget_release_page,
            alerts_page,
            alert_page,
            ack_alert_page,
            retry_alert_page,
            approvals_page,
            approval_page,
            approve_page,
            deny_page,
            static,
        ],
        before_request=check_request,
        after_request=secure_headers,
        # sync: the exception middleware around a route with middleware (the audit's) calls it
        # without awaiting
        exception_handlers={RequestError: refused_page},
        include_in_schema=False,
    )
