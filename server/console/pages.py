"""The console's pages and actions: one handler per page, thin, reading through the store.

`console_router(gateway)` returns the Litestar router mounted at `/ui`. A `before_request` hook
authenticates every request but the login page and static files (an unauthenticated page view is
redirected to the login form) and checks the CSRF token of every POST; an `after_request` hook
sets the security headers. With no gateway token configured, every console URL answers 403.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response, Router, get, post
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router

from hookwise.engine.errors import RequestError
from hookwise.engine.request import InboundRequest
from hookwise.server.auth import AuthThrottle, client_key
from hookwise.server.console import STATIC
from hookwise.server.console.auth import COOKIE, SESSION_SECONDS, ConsoleAuth, Viewer
from hookwise.server.console.headers import secure_headers

PAGE = 50
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]
RUN_STATES = ("queued", "running", "succeeded", "failed", "timed_out")
DELIVERY_STATES = ("pending", "sent", "failed")
OPEN_PATHS = ("/ui/login", "/ui/static/")


def _gateway(request: Request[Any, Any, Any]) -> Any:
    return request.app.state.gateway


def _auth(request: Request[Any, Any, Any]) -> ConsoleAuth | None:
    return request.app.state.console_auth


def _viewer(request: Request[Any, Any, Any]) -> Viewer:
    viewer: Viewer = request.scope["state"]["console_viewer"]
    return viewer


def _page(
    request: Request[Any, Any, Any], name: str, status: int = 200, **context: Any
) -> Template:
    auth = _auth(request)
    viewer = request.scope.get("state", {}).get("console_viewer")
    context.setdefault("nav", name.split(".")[0])
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


async def _before(request: Request[Any, Any, Any]) -> Response[Any] | None:
    auth = _auth(request)
    if auth is None:
        html = request.app.template_engine.get_template("disabled.html").render(
            nav=None, csrf="", viewer=None
        )
        return Response(html, status_code=403, media_type="text/html")
    path = request.url.path
    if path == "/ui/login" or path.startswith("/ui/static/"):
        return None
    viewer = auth.viewer(request)
    if viewer is None:
        browser = "hx-request" not in request.headers and "authorization" not in request.headers
        if request.method == "GET" and browser:
            return Redirect(
                path=f"/ui/login?next={quote(path + ('?' + request.url.query if request.url.query else ''), safe='')}",
                status_code=303,
            )  # type: ignore[return-value]
        return Response(
            {"ok": False, "error": "log in to the console first", "code": "unauthorized"},
            status_code=401,
        )
    request.scope.setdefault("state", {})["console_viewer"] = viewer
    if request.method == "POST":
        presented = request.headers.get("x-csrf-token")
        if presented is None:
            form = await request.form()
            presented = form.get("csrf")
        if not auth.csrf_ok(viewer, presented if isinstance(presented, str) else None):
            return Response(
                {
                    "ok": False,
                    "error": "the form has expired or did not come from this console; reload the page",
                    "code": "csrf_failed",
                },
                status_code=403,
            )
    return None


# -------------------------------------------------------------------------------- login


@get("/login", sync_to_thread=False)
def login_form(request: Request[Any, Any, Any], next_path: str | None = None) -> Template:
    return _page(
        request, "login.html", next=_safe_next(request.query_params.get("next")), error=None
    )


@post("/login")
async def login(
    request: Request[Any, Any, Any],
    data: Form,
) -> Response[Any] | Template:
    auth = _auth(request)
    assert auth is not None
    throttle: AuthThrottle = request.app.state.console_throttle
    client = client_key(request.client.host if request.client else None)
    target = _safe_next(data.get("next"))
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        return _page(
            request,
            "login.html",
            status=403,
            next=target,
            error="This form must be sent from the console itself.",
        )
    if await throttle.locked_for(client) is not None:
        return _page(
            request,
            "login.html",
            status=429,
            next=target,
            error="Too many wrong tokens: wait a minute and try again.",
        )
    if not auth.token_matches(data.get("token", "")):
        await throttle.record_failure(client)
        return _page(
            request, "login.html", status=401, next=target, error="That is not the gateway token."
        )
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


# -------------------------------------------------------------------------------- pages


@get("/")
async def overview(request: Request[Any, Any, Any]) -> Template:
    gw = _gateway(request)
    store = gw.store
    runs = await store.list_runs(limit=PAGE, cursor=None, state=None)
    failed = await store.list_runs(limit=10, cursor=None, state="failed")
    heartbeats = await store.list_heartbeats(limit=5)
    return _page(
        request,
        "overview.html",
        runs=runs.items[:10],
        failed=failed.items,
        heartbeats=heartbeats,
        channels=sorted(gw.channels) if isinstance(gw.channels, dict) else [],
        now=time.time(),
    )


@get("/requests")
async def requests_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    page = await _gateway(request).store.request_log(limit=PAGE, cursor=_cursor(cursor))
    name = (
        "requests_rows.html" if request.query_params.get("partial") == "rows" else "requests.html"
    )
    return _page(request, name, items=page.items, next_cursor=page.next_cursor)


@get("/runs")
async def runs_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    state = _choice(request, "state", RUN_STATES)
    page = await _gateway(request).store.list_runs(limit=PAGE, cursor=_cursor(cursor), state=state)
    return _page(
        request,
        "runs.html",
        items=page.items,
        next_cursor=page.next_cursor,
        state=state,
        states=RUN_STATES,
    )


@get("/runs/{run_id:str}")
async def run_page(request: Request[Any, Any, Any], run_id: str) -> Template:
    store = _gateway(request).store
    run = await store.get_run(run_id)
    if run is None:
        return _page(request, "missing.html", status=404, what="run", ident=run_id)
    deliveries = await store.list_deliveries(limit=500, cursor=None, run_id=run_id)
    return _page(request, "run.html", run=run, deliveries=deliveries.items, nav="runs")


@get("/deliveries")
async def deliveries_page(request: Request[Any, Any, Any], cursor: str | None = None) -> Template:
    state = _choice(request, "state", DELIVERY_STATES)
    page = await _gateway(request).store.list_deliveries(
        limit=PAGE, cursor=_cursor(cursor), state=state
    )
    return _page(
        request,
        "deliveries.html",
        items=page.items,
        next_cursor=page.next_cursor,
        state=state,
        states=DELIVERY_STATES,
    )


@get("/sessions")
async def sessions_page(request: Request[Any, Any, Any]) -> Template:
    return _page(request, "sessions.html", sessions=["main"])


@get("/sessions/{key:str}")
async def session_page(
    request: Request[Any, Any, Any], key: str, cursor: str | None = None
) -> Template:
    store = _gateway(request).store
    turns = await store.session_turns(key, limit=200)
    events = await store.list_events(key, limit=PAGE, cursor=_cursor(cursor))
    return _page(
        request,
        "session.html",
        key=key,
        turns=turns,
        events=events.items,
        next_cursor=events.next_cursor,
        nav="sessions",
    )


@get("/rules")
async def rules_page(request: Request[Any, Any, Any]) -> Template:
    return _page(
        request,
        "rules.html",
        rules=_rules(request),
        report=None,
        form={"path": "", "headers": "", "query": "", "payload": "{}"},
    )


@post("/rules/test")
async def rules_test(
    request: Request[Any, Any, Any],
    data: Form,
) -> Template:
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
        payload = parse_payload(body, ctype.encode("latin-1"))
    except RequestError as e:
        problems.append(f"payload: {e.message}")
    report = None
    if not problems and gw.rules is not None:
        inbound = InboundRequest(
            path=form["path"].strip().strip("/"),
            payload=payload,
            headers=headers,
            query=query,
            raw_body=body,
            now=datetime.now(UTC),
        )
        report = await explain_with_validation_async(
            gw.rules, inbound, gw.hooks.settings.policy if gw.hooks else None
        )
    elif gw.rules is None:
        problems.append("hooks are disabled in this gateway's config: there are no rules")
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


def _choice(request: Request[Any, Any, Any], name: str, allowed: tuple[str, ...]) -> str | None:
    value = request.query_params.get(name) or None
    return value if value in allowed else None


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
            runs_page,
            run_page,
            deliveries_page,
            sessions_page,
            session_page,
            rules_page,
            rules_test,
            static,
        ],
        before_request=_before,
        after_request=secure_headers,
        include_in_schema=False,
    )
