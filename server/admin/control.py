"""Changing what the gateway runs through the admin API: `POST /api/reload` (the `admin` scope).

A reload compiles the rules from the config file again and swaps them in, as `SIGHUP` and
`serve --watch` do (`Gateway.reload_async`): `200 {"ok": true, "reloaded": true}`, or `422
reload_failed` when the new rules do not compile (the current ones stay; the log says why).
Audited as `reload`.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, post

from ...engine.errors import RequestError
from .api import admin_guard
from .models import Answer
from .scopes import requires


class Reloaded(Answer, kw_only=True):
    reloaded: bool = True


class ControlController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["control"]
    security = [{"bearer": []}]

    @post(
        "/reload",
        status_code=200,
        summary="Compile the rules from the config file again and swap them in",
        opt=requires("admin", audit="reload"),
    )
    async def reload(self, request: Request[Any, Any, Any]) -> Reloaded:
        gateway = request.app.state.gateway
        if gateway.hooks is None:
            raise RequestError(409, "hooks_disabled", "hooks are disabled: there are no rules")
        if not await gateway.reload_async():
            raise RequestError(
                422,
                "reload_failed",
                "the rules from the config file do not compile; the current ones stay (see the log)",
            )
        return Reloaded()
