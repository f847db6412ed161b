"""The Litestar application: routes, the hook mount, error handlers and the lifespan.

`create_app(gateway)` mounts the hook endpoint at the configured hook path (only when hooks are
enabled: otherwise no hook route exists and the path answers 404), serves `GET /healthz`,
`GET /readyz`, `GET /metrics` (see `operate`), the admin API and the web console (`/ui/`), and
ties the gateway's start-up and shutdown to Litestar's lifespan.

The hook endpoint is a complete ASGI application that owns its errors (the one JSON error shape)
and needs nothing from Litestar's routing, middleware or exception handlers, so requests under
the hook path go to it first, without passing through them (the hot path; a request elsewhere,
and the bare hook path's neighbours, take Litestar's way as before).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from litestar import Litestar, asgi, get
from litestar.datastructures import State
from litestar.types import Receive, Scope, Send

from . import metrics, telemetry
from .admin.alerts import AlertsController
from .admin.api import AdminController
from .admin.approvals import ApprovalsController
from .admin.audit import AuditController, AuditMiddleware
from .admin.budgets import BudgetsController
from .admin.control import ControlController
from .admin.lanes import LanesController
from .admin.openapi import assets_router, openapi_config
from .admin.operate import metrics_handler, readyz
from .admin.recover import RecoverController
from .admin.replay import ReplayController
from .admin.scopes import TokenTable
from .admin.sources import SourcesController
from .channels.approvals import slack_interaction, telegram_callback
from .console import template_config
from .console.auth import ConsoleAuth
from .console.pages import console_router
from .errors import EXCEPTION_HANDLERS
from .ingress.auth import AuthThrottle, SharedAuthThrottle, lockout_throttle
from .ingress.hooks import HookEndpoint
from .lifecycle.gateway import Gateway


@get("/healthz", sync_to_thread=False)
def healthz() -> dict[str, Any]:
    return {"ok": True}


class _HooksFirst(Litestar):
    """Litestar, with requests under the hook path handed straight to the hook endpoint."""

    hook_path: str = ""
    hook_endpoint: HookEndpoint | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.hook_endpoint is not None and scope["type"] == "http":
            path: str = scope["path"]
            if path.startswith(self.hook_path) and (
                len(path) == len(self.hook_path) or path[len(self.hook_path)] == "/"
            ):
                await self.hook_endpoint(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _console_throttle(gateway: Gateway) -> AuthThrottle | SharedAuthThrottle:
    """The console login's lock-out: kept in the store when several processes share it (as the
    hook endpoint's is), so `--workers N` does not give a guesser N times the tries."""
    store = gateway.store if gateway.shared else None
    return lockout_throttle(store, max_failures=10, window=60.0, lockout=60.0)


def create_app(gateway: Gateway) -> Litestar:
    handlers: list[Any] = [
        healthz,
        readyz,
        AdminController,
        RecoverController,
        AlertsController,
        LanesController,
        BudgetsController,
        ApprovalsController,
        telegram_callback,
        slack_interaction,
        ReplayController,
        SourcesController,
        AuditController,
        ControlController,
        console_router(),
        assets_router(),
    ]
    observed = gateway.config.gateway.metrics
    if observed.enabled:
        handlers.append(metrics_handler(observed.public))
    if gateway.hooks is not None:
        endpoint = gateway.hooks

        @asgi(gateway.config.hooks.path, is_mount=True, copy_scope=False, include_in_schema=False)
        async def hooks(scope: Scope, receive: Receive, send: Send) -> None:
            await endpoint(scope, receive, send)

        handlers.append(hooks)

    @contextlib.asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        started = False
        telemetry.start(gateway.config.telemetry.traces)  # off by default (docs/tracing.md)
        try:
            async with gateway.running():
                started = True
                yield
        except Exception as e:
            if not started:  # for `hookwise serve`'s one-line start-up error
                gateway.startup_error = e
            raise
        finally:
            telemetry.shutdown()  # after the runs and deliveries stopped: their spans are sent

    tokens = TokenTable.of(gateway.config.gateway.auth)
    app = _HooksFirst(
        route_handlers=handlers,
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        middleware=[AuditMiddleware()],
        lifespan=[lifespan],
        state=State(
            {
                "gateway": gateway,
                "admin_tokens": tokens,
                "console_auth": ConsoleAuth(tokens) if tokens else None,
                "console_throttle": _console_throttle(gateway),
            }
        ),
        template_config=template_config(),
        openapi_config=openapi_config(),
        logging_config=None,
        debug=False,
    )
    if observed.enabled:
        metrics.enable()
        app.asgi_handler = metrics.HttpMetrics(app.asgi_handler)
    if gateway.hooks is not None:
        app.hook_path = gateway.config.hooks.path.rstrip("/")
        # requests under the hook path go straight to the endpoint, which counts them itself
        app.hook_endpoint = gateway.hooks
    return app
