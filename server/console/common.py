"""What every console page shares: the gateway and the viewer of a request, rendering a page
with its navigation, CSRF token and notice, the redirect back after an action, and the
parsing of the filter forms (times, cursors, NAME=VALUE lines) into the admin API's filters.
"""

from __future__ import annotations

import datetime as dt
from datetime import UTC
from typing import Annotated, Any
from urllib.parse import urlencode

from litestar import Request
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from ...engine.errors import RequestError
from ..admin.query import filters
from ..lifecycle.gateway import Gateway
from ..store.records import Filters
from .auth import ConsoleAuth, Viewer

PAGE = 50
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


def gateway_of(request: Request[Any, Any, Any]) -> Gateway:
    return request.app.state.gateway


def auth_of(request: Request[Any, Any, Any]) -> ConsoleAuth | None:
    return request.app.state.console_auth


def viewer_of(request: Request[Any, Any, Any]) -> Viewer | None:
    return request.scope.get("state", {}).get("console_viewer")


def render_page(
    request: Request[Any, Any, Any], name: str, status: int = 200, **context: Any
) -> Template:
    auth, viewer = auth_of(request), viewer_of(request)
    context.setdefault("nav", name.split(".")[0].split("_")[0])
    context.setdefault("notice", request.query_params.get("notice"))
    context["csrf"] = auth.csrf_token(viewer) if auth and viewer else ""
    context["viewer"] = viewer
    return Template(template_name=name, context=context, status_code=status)


def back_to(path: str, notice: str) -> Redirect:
    """After an action: back to a page (POST, redirect, GET), with a one-line notice."""
    return Redirect(path=f"{path}?{urlencode({'notice': notice})}", status_code=303)


def rules_of(request: Request[Any, Any, Any]) -> list[Any]:
    ruleset = gateway_of(request).rules
    return list(ruleset.rules) if ruleset is not None else []


def paths_of(request: Request[Any, Any, Any]) -> list[dict[str, Any]]:
    """Each mapped path of the rules: the signature block guarding it (its scheme, `auth`, and
    where it is written), and what it answers a request no rule matched."""
    ruleset = gateway_of(request).rules
    if ruleset is None:
        return []
    out = []
    for path in sorted({r.path for r in ruleset.rules if r.path is not None}):
        door = ruleset.door(path)
        out.append(
            {
                "path": path,
                "scheme": door.verifier.name if door else None,
                "auth": door.verifier.auth if door else "token",
                "where": (door.verifier.where if door else None),
                "checks": "every request" if door and door.checks_every_request else "its rule",
                "unmatched": ruleset.unmatched(path),
            }
        )
    return out


def seq_cursor(cursor: str | None) -> str | None:
    if cursor is None or not cursor.isdigit() or len(cursor) > 18:
        return None
    return cursor


def text_cursor(request: Request[Any, Any, Any]) -> str | None:
    cursor = request.query_params.get("cursor")
    return cursor if cursor and len(cursor) <= 512 else None


def form_time(value: str | None, name: str, problems: list[str]) -> dt.datetime | None:
    """A time from a form (`2026-11-24T23:00`, UTC when no offset), or None when empty."""
    if not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        problems.append(f"{name} is not a time such as 2026-11-24T23:00")
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def form_filters(problems: list[str], form: Any, **equal: Any) -> Filters:
    since = form_time(form.get("since"), "since", problems)
    until = form_time(form.get("until"), "until", problems)
    try:
        return filters(since, until, **equal)
    except RequestError as e:
        problems.append(e.message)
        return filters(None, None, **equal)


def form_pairs(
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
