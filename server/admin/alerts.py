"""The alerts of the admin API (`hookwise.server.alerts`): list, one with what is behind it,
acknowledge, and send the failed work behind it back to the queue.

`GET /api/alerts` (newest first; `state` open | acknowledged | resolved, `rule`),
`GET /api/alerts/{alertId}` (the alert with the requests, runs and deliveries behind it, at
most `DETAIL` of each), `POST /api/alerts/{alertId}/ack` (an `operate` action: an open alert
becomes acknowledged; acknowledging again is a no-op; a resolved one is `409 alert_resolved`),
`POST /api/alerts/{alertId}/retry` (an `operate` action: its failed or timed-out runs and its
failed deliveries go back to the queue through the retry of `admin.recover`, each retry
recorded; the answer counts them and those that were not retryable).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from litestar import Controller, Request, get, post

from ...engine.errors import RequestError
from ..lifecycle.gateway import Gateway
from ..store.alerts import AlertRecord
from ..store.records import Filters, RetryRequest
from .api import admin_guard, store_of
from .models import Answer, Delivery, Model, RequestEntry, Run, iso, iso_or_none
from .query import (
    CURSOR,
    LIMIT,
    RETRYABLE_DELIVERY_STATES,
    RETRYABLE_RUN_STATES,
    SINCE,
    UNTIL,
    check_choice,
    filters,
    state_parameter,
    text_parameter,
)
from .recover import ACTOR, actor
from .scopes import requires

ALERT_STATES = ("open", "acknowledged", "resolved")
#: at most this many requests, runs and deliveries are shown with one alert
DETAIL = 50


class Alert(Model, kw_only=True):
    """An alert: its rule, its key (the channel, model, mapping... it is about), its state
    (`open`, `acknowledged`, `resolved`), when it opened, was last seen holding, was
    acknowledged (and by whom) and resolved, how many evaluations saw it, the last value
    measured against the threshold, and the ids behind it."""

    alert_id: str
    rule: str
    kind: str
    key: str
    state: str
    summary: str
    value: float
    threshold: float
    seen: int
    opened_at: str
    last_seen_at: str
    acked_at: str | None
    acked_by: str | None
    resolved_at: str | None
    request_ids: list[str]
    run_ids: list[str]
    delivery_ids: list[str]
    notification_ids: list[str]

    @classmethod
    def fields_of(cls, a: AlertRecord) -> dict[str, Any]:
        return {
            "alert_id": a.alert_id,
            "rule": a.rule,
            "kind": a.kind,
            "key": a.key,
            "state": a.state,
            "summary": a.summary,
            "value": a.value,
            "threshold": a.threshold,
            "seen": a.seen,
            "opened_at": iso(a.opened_at),
            "last_seen_at": iso(a.last_seen_at),
            "acked_at": iso_or_none(a.acked_at),
            "acked_by": a.acked_by,
            "resolved_at": iso_or_none(a.resolved_at),
            "request_ids": list(a.subjects.get("requests", ())),
            "run_ids": list(a.subjects.get("runs", ())),
            "delivery_ids": list(a.subjects.get("deliveries", ())),
            "notification_ids": list(a.notifications),
        }

    @classmethod
    def of(cls, a: AlertRecord) -> Alert:
        return cls(**cls.fields_of(a))


class AlertDetail(Alert, kw_only=True):
    """An alert with the records behind it (the newest `DETAIL` of each kind) and its
    notifications (deliveries)."""

    requests: list[RequestEntry]
    runs: list[Run]
    deliveries: list[Delivery]
    notifications: list[Delivery]


class AlertPage(Answer, kw_only=True):
    items: list[Alert]
    next_cursor: str | None


class AlertAnswer(Answer, kw_only=True):
    alert: AlertDetail


class AlertAcked(Answer, kw_only=True):
    alert: Alert


class AlertRetried(Answer, kw_only=True):
    """What an alert's bulk retry sent back to the queue, and what was not retryable (still
    pending, already sent or succeeded, or gone by retention)."""

    alert_id: str
    runs: int
    deliveries: int
    not_retryable: int


async def _alert(gateway: Gateway, alert_id: str) -> AlertRecord:
    found = await gateway.store.get_alert(alert_id)
    if found is None:
        raise RequestError(404, "alert_not_found", "no alert with this id")
    return found


async def _deliveries(gateway: Gateway, ids: list[str]) -> list[Delivery]:
    out = []
    for delivery_id in ids[:DETAIL]:
        page = await gateway.store.admin_list(
            "deliveries", Filters({"delivery_id": delivery_id}), limit=1, cursor=None
        )
        out += [Delivery.of(d) for d in page.items]
    return out


async def alert_detail(gateway: Gateway, alert_id: str) -> AlertDetail:
    """The alert and the records behind it (the console's alert page reads this too)."""
    a = await _alert(gateway, alert_id)
    store = gateway.store
    requests = [await store.get_request(i) for i in a.subjects.get("requests", ())[:DETAIL]]
    runs = [await store.get_run(i) for i in a.subjects.get("runs", ())[:DETAIL]]
    return AlertDetail(
        **Alert.fields_of(a),
        requests=[RequestEntry.of(r) for r in requests if r is not None],
        runs=[Run.of(r) for r in runs if r is not None],
        deliveries=await _deliveries(gateway, list(a.subjects.get("deliveries", ()))),
        notifications=await _deliveries(gateway, list(a.notifications)),
    )


async def acknowledge(gateway: Gateway, alert_id: str, who: str) -> AlertRecord:
    """Acknowledge an alert (API, CLI and console): 404 unknown, 409 resolved."""
    await _alert(gateway, alert_id)
    acked = await gateway.store.ack_alert(alert_id, now=time.time(), by=who)
    assert acked is not None
    if acked.state == "resolved" and acked.acked_at is None:
        raise RequestError(409, "alert_resolved", "the alert is resolved: nothing to acknowledge")
    return acked


async def retry_behind(gateway: Gateway, alert_id: str, who: str) -> AlertRetried:
    """Send the failed runs and deliveries behind an alert back to the queue, one by one through
    the store's retry (each recorded, attempts kept)."""
    a = await _alert(gateway, alert_id)
    store, now = gateway.store, time.time()
    counts = {"run": 0, "delivery": 0}
    skipped = 0
    for kind, subject, states in (
        ("run", "runs", RETRYABLE_RUN_STATES),
        ("delivery", "deliveries", RETRYABLE_DELIVERY_STATES),
    ):
        for target in a.subjects.get(subject, ()):
            n = await store.retry(kind, RetryRequest(states, who, now, target_id=target))
            counts[kind] += n
            skipped += 0 if n else 1
        if counts[kind]:
            gateway.runtime.requeued(kind)
    return AlertRetried(
        alert_id=alert_id,
        runs=counts["run"],
        deliveries=counts["delivery"],
        not_retryable=skipped,
    )


class AlertsController(Controller):
    path = "/api/alerts"
    guards = [admin_guard]
    tags = ["alerts"]
    security = [{"bearer": []}]

    @get("/", summary="Alerts, newest first")
    async def alerts(
        self,
        request: Request,
        alert_state: str | None = state_parameter(ALERT_STATES, "alerts"),
        rule: str | None = text_parameter("only alerts of this rule"),
        since: dt.datetime | None = SINCE,
        until: dt.datetime | None = UNTIL,
        limit: int = LIMIT,
        cursor: str | None = CURSOR,
    ) -> AlertPage:
        check_choice("state", alert_state, ALERT_STATES)
        window = filters(since, until, rule=rule)  # checks the window and the text
        equal = {k: v for k, v in (("state", alert_state), ("rule", rule)) if v is not None}
        found = Filters(equal, since=window.since, until=window.until)
        page = await store_of(request).admin_list("alerts", found, limit=limit, cursor=cursor)
        return AlertPage(items=[Alert.of(a) for a in page.items], next_cursor=page.next_cursor)

    @get("/{alert_id:str}", summary="One alert, with the requests, runs and deliveries behind it")
    async def alert(self, request: Request, alert_id: str) -> AlertAnswer:
        return AlertAnswer(alert=await alert_detail(request.app.state.gateway, alert_id))

    @post(
        "/{alert_id:str}/ack",
        status_code=200,
        summary="Acknowledge an alert (operate)",
        opt=requires("operate", audit="acknowledge"),
    )
    async def ack(self, request: Request, alert_id: str, by: str | None = ACTOR) -> AlertAcked:
        acked = await acknowledge(request.app.state.gateway, alert_id, actor(request, by))
        return AlertAcked(alert=Alert.of(acked))

    @post(
        "/{alert_id:str}/retry",
        status_code=200,
        summary="Send the failed runs and deliveries behind an alert back (operate)",
        opt=requires("operate", audit="retry_bulk"),
    )
    async def retry(self, request: Request, alert_id: str, by: str | None = ACTOR) -> AlertRetried:
        return await retry_behind(request.app.state.gateway, alert_id, actor(request, by))
