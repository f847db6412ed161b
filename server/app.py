"""The Litestar application: routes, the hook mount, error handlers and the lifespan.

`create_app(gateway)` mounts the hook endpoint at the configured hook path (only when hooks are
enabled: otherwise no hook route exists and the path answers 404), serves `GET /healthz` and the
admin API, and ties the gateway's start-up and shutdown to Litestar's lifespan.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from litestar import Litestar, asgi, get
from litestar.datastructures import State
from litestar.types import Receive, Scope, Send

from hookwise.server.admin import AdminController
from hookwise.server.admin_recover import RecoverController
from hookwise.server.admin_replay import ReplayController
from hookwise.server.auth import TokenCheck
from hookwise.server.errors import EXCEPTION_HANDLERS
from hookwise.server.gateway import Gateway
from hookwise.server.openapi import openapi_config


@get("/healthz", sync_to_thread=False)
def healthz() -> dict[str, Any]:
    return {"ok": True}


def create_app(gateway: Gateway) -> Litestar:
    handlers: list[Any] = [healthz, AdminController, RecoverController, ReplayController]
    if gateway.hooks is not None:
        endpoint = gateway.hooks

        @asgi(gateway.config.hooks.path, is_mount=True, copy_scope=False, include_in_schema=False)
        async def hooks(scope: Scope, receive: Receive, send: Send) -> None:
            await endpoint(scope, receive, send)

        handlers.append(hooks)

    @contextlib.asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        started = False
        try:
            async with gateway.running():
                started = True
                yield
        except Exception as e:
            if not started:  # for `hookwise serve`'s one-line start-up error
                gateway.startup_error = e
            raise

    token = gateway.admin_token
    return Litestar(
        route_handlers=handlers,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=[lifespan],
        state=State({"gateway": gateway, "admin_token": TokenCheck(token) if token else None}),
        openapi_config=openapi_config(),
        logging_config=None,
        debug=False,
    )
