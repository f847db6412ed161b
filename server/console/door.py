"""Who may see the console: the login form and its throttle, logout, the check every request
passes (a session cookie, and a CSRF token on every POST; a page view without a session goes to
the login form; a route beyond the viewer's scopes is `403 insufficient_scope`, as in the admin
API: `admin.scopes`), and the admin functions' refusals shown as pages. Logins (each attempt)
and logouts are audited (`admin.audit`).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote, urlsplit

from litestar import Request, Response, get, post
from litestar.response import Redirect, Template

from ...engine.errors import RequestError
from ..admin.audit import note_code
from ..admin.scopes import check_scope, required_scope, requires, set_principal
from ..ingress.auth import AuthThrottle, SharedAuthThrottle, client_key
from ..store.bounded import within_store_wait
from .auth import COOKIE, SESSION_SECONDS
from .common import (
    Form,
    auth_of,
    render_page,
    viewer_of,
)


def safe_next(target: str | None) -> str:
    """Only a console path of this site (never another origin) is a place to go after login."""
    if not target:
        return "/ui/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/ui/") or "\\" in target:
        return "/ui/"
    return target


def _template(request: Request[Any, Any, Any], name: str) -> Any:
    engine = request.app.template_engine
    assert engine is not None  # the console's app is made with its templates
    return engine.get_template(name)


async def check_request(request: Request[Any, Any, Any]) -> Response[Any] | None:
    auth = auth_of(request)
    if auth is None:
        html = _template(request, "disabled.html").render(
            nav=None, csrf="", viewer=None, notice=None
        )
        return Response(html, status_code=403, media_type="text/html")
    path = request.url.path
    if path == "/ui/login" or path.startswith("/ui/static/"):
        return None
    viewer = auth.viewer(request)
    if viewer is not None and viewer.session_id is not None:
        store = request.app.state.gateway.store
        if await within_store_wait(store.console_session_ended(viewer.session_id)):
            viewer = None  # logged out: the cookie is no session any more
    if viewer is None:
        browser = "hx-request" not in request.headers and "authorization" not in request.headers
        if request.method == "GET" and browser:
            query = request.url.query
            target = quote(path + ("?" + query if query else ""), safe="")
            return Redirect(path=f"/ui/login?next={target}", status_code=303)
        return Response(
            {"ok": False, "error": "log in to the console first", "code": "unauthorized"},
            status_code=401,
        )
    request.scope.setdefault("state", {})["console_viewer"] = viewer
    set_principal(request.scope, viewer.principal)  # type: ignore[arg-type]
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
    handler = request.route_handler
    check_scope(viewer.principal, required_scope(handler.opt, handler.http_methods))
    return None


def refused_page(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A refusal from the shared admin functions (404, 409, 422...) as a console page. Plain
    `def`: Litestar calls exception handlers without awaiting them (an `async` one was a 500)."""
    assert isinstance(exc, RequestError)
    note_code(request.scope, exc.code)
    html = _template(request, "refused.html").render(
        nav=None, csrf="", viewer=viewer_of(request), notice=None, error=exc
    )
    return Response(html, status_code=exc.status, media_type="text/html")


# -------------------------------------------------------------------------------- login


@get("/login", sync_to_thread=False)
def login_form(request: Request[Any, Any, Any]) -> Template:
    return render_page(
        request, "login.html", next=safe_next(request.query_params.get("next")), error=None
    )


@post("/login", opt={"audit": "login"})
async def login(request: Request[Any, Any, Any], data: Form) -> Response[Any] | Template:
    auth = auth_of(request)
    assert auth is not None
    throttle: AuthThrottle | SharedAuthThrottle = request.app.state.console_throttle
    # its own bucket: console logins and hook tokens lock out separately
    client = "ui:" + client_key(request.client.host if request.client else None)
    target = safe_next(data.get("next"))
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        error = "This form must be sent from the console itself."
        note_code(request.scope, "cross_origin")
        return render_page(request, "login.html", status=403, next=target, error=error)
    if await throttle.locked_for(client) is not None:
        error = "Too many wrong tokens: wait a minute and try again."
        note_code(request.scope, "locked_out")
        return render_page(request, "login.html", status=429, next=target, error=error)
    principal = auth.match(data.get("token", ""))
    if principal is None:
        await throttle.record_failure(client)
        error = "That is not an admin token of this gateway."
        note_code(request.scope, "unauthorized")
        return render_page(request, "login.html", status=401, next=target, error=error)
    await throttle.record_success(client)
    set_principal(request.scope, principal)  # type: ignore[arg-type]
    _, cookie = auth.new_session(principal)
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


@post("/logout", opt=requires("read", audit="logout"))
async def logout(request: Request[Any, Any, Any]) -> Response[Any]:
    """End the session for good (every process sees it: the store keeps ended sessions), not
    only the browser's cookie: a copy of the cookie is no session any more."""
    viewer = viewer_of(request)
    if viewer is not None and viewer.session_id is not None:
        await within_store_wait(
            request.app.state.gateway.store.end_console_session(viewer.session_id, now=time.time())
        )
    response: Response[Any] = Redirect(path="/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response
