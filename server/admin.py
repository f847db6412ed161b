"""The admin API: read-only views of events, runs and the request log, behind the gateway token.

`Authorization: Bearer <gateway.auth.token>`; without a configured gateway token the admin API is
disabled (403). Listings are newest first and paginated with an opaque `cursor`.
"""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, get
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler
from litestar.params import Parameter

from hookwise.engine.errors import RequestError
from hookwise.server.auth import TokenCheck

MAX_LIMIT = 500


def admin_guard(connection: ASGIConnection, _: BaseRouteHandler) -> None:
    check: TokenCheck | None = connection.app.state.admin_token
    if check is None:
        raise RequestError(
            403, "admin_disabled", "the admin API is disabled: set gateway.auth.token"
        )
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token or not check.matches(token.strip()):
        raise RequestError(
            401, "unauthorized", "the admin API needs 'Authorization: Bearer <gateway token>'"
        )


def _page(items: list[Any], next_cursor: str | None) -> dict[str, Any]:
    return {"ok": True, "items": items, "nextCursor": next_cursor}


class AdminController(Controller):
    path = "/api"
    guards = [admin_guard]

    @get("/events")
    async def events(
        self,
        request: Request,
        session: str = "main",
        limit: int = Parameter(default=50, ge=1, le=MAX_LIMIT),
        cursor: str | None = Parameter(default=None, pattern=r"^\d{1,18}$"),
    ) -> dict[str, Any]:
        page = await request.app.state.gateway.store.list_events(
            session, limit=limit, cursor=cursor
        )
        return _page([e.to_json() for e in page.items], page.next_cursor)

    @get("/agents")
    async def agents(self, request: Request) -> dict[str, Any]:
        """The agents and their main sessions (what `/api/events?session=` takes)."""
        roster = request.app.state.gateway.runtime.roster
        items = [
            {
                "id": a.id,
                "default": a.default,
                "name": a.name,
                "mainSession": a.main_session,
                "model": a.default_model,
                "maxConcurrentRuns": a.max_concurrent_runs,
            }
            for a in roster.agents
        ]
        return _page(items, None)

    @get("/runs")
    async def runs(
        self,
        request: Request,
        run_state: str | None = Parameter(query="state", default=None),
        agent: str | None = Parameter(default=None),
        limit: int = Parameter(default=50, ge=1, le=MAX_LIMIT),
        cursor: str | None = Parameter(default=None, pattern=r"^\d{1,18}$"),
    ) -> dict[str, Any]:
        page = await request.app.state.gateway.store.list_runs(
            limit=limit, cursor=cursor, state=run_state, agent=agent
        )
        return _page([r.to_json() for r in page.items], page.next_cursor)

    @get("/runs/{run_id:str}")
    async def run(self, request: Request, run_id: str) -> dict[str, Any]:
        store = request.app.state.gateway.store
        record = await store.get_run(run_id)
        if record is None:
            raise RequestError(404, "run_not_found", "no run with this id")
        deliveries = await store.list_deliveries(limit=MAX_LIMIT, cursor=None, run_id=run_id)
        return {
            "ok": True,
            "run": {**record.to_json(), "deliveries": [d.to_json() for d in deliveries.items]},
        }

    @get("/deliveries")
    async def deliveries(
        self,
        request: Request,
        delivery_state: str | None = Parameter(query="state", default=None),
        run_id: str | None = Parameter(query="runId", default=None),
        limit: int = Parameter(default=50, ge=1, le=MAX_LIMIT),
        cursor: str | None = Parameter(default=None, pattern=r"^\d{1,18}$"),
    ) -> dict[str, Any]:
        page = await request.app.state.gateway.store.list_deliveries(
            limit=limit, cursor=cursor, run_id=run_id, state=delivery_state
        )
        return _page([d.to_json() for d in page.items], page.next_cursor)

    @get("/heartbeats")
    async def heartbeats(
        self, request: Request, limit: int = Parameter(default=50, ge=1, le=MAX_LIMIT)
    ) -> dict[str, Any]:
        items = await request.app.state.gateway.store.list_heartbeats(limit=limit)
        return _page([h.to_json() for h in items], None)

    @get("/requests")
    async def requests(
        self,
        request: Request,
        limit: int = Parameter(default=50, ge=1, le=MAX_LIMIT),
        cursor: str | None = Parameter(default=None, pattern=r"^\d{1,18}$"),
    ) -> dict[str, Any]:
        page = await request.app.state.gateway.store.request_log(limit=limit, cursor=cursor)
        items = [
            {
                "at": e.at,
                "path": e.path,
                "status": e.status,
                "client": e.client,
                "size": e.size,
                "action": e.action,
                "rule": e.rule_id,
                "code": e.code,
            }
            for e in page.items
        ]
        return _page(items, page.next_cursor)
