"""Records as rows, both ways, as both stores write and read them: the column lists they select,
rows -> records, records -> rows in the column order of their inserts, and the listing helpers
both stores page with (the admin API's cursors are sequence numbers)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .base import (
    EventRecord,
    NewEvent,
    NewRun,
    Page,
    RequestLogEntry,
    RunRecord,
)
from .records import (
    DeliveryRecord,
    HeartbeatRecord,
    NewDelivery,
    RetryRecord,
    TurnRecord,
)

RUN_COLUMNS = (
    "seq, run_id, session_key, name, message, rule_id, state, wake_mode, deliver, channel, "
    "recipient, model, thinking, timeout_seconds, fallback_channel, allow_unsafe, attempts, "
    "created_at, started_at, finished_at, reply, error, model_used, input_tokens, output_tokens, "
    "agent_id, request_id, callback_url, trace, parked, sender"
)
DELIVERY_COLUMNS = (
    "delivery_id, run_id, heartbeat_id, channel, recipient, fallback_channel, text, state, "
    "attempts, last_error, message_ids, created_at, updated_at, next_attempt_at, route_session"
)
EVENT_COLUMNS = "seq, event_id, session, text, source, mode, trusted, created_at, consumed_at"
HEARTBEAT_COLUMNS = (
    "heartbeat_id, reason, state, events, requested_at, started_at, finished_at, reply, error, "
    "acknowledged, model_used, agent_id"
)
#: a heartbeat row is written `started` before its first tool call and replaced by its outcome
HEARTBEAT_UPSERT = " ON CONFLICT (heartbeat_id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}"
    for c in ("state", "events", "finished_at", "reply", "error", "acknowledged", "model_used")
)


def delivery_record(row: tuple[Any, ...]) -> DeliveryRecord:
    r = list(row)
    r[10] = tuple(json.loads(r[10])) if r[10] else ()
    return DeliveryRecord(*r)


def heartbeat_record(row: tuple[Any, ...]) -> HeartbeatRecord:
    r = list(row)
    r[9] = bool(r[9])
    return HeartbeatRecord(*r)


def run_record(row: Any) -> RunRecord:
    r = list(row)
    r[8] = bool(r[8])
    r[15] = bool(r[15])
    return RunRecord(*r)


def event_record(row: Any) -> EventRecord:
    r = list(row)
    r[6] = bool(r[6])
    return EventRecord(*r)


def request_record(row: Any) -> RequestLogEntry:
    """A request log row (`LOG_COLUMNS`) -> its entry, the links as tuples."""
    at, path, status, client, size, action, rule_id, code, request_id, events, runs, *provider = row
    event_type, delivery_id, trace_id = (*provider, None, None, None)[:3]
    return RequestLogEntry(
        at,
        path,
        status,
        client,
        size,
        action,
        rule_id,
        code,
        request_id,
        event_ids=tuple(json.loads(events)) if events else (),
        run_ids=tuple(json.loads(runs)) if runs else (),
        event_type=event_type,
        delivery_id=delivery_id,
        trace_id=trace_id,
    )


def turn_record(row: Any) -> TurnRecord:
    return TurnRecord(*row)


def retry_record(row: Any) -> RetryRecord:
    return RetryRecord(*row)


TURN_COLUMNS = "seq, session_key, role, content, run_id, created_at"
RETRY_COLUMNS = "kind, target_id, from_state, error, attempts, actor, at"


def event_row(e: NewEvent) -> tuple[Any, ...]:
    """`e` in the column order both stores write an event: event_id, session, text, source,
    mode, trusted."""
    return (e.event_id, e.session, e.text, e.source, e.mode, e.trusted)


def run_row(r: NewRun) -> tuple[Any, ...]:
    """`r` in the column order both stores write a run: run_id, session_key, name, message,
    rule_id, wake_mode, deliver, channel, recipient, model, thinking, timeout_seconds,
    fallback_channel, allow_unsafe, agent_id."""
    return (
        r.run_id,
        r.session_key,
        r.name,
        r.message,
        r.rule_id,
        r.wake_mode,
        r.deliver,
        r.channel,
        r.to,
        r.model,
        r.thinking,
        r.timeout_seconds,
        r.fallback_channel,
        r.allow_unsafe_external_content,
        r.agent_id,
    )


def delivery_row(d: NewDelivery) -> tuple[Any, ...]:
    """`d` in the column order both stores write a delivery: delivery_id, run_id, heartbeat_id,
    channel, recipient, fallback_channel, text, state, last_error, route_session."""
    return (
        d.delivery_id,
        d.run_id,
        d.heartbeat_id,
        d.channel,
        d.to,
        d.fallback_channel,
        d.text,
        d.state,
        d.last_error,
        d.route_session,
    )


_encode = msgspec.json.Encoder().encode


def _json_text(ids: tuple[str, ...]) -> str:
    return _encode(ids).decode()


LOG_COLUMNS = (
    "at, path, status, client, size, action, rule_id, code, request_id, event_ids, run_ids,"
    " event_type, delivery_id, trace_id"
)


def log_row(e: RequestLogEntry, *, created: bool = True) -> tuple[Any, ...]:
    """`e` in the column order of the request log (`LOG_COLUMNS`); the links to the events and
    runs it created as JSON arrays (None when it created nothing, as a replayed request)."""
    return (
        e.at,
        e.path,
        e.status,
        e.client,
        e.size,
        e.action,
        e.rule_id,
        e.code,
        e.request_id,
        _json_text(e.event_ids) if created and e.event_ids else None,
        _json_text(e.run_ids) if created and e.run_ids else None,
        e.event_type,
        e.delivery_id,
        e.trace_id,
    )


def page_of(rows: Sequence[Any], limit: int, convert: Callable[[Any], Any]) -> Page:
    """A page from `limit + 1` rows, newest first, whose first column is the sequence number:
    the extra row only says that there is a next page, whose cursor is the last item's number."""
    items = [convert(r) for r in rows[:limit]]
    next_cursor = str(rows[limit - 1][0]) if len(rows) > limit else None
    return Page(items=items, next_cursor=next_cursor)


def cursor_value(cursor: str | None) -> int:
    """The sequence number a listing continues below (everything when there is no cursor)."""
    return 2**62 if cursor is None else int(cursor)
