"""Sending failed work back to the queue through the admin API (same token as `admin`).

`POST /api/runs/{runId}/retry`: a `failed` or `timed_out` run goes back to `queued`, its attempts
kept, the retry recorded (who: the `X-Hookwise-Actor` header and the client address; when);
`202 {"ok": true, "runId"}`, any other state `409 run_not_retryable`. Deliveries alike
(`failed` -> `pending`). The bulk routes take a filter body and answer how many went back
(`"dryRun": true` only counts); `limit` caps one call, so a client can show progress.
"""

from __future__ import annotations

import datetime as dt
import re
import time

import msgspec
from litestar import Controller, Request, post
from litestar.params import Parameter

from ...engine.errors import RequestError
from ..lifecycle.gateway import Gateway
from ..store.bounded import within_store_wait
from ..store.records import RetryRequest
from .api import admin_guard
from .audit import note
from .models import RetriedDelivery, RetriedRun, RetryCount
from .query import (
    MAX_FILTER_LENGTH,
    RETRYABLE_DELIVERY_STATES,
    RETRYABLE_RUN_STATES,
    check_choice,
    filters,
)
from .scopes import principal_of, requires

MAX_BULK = 100_000
_ACTOR_UNSAFE = re.compile(r"[^\w .@:+-]")

ACTOR = Parameter(
    header="x-hookwise-actor",
    default=None,
    max_length=100,
    description="who asks for the retry (recorded with it; the CLI sends the user's name)",
)


class RetryFilter(msgspec.Struct, rename="camel", kw_only=True, forbid_unknown_fields=True):
    """Which failed runs or deliveries to send back (all given conditions hold)."""

    state: str | None = None
    rule: str | None = None
    channel: str | None = None
    session: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int | None = msgspec.field(default=None)
    dry_run: bool = False


def actor(request: Request, name: str | None) -> str:
    """`name@client`, with anything but plain characters replaced (it is shown, never run);
    without a name, the name of the token used (`admin.scopes`)."""
    principal = principal_of(request.scope)
    default = principal.name if principal else "admin"
    who = _ACTOR_UNSAFE.sub("_", (name or default).strip())[:100] or default
    client = request.client.host if request.client else "unknown"
    return f"{who}@{client}"


class RecoverController(Controller):
    path = "/api"
    guards = [admin_guard]
    tags = ["recover"]
    security = [{"bearer": []}]

    @post(
        "/runs/{run_id:str}/retry",
        status_code=202,
        summary="Send a failed run back",
        opt=requires("operate", audit="retry"),
    )
    async def retry_run(self, request: Request, run_id: str, by: str | None = ACTOR) -> RetriedRun:
        await retry_one(request.app.state.gateway, "run", run_id, actor(request, by))
        return RetriedRun(run_id=run_id)

    @post(
        "/deliveries/{delivery_id:str}/retry",
        status_code=202,
        summary="Send a failed delivery back",
        opt=requires("operate", audit="retry"),
    )
    async def retry_delivery(
        self, request: Request, delivery_id: str, by: str | None = ACTOR
    ) -> RetriedDelivery:
        await retry_one(request.app.state.gateway, "delivery", delivery_id, actor(request, by))
        return RetriedDelivery(delivery_id=delivery_id)

    @post(
        "/runs/retry",
        status_code=200,
        summary="Send the failed runs a filter picks back",
        opt=requires("operate", audit="retry_bulk"),
    )
    async def retry_runs(
        self, request: Request, data: RetryFilter, by: str | None = ACTOR
    ) -> RetryCount:
        note(request, kind="run", **_noted(data))
        return await retry_bulk(request.app.state.gateway, "run", data, actor(request, by))

    @post(
        "/deliveries/retry",
        status_code=200,
        summary="Send the failed deliveries a filter picks back",
        opt=requires("operate", audit="retry_bulk"),
    )
    async def retry_deliveries(
        self, request: Request, data: RetryFilter, by: str | None = ACTOR
    ) -> RetryCount:
        note(request, kind="delivery", **_noted(data))
        return await retry_bulk(request.app.state.gateway, "delivery", data, actor(request, by))


def _noted(data: RetryFilter) -> dict[str, object]:
    """A bulk retry's filter for its audit entry (names and times, no payload)."""
    picked = {k: getattr(data, k) for k in ("state", "rule", "channel", "session", "limit")}
    picked["since"] = data.since.isoformat() if data.since else None
    picked["until"] = data.until.isoformat() if data.until else None
    picked["dryRun"] = data.dry_run or None
    return picked


async def retry_one(gateway: Gateway, kind: str, target_id: str, who: str) -> None:
    """Send one failed run or delivery back to the queue, or raise 404 / 409 (the console and the
    API both call this)."""
    store = gateway.store
    allowed = RETRYABLE_RUN_STATES if kind == "run" else RETRYABLE_DELIVERY_STATES
    if await store.retry(kind, RetryRequest(allowed, who, time.time(), target_id=target_id)):
        gateway.runtime.requeued(kind)
        return
    if kind == "run":
        record = await store.get_run(target_id)
        if record is None:
            raise RequestError(404, "run_not_found", "no run with this id")
        raise RequestError(
            409,
            "run_not_retryable",
            f"the run is {record.state}: only failed or timed_out runs can be retried",
        )
    state = await store.delivery_state(target_id)
    if state is None:
        raise RequestError(404, "delivery_not_found", "no delivery with this id")
    raise RequestError(
        409,
        "delivery_not_retryable",
        f"the delivery is {state}: only failed deliveries can be retried",
    )


async def retry_bulk(gateway: Gateway, kind: str, data: RetryFilter, who: str) -> RetryCount:
    """Send back the failed runs or deliveries `data` picks (or, with `dryRun`, count them)."""
    allowed = RETRYABLE_RUN_STATES if kind == "run" else RETRYABLE_DELIVERY_STATES
    if kind == "delivery" and (data.rule is not None or data.session is not None):
        field = "rule" if data.rule is not None else "session"
        raise RequestError(
            400, "invalid_body", f"deliveries are not filtered by {field}", field=field
        )
    check_choice("state", data.state, allowed, code="invalid_body")
    if data.limit is not None and not 1 <= data.limit <= MAX_BULK:
        raise RequestError(
            400, "invalid_body", f"limit must be between 1 and {MAX_BULK}", field="limit"
        )
    for name in ("rule", "channel", "session"):
        value = getattr(data, name)
        if value is not None and len(value) > MAX_FILTER_LENGTH:
            raise RequestError(400, "invalid_body", f"{name} is too long", field=name)
    found = filters(
        data.since,
        data.until,
        code="invalid_body",
        rule=data.rule,
        channel=data.channel,
        session=data.session,
    )
    req = RetryRequest(
        (data.state,) if data.state else allowed,
        who,
        time.time(),
        filters=found,
        limit=data.limit if data.limit is not None else MAX_BULK,
        dry_run=data.dry_run,
    )
    count = await within_store_wait(gateway.store.retry(kind, req))
    if count and not data.dry_run:
        gateway.runtime.requeued(kind)
    return RetryCount(count=count, dry_run=data.dry_run)
