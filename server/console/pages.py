"""The console's pages and actions: one handler per page, thin, built on the admin API.

Pages read through the same store listings, filters and typed models as `/api/...` (`admin`,
`admin_query`, `admin_models`), and the actions call the same functions as the API's retry and
replay routes (`admin_recover`, `admin_replay`): the console has no second source of truth.
`console_router()` returns the routes under `/ui`; a `before_request` hook authenticates every
request but the login page and static files (an unauthenticated page view is redirected to the
login form) and checks the CSRF token of every POST; an `after_request` hook sets the security
headers. With no gateway token configured, every console URL answers 403.
"""

from __future__ import annotations

import datetime as dt
import time
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode, urlsplit

from litestar import Request, Response, Router, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router

from hookwise.engine.errors import RequestError
from hookwise.engine.request import InboundRequest
from hookwise.server.admin_models import (
    Delivery,
    Event,
    Heartbeat,
    RequestEntry,
    Retry,
    Run,
    Session,
    SessionTurn,
)
from hookwise.server.admin_query import DELIVERY_STATES, RUN_STATES, filters
from hookwise.server.admin_recover import RetryFilter, actor, retry_bulk, retry_one
from hookwise.server.admin_replay import replay_request
from hookwise.server.auth import AuthThrottle, SharedAuthThrottle, client_key
from hookwise.server.console import STATIC
from hookwise.server.console.activity import overview_activity
from hookwise.server.console.auth import COOKIE, SESSION_SECONDS, ConsoleAuth, Viewer
from hookwise.server.console.headers import secure_headers
from hookwise.server.store.listing import Filters

PAGE = 50
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


def _gateway(request: Request[Any, Any, Any]) -> Any:
    return request.app.state.gateway


def _auth(request: Request[Any, Any, Any]) -> ConsoleAuth | None:
    return request.app.state.console_auth


def _viewer(request: Request[Any, Any, Any]) -> Viewer | None:
    return request.scope.get("state", {}).get("console_viewer")


def _page(
    request: Request[Any, Any, Any], name: str, status: int = 200, **context: Any
) -> Template:
    auth, viewer = _auth(request), _viewer(request)
    context.setdefault("nav", name.split(".")[0].split("_")[0])
    context.setdefault("notice", request.query_params.get("notice"))
    context["csrf"] = auth.csrf_token(viewer) if auth and viewer else ""
    context["viewer"] = viewer
    return Template(template_name=name, context=context, status_code=status)


def _safe_next(target: str | None) -> str:
    """Only a console path of this site (never another origin) is a place to go after login."""
    if not target:
        return "/ui/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui/") or "\\" in target:
        return "/ui/"
    return target


def _back(path: str, notice: str) -> Redirect:
    """After an action: back to a page (POST, redirect, GET), with a one-line notice."""
    return Redirect(path=f"{path}?{urlencode({'notice': notice})}", status_code=303)


async def _before(request: Request[Any, Any, Any]) -> Response[Any] | None:
    auth = _auth(request)
    if auth is None:
        html = request.app.template_engine.get_template("disabled.html").render(
            nav=None, csrf="", viewer=None, notice=None
        )
        return Response(html, status_code=403, media_type="text/html")
    path = request.url.path
    if path == "/ui/login" or path.startswith("/ui/static/"):
        return None
    viewer = auth.viewer(request)
    if viewer is None:
        browser = "hx-request" not in request.headers and "authorization" not in request.headers
        if request.method == "GET" and browser:
            query = request.url.query
            target = quote(path + ("?" + query if query else ""), safe="")
            return Redirect(path=f"/ui/login?next={target}", status_code=303)  # type: ignore[return-value]
        return Response(
            {"ok": False, "error": "log in to the console first", "code": "unauthorized"},
            status_code=401,
        )
    request.scope.setdefault("state", {})["console_viewer"] = viewer
    if request.method == "POST":
        presented = request.headers.get("x-csrf-token")
        if presented is None:
            form = await request.form()
            value = form.get("csrf")
            presented = value if isinstance(value, str) else None
        if not auth.csrf_ok(viewer, presented):
            return Response(
                {
                    "ok": False,
                    "error": "the form has expired or did not come from this console; reload it",
                    "code": "csrf_failed",
                },
                status_code=403,
            )
    return None


async def _refused(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A refusal from the shared admin functions (404, 409, 422...) as a console page."""
    assert isinstance(exc, RequestError)
    html = request.app.template_engine.get_template("refused.html").render(
        nav=None, csrf="", viewer=_viewer(request), notice=None, error=exc
    )
    return Response(html, status_code=exc.status, media_type="text/html")


# -------------------------------------------------------------------------------- login


@get("/login", sync_to_thread=False)
def login_form(request: Request[Any, Any, Any]) -> Template:
    return _page(
        request, "login.html", next=_safe_next(request.query_params.get("next")), error=None
    )


@post("/login")
async def login(request: Request[Any, Any, Any], data: Form) -> Response[Any] | Template:
    auth = _auth(request)
    assert auth is not None
    throttle: AuthThrottle | SharedAuthThrottle = request.app.state.console_throttle
    # its own bucket: console logins and hook tokens lock out separately
    client = "ui:" + client_key(request.client.host if request.client else None)
    target = _safe_next(data.get("next"))
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        error = "This form must be sent from the console itself."
        return _page(request, "login.html", status=403, next=target, error=error)
    if await throttle.locked_for(client) is not None:
        error = "Too many wrong tokens: wait a minute and try again."
        return _page(request, "login.html", status=429, next=target, error=error)
    if not auth.token_matches(data.get("token", "")):
        await throttle.record_failure(client)
        error = "That is not the gateway token."
        return _page(request, "login.html", status=401, next=target, error=error)
    await throttle.record_success(client)
    _, cookie = auth.new_session()
    response: Response[Any] = Redirect(path=target, status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=SESSION_SECONDS,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@post("/logout")
async def logout(request: Request[Any, Any, Any]) -> Response[Any]:
    response: Response[Any] = Redirect(path="/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


# -------------------------------------------------------------------------------- overview


@get("/")
async def overview(request: Request[Any, Any, Any]) -> Template:
    gw = _gateway(request)
    store = gw.store
    now = time.time()
    failed = await store.admin_list("runs", Filters({"state": "failed"}), limit=10, cursor=None)
    beats = await store.admin_list("heartbeats", Filters(), limit=100, cursor=None)
    agents = []
    for agent in gw.runtime.roster.agents:
        last = next((h for h in beats.items if h.agent_id == agent.id), None)
        agents.append({"agent": agent, "heartbeat": Heartbeat.of(last) if last else None})
    return _page(
        request,
        "overview.html",
        activity=await overview_activity(store, now),
        queues=await store.queue_stats(now=now),
        failed=[Run.of(r) for r in failed.items],
        agents=agents,
        channels=sorted(gw.channels) if isinstance(gw.channels, dict) else [],
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
    found = _filters(
        problems,
        form,
        rule=form["rule"] or None,
        status=int(status) if status and status.isdigit() else None,
        path=form["path"] or None,
    )
    if status and not status.isdigit():
        problems.append("status must be a number such as 202 or 401")
    page = await _gateway(request).store.admin_list(
        "requests", found, limit=PAGE, cursor=_cursor(q.get("cursor"))
    )
    items = [RequestEntry.of(e) for e in page.items]
    partial = q.get("partial") == "rows"
    return _page(
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
    store = _gateway(request).store
    entry = await store.get_request(request_id)
    if entry is None:
        return _page(request, "missing.html", status=404, what="request", ident=request_id)
    kept = await store.get_payload(request_id)
    body = None
    if kept is not None:
        body = kept.body.decode("utf-8", "replace")
    return _page(
        request,
        "request.html",
        entry=RequestEntry.of(entry),
        kept=kept,
        body=body,
        replay=None,
        nav="requests",
    )


@post("/requests/{request_id:str}/replay")
async def replay_page(
    request: Request[Any, Any, Any], request_id: str, data: Form
) -> Template | Redirect:
    dry_run = data.get("dryRun") == "true"
    result = await replay_request(_gateway(request), request_id, dry_run=dry_run)
    if dry_run:
        store = _gateway(request).store
        entry = await store.get_request(request_id)
        kept = await store.get_payload(request_id)
        return _page(
            request,
            "request.html",
            entry=RequestEntry.of(entry) if entry else None,
            kept=kept,
            body=kept.body.decode("utf-8", "replace") if kept else None,
            replay=result,
            nav="requests",
        )
    return _back(
        f"/ui/requests/{result.request_id}", f"Replayed as a new request ({result.status})."
    )


@post("/requests/{request_id:str}/payload/delete")
async def forget_page(request: Request[Any, Any, Any], request_id: str) -> Redirect:
    if not await _gateway(request).store.delete_payload(request_id):
        raise RequestError(404, "payload_not_found", "no payload is kept for this request")
    return _back(f"/ui/requests/{request_id}", "The kept payload is deleted.")


# -------------------------------------------------------------------------------- runs


@get("/runs")
async def runs_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    form = {k: q.get(k) or "" for k in ("state", "agent", "rule", "session", "since", "until")}
    problems: list[str] = []
    state = form["state"] if form["state"] in RUN_STATES else None
    found = _filters(
        problems,
        form,
        state=state,
        agent=form["agent"] or None,
        rule=form["rule"] or None,
        session=form["session"] or None,
    )
    page = await _gateway(request).store.admin_list(
        "runs", found, limit=PAGE, cursor=_cursor(q.get("cursor"))
    )
    return _page(
        request,
        "runs.html",
        items=[Run.of(r) for r in page.items],
        next_cursor=page.next_cursor,
        form=form,
        states=RUN_STATES,
        agents=[a.id for a in _gateway(request).runtime.roster.agents],
        problems=problems,
        query=urlencode({k: v for k, v in form.items() if v}),
    )


@get("/runs/{run_id:str}")
async def run_page(request: Request[Any, Any, Any], run_id: str) -> Template:
    store = _gateway(request).store
    record = await store.get_run(run_id)
    if record is None:
        return _page(request, "missing.html", status=404, what="run", ident=run_id)
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
    return _page(
        request,
        "run.html",
        run=Run.of(record),
        deliveries=[Delivery.of(d) for d in deliveries.items],
        attempts=attempts,
        retries=[Retry.of(r) for r in retries],
        turns=mine,
        summary=Event.of(summary.items[0]) if summary.items else None,
        nav="runs",
    )


@post("/runs/{run_id:str}/retry")
async def retry_run_page(request: Request[Any, Any, Any], run_id: str) -> Redirect:
    await retry_one(_gateway(request), "run", run_id, actor(request, "console"))
    return _back(f"/ui/runs/{run_id}", "The run is queued again.")


# -------------------------------------------------------------------------------- deliveries


@get("/deliveries")
async def deliveries_page(request: Request[Any, Any, Any]) -> Template:
    q = request.query_params
    form = {k: q.get(k) or "" for k in ("state", "channel", "since", "until")}
    problems: list[str] = []
    state = form["state"] if form["state"] in DELIVERY_STATES else None
    found = _filters(problems, form, state=state, channel=form["channel"] or None)
    page = await _gateway(request).store.admin_list(
        "deliveries", found, limit=PAGE, cursor=_cursor(q.get("cursor"))
    )
    return _page(
        request,
        "deliveries.html",
        items=[Delivery.of(d) for d in page.items],
        next_cursor=page.next_cursor,
        form=form,
        states=DELIVERY_STATES,
        problems=problems,
        query=urlencode({k: v for k, v in form.items() if v}),
    )


@post("/deliveries/{delivery_id:str}/retry")
async def retry_delivery_page(
    request: Request[Any, Any, Any], delivery_id: str, data: Form
) -> Redirect:
    await retry_one(_gateway(request), "delivery", delivery_id, actor(request, "console"))
    back = _safe_next(data.get("back")) if data.get("back") else "/ui/deliveries"
    return _back(back.split("?", 1)[0], f"Delivery {delivery_id[-8:]} is pending again.")


@post("/deliveries/retry")
async def bulk_retry_page(request: Request[Any, Any, Any], data: Form) -> Template | Redirect:
    """Bulk retry of the failed deliveries the filter picks: first a confirmation with the count
    (a dry run), then, with `confirm`, the retry itself."""
    channel = data.get("channel") or None
    problems: list[str] = []
    retry = RetryFilter(
        channel=channel,
        since=_time(data.get("since"), "since", problems),
        until=_time(data.get("until"), "until", problems),
        dry_run=data.get("confirm") != "yes",
    )
    if problems:
        raise RequestError(400, "invalid_body", "; ".join(problems))
    counted = await retry_bulk(_gateway(request), "delivery", retry, actor(request, "console"))
    if retry.dry_run:
        return _page(
            request,
            "bulk_retry.html",
            count=counted.count,
            form={k: data.get(k, "") for k in ("channel", "since", "until")},
            nav="deliveries",
        )
    return _back("/ui/deliveries", f"{counted.count} failed deliveries are pending again.")


# -------------------------------------------------------------------------------- sessions


@get("/sessions")
async def sessions_page(request: Request[Any, Any, Any]) -> Template:
    gw = _gateway(request)
    page = await gw.store.list_sessions(limit=PAGE * 2, cursor=_text_cursor(request))
    mains = {a.main_session: a.id for a in gw.runtime.roster.agents}
    return _page(
        request,
        "sessions.html",
        mains=mains,
        sessions=[Session.of(s) for s in page.items if s.session_key not in mains],
        next_cursor=page.next_cursor,
    )


@get("/sessions/{key:str}")
async def session_page(request: Request[Any, Any, Any], key: str) -> Template:
    store = _gateway(request).store
    cursor = _cursor(request.query_params.get("cursor"))
    turns = await store.admin_list(
        "turns", Filters({"session_key": key}), limit=PAGE, cursor=cursor
    )
    events = await store.admin_list("events", Filters({"session": key}), limit=PAGE, cursor=None)
    return _page(
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
    return _page(request, "rules.html", rules=_rules(request), report=None, form=blank)


@post("/rules/test")
async def rules_test(request: Request[Any, Any, Any], data: Form) -> Template:
    from hookwise.server.payload import parse_payload
    from hookwise.server.rules_cli import explain_with_validation_async

    gw = _gateway(request)
    form = {k: data.get(k, "") for k in ("path", "headers", "query", "payload")}
    problems: list[str] = []
    headers = _pairs(form["headers"], ":", "header", problems, lower=True)
    query = _pairs(form["query"], "=", "query parameter", problems)
    body = form["payload"].encode("utf-8")
    payload: Any = None
    try:
        ctype = headers.get("content-type", "application/json").split(";", 1)[0].strip().lower()
        payload = parse_payload(body, ctype.encode("latin-1"), arrays=True)
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
        policy = gw.hooks.settings.policy if gw.hooks else None
        report = await explain_with_validation_async(gw.rules, inbound, policy)
    return _page(
        request, "rules.html", rules=_rules(request), report=report, problems=problems, form=form
    )


# -------------------------------------------------------------------------------- helpers


def _rules(request: Request[Any, Any, Any]) -> list[Any]:
    ruleset = _gateway(request).rules
    return list(ruleset.rules) if ruleset is not None else []


def _cursor(cursor: str | None) -> str | None:
    if cursor is None or not cursor.isdigit() or len(cursor) > 18:
        return None
    return cursor


def _text_cursor(request: Request[Any, Any, Any]) -> str | None:
    cursor = request.query_params.get("cursor")
    return cursor if cursor and len(cursor) <= 512 else None


def _time(value: str | None, name: str, problems: list[str]) -> dt.datetime | None:
    """A time from a form (`2026-11-24T23:00`, UTC when no offset), or None when empty."""
    if not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        problems.append(f"{name} is not a time such as 2026-11-24T23:00")
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _filters(problems: list[str], form: Any, **equal: Any) -> Filters:
    since = _time(form.get("since"), "since", problems)
    until = _time(form.get("until"), "until", problems)
    try:
        return filters(since, until, **equal)
    except RequestError as e:
        problems.append(e.message)
        return filters(None, None, **equal)


def _pairs(
    text: str, sep: str, what: str, problems: list[str], *, lower: bool = False
) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, found, value = line.partition(sep)
        if not found or not key.strip():
            problems.append(f"{what} line {line[:40]!r} is not NAME{sep}VALUE")
            continue
        out[key.strip().lower() if lower else key.strip()] = value.strip()
    return out


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
            static,
        ],
        before_request=_before,
        after_request=secure_headers,
        exception_handlers={RequestError: _refused},
        include_in_schema=False,
    )
