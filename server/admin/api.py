"""The admin API: what the gateway received, queued, ran and delivered, behind the gateway token.

`Authorization: Bearer <token>`, one of `gateway.auth.tokens` (or the single `gateway.auth.token`),
whose scopes allow the route (`admin.scopes`); without a configured admin token the admin API is
disabled (403). Listings are newest first, paginated with an opaque `cursor`, filtered by the
parameters each route documents (a bad value is `400 invalid_query`), and each walks an index,
so a page costs the same on a store of millions of rows (`store.listing`). Answers are the typed
models of `admin_models`, described by the OpenAPI schema at `/schema/openapi.json`.
Sending failed work back to the queue is `admin_recover`.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from litestar import Controller, Request, get
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler
from litestar.params import Parameter

from ...engine.errors import RequestError
from ..store.base import Store
from ..store.records import Filters
from .models import (
    Approval,
    Breaker,
    BreakerPage,
    Delivery,
    DeliveryPage,
    Event,
    EventPage,
    Heartbeat,
    HeartbeatPage,
    ModelCall,
    RefusedDecision,
    RequestAnswer,
    RequestEntry,
    RequestPage,
    Retry,
    Run,
    RunAnswer,
    RunDetail,
    RunPage,
    Session,
    SessionPage,
    SessionTurn,
    ToolCall,
    TurnPage,
    iso,
)
from .query import (
    CURSOR,
    DELIVERY_STATES,
    HEARTBEAT_STATES,
    LIMIT,
    MAX_LIMIT,
    RUN_STATES,
    SINCE,
    UNTIL,
    check_choice,
    filters,
    key_in_path,
    refuse_nul,
    state_parameter,
    text_parameter,
)
from .scopes import TokenTable, check_scope, required_scope, set_principal


def admin_guard(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    """The bearer token names a principal (`admin.scopes`) whose scopes allow the route."""
    table: TokenTable | None = connection.app.state.admin_tokens
    if table is None:
        raise RequestError(
            403, "admin_disabled", "the admin API is disabled: set gateway.auth.token"
        )
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    principal = table.match(token.strip()) if scheme.lower() == "bearer" and token else None
    if principal is None:
        raise RequestError(
            401, "unauthorized", "the admin API needs 'Authorization: Bearer <gateway token>'"
        )
    set_principal(connection.scope, principal)  # type: ignore[arg-type]
    check_scope(principal, required_scope(handler.opt, handler.http_methods))  # type: ignore[attr-defined]
    refuse_nul(connection.path_params, connection.query_params)


def store_of(request: Request) -> Store:
    return request.app.state.gateway.store


class AdminController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["admin"]
    security = [{"bearer": []}]

    @get("/events", summary="System events, newest first")
    async def events(
        self,
        request: Request,
        session: str | None = text_parameter("only events of this session (e.g. main)"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> EventPage:
        page = await store_of(request).admin_list(
            "events", _events(session, since, until), limit=limit, cursor=cursor
        )
        return EventPage(items=[Event.of(e) for e in page.items], next_cursor=page.next_cursor)

    @get("/breakers", summary="The circuit breakers of models that failed lately")
    async def breakers(self, request: Request) -> BreakerPage:
        now = time.time()
        found = await store_of(request).breakers()
        return BreakerPage(items=[Breaker.of(b, now) for b in found])

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
        return {"ok": True, "items": items, "nextCursor": None}

    @get("/runs", summary="Agent runs, newest first")
    async def runs(
        self,
        request: Request,
        run_state: str | None = state_parameter(RUN_STATES, "runs"),
        agent: str | None = text_parameter("only runs of this agent"),
        rule: str | None = text_parameter("only runs made by this rule"),
        session: str | None = text_parameter("only runs of this session key"),
        channel: str | None = text_parameter("only runs delivering to this channel"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> RunPage:
        check_choice("state", run_state, RUN_STATES)
        found = filters(
            since, until, state=run_state, agent=agent, rule=rule, session=session, channel=channel
        )
        store = store_of(request)
        page = await store.admin_list("runs", found, limit=limit, cursor=cursor)
        calls: dict[str, list[Any]] = {}
        for call in await store.model_calls_of([r.run_id for r in page.items]):
            calls.setdefault(call.owner_id, []).append(call)
        return RunPage(
            items=[Run.of(r, calls.get(r.run_id, ())) for r in page.items],
            next_cursor=page.next_cursor,
        )

    @get("/runs/{run_id:str}", summary="One run, with its deliveries, retries and tool calls")
    async def run(self, request: Request, run_id: str) -> RunAnswer:
        store = store_of(request)
        record = await store.get_run(run_id)
        if record is None:
            raise RequestError(404, "run_not_found", "no run with this id")
        deliveries = await store.admin_list(
            "deliveries", Filters({"run_id": run_id}), limit=MAX_LIMIT, cursor=None
        )
        retries = await store.list_retries(run_id)
        model_calls = await store.model_calls_of([run_id])
        detail = RunDetail(
            **Run.fields_of(record, model_calls),  # type: ignore[arg-type]
            deliveries=[Delivery.of(d) for d in deliveries.items],
            retries=[Retry.of(r) for r in retries],
            tool_calls=[ToolCall.of(c) for c in await store.tool_calls(run_id)],
            model_calls=[ModelCall.of(c) for c in model_calls],
            approvals=[
                Approval.of(a, arguments=request.app.state.gateway.runtime.approvals.show_arguments)
                for a in await store.approvals(run_id=run_id)
            ],
            refused_decisions=[
                RefusedDecision(
                    approval_id=r.approval_id, at=iso(r.at), by=r.by, via=r.via, reason=r.reason
                )
                for r in await store.approval_refusals(run_id)
            ],
        )
        return RunAnswer(run=detail)

    @get("/deliveries", summary="Outgoing messages, newest first")
    async def deliveries(
        self,
        request: Request,
        delivery_state: str | None = state_parameter(DELIVERY_STATES, "deliveries"),
        channel: str | None = text_parameter("only deliveries on this channel"),
        run_id: str | None = text_parameter("only deliveries of this run", query="runId"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> DeliveryPage:
        check_choice("state", delivery_state, DELIVERY_STATES)
        found = filters(since, until, state=delivery_state, channel=channel, runId=run_id)
        page = await store_of(request).admin_list("deliveries", found, limit=limit, cursor=cursor)
        return DeliveryPage(
            items=[Delivery.of(d) for d in page.items], next_cursor=page.next_cursor
        )

    @get("/heartbeats", summary="Heartbeats of the main sessions, newest first, with tool calls")
    async def heartbeats(
        self,
        request: Request,
        heartbeat_state: str | None = state_parameter(HEARTBEAT_STATES, "heartbeats"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> HeartbeatPage:
        check_choice("state", heartbeat_state, HEARTBEAT_STATES)
        found = filters(since, until, state=heartbeat_state)
        store = store_of(request)
        page = await store.admin_list("heartbeats", found, limit=limit, cursor=cursor)
        ids = [h.heartbeat_id for h in page.items]
        calls: dict[str, list[Any]] = {}
        for call in await store.tool_calls_of(ids):
            calls.setdefault(call.run_id, []).append(call)
        used: dict[str, list[Any]] = {}
        for model_call in await store.model_calls_of(ids):
            used.setdefault(model_call.owner_id, []).append(model_call)
        return HeartbeatPage(
            items=[
                Heartbeat.of(h, calls.get(h.heartbeat_id, ()), used.get(h.heartbeat_id, ()))
                for h in page.items
            ],
            next_cursor=page.next_cursor,
        )

    @get("/requests", summary="The request log, newest first: never a payload or a token")
    async def requests(
        self,
        request: Request,
        status: int | None = Parameter(
            default=None, ge=100, le=599, description="only requests answered with this status"
        ),
        rule: str | None = text_parameter("only requests matched by this rule"),
        path: str | None = text_parameter("only requests to this path (e.g. /hooks/github)"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> RequestPage:
        found = filters(since, until, status=status, rule=rule, path=path)
        page = await store_of(request).admin_list("requests", found, limit=limit, cursor=cursor)
        return RequestPage(
            items=[RequestEntry.of(e) for e in page.items], next_cursor=page.next_cursor
        )

    @get("/requests/{request_id:str}", summary="One request log line")
    async def request_entry(self, request: Request, request_id: str) -> RequestAnswer:
        entry = await store_of(request).get_request(request_id)
        if entry is None:
            raise RequestError(404, "request_not_found", "no request with this id")
        return RequestAnswer(request=RequestEntry.of(entry))

    @get("/sessions", summary="Sessions with a transcript, by key")
    async def sessions(
        self,
        request: Request,
        limit: int = LIMIT,
        cursor: str | None = Parameter(
            default=None, max_length=512, description="the `nextCursor` of the previous page"
        ),
    ) -> SessionPage:
        page = await store_of(request).list_sessions(limit=limit, cursor=cursor)
        return SessionPage(items=[Session.of(s) for s in page.items], next_cursor=page.next_cursor)

    @get(
        "/sessions/{session_key:path}",
        summary="A session's transcript, newest turn first",
        description="The key percent-encoded as one path segment (`/` as `%2F`, `#` as `%23`);"
        " a `/` left as is is part of the key too.",
    )
    async def session(
        self,
        request: Request,
        session_key: str,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> TurnPage:
        session_key = key_in_path(request.scope, "/sessions/", session_key)
        page = await store_of(request).admin_list(
            "turns", Filters({"session_key": session_key}), limit=limit, cursor=cursor
        )
        if not page.items and cursor is None:
            raise RequestError(404, "session_not_found", "no session with this key")
        return TurnPage(
            session_key=session_key,
            items=[SessionTurn.of(t) for t in page.items],
            next_cursor=page.next_cursor,
        )


def _events(session: str | None, since: dt.datetime | None, until: dt.datetime | None) -> Filters:
    found = filters(since, until)
    if session is not None:  # events name their session `session`, not `session_key`
        return Filters({"session": session}, since=found.since, until=found.until)
    return found
