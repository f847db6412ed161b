"""The Litestar application: routes, the hook mount, error handlers and the lifespan.

`create_app(gateway)` mounts the hook endpoint at the configured hook path (only when hooks are
enabled: otherwise no hook route exists and the path answers 404), serves `GET /healthz`, `GET /readyz`, `GET /metrics` (see `operate`) and the
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
from hookwise.server.auth import TokenCheck
from hookwise.server.errors import EXCEPTION_HANDLERS
from hookwise.server.gateway import Gateway
from hookwise.server.operate import metrics_handler, readyz


@get("/healthz", sync_to_thread=False)
def healthz() -> dict[str, Any]:
    return {"ok": True}


def create_app(gateway: Gateway) -> Litestar:
    handlers: list[Any] = [healthz, readyz, AdminController]
    observed = gateway.config.gateway.metrics
    if observed.enabled:
        handlers.append(metrics_handler(observed.public))
    if gateway.hooks is not None:
        endpoint = gateway.hooks

        @asgi(gateway.config.hooks.path, is_mount=True, copy_scope=False)
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
    app = Litestar(
        route_handlers=handlers,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=[lifespan],
        state=State({"gateway": gateway, "admin_token": TokenCheck(token) if token else None}),
        openapi_config=None,
        logging_config=None,
        debug=False,
    )
    if observed.enabled:
        from hookwise.server import metrics

        metrics.enable()
        app.asgi_handler = metrics.HttpMetrics(
            app.asgi_handler, gateway.config.hooks.path if gateway.hooks else None
        )
    return app
