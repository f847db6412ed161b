"""How both stores read their records back: the column lists they select, and rows -> records.

The other direction (records -> rows for inserts) lives beside the records in `base`.
"""

from __future__ import annotations

import json
from typing import Any

from hookwise.server.store.base import (
    DeliveryRecord,
    EventRecord,
    HeartbeatRecord,
    RequestLogEntry,
    RetryRecord,
    RunRecord,
    TurnRecord,
)

RUN_COLUMNS = (
    "seq, run_id, session_key, name, message, rule_id, state, wake_mode, deliver, channel, "
    "recipient, model, thinking, timeout_seconds, fallback_channel, allow_unsafe, attempts, "
    "created_at, started_at, finished_at, reply, error, model_used, input_tokens, output_tokens, "
    "agent_id, request_id"
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
    r = list(row)
    return RequestLogEntry(
        *r[:9],
        event_ids=tuple(json.loads(r[9])) if r[9] else (),
        run_ids=tuple(json.loads(r[10])) if r[10] else (),
    )


def turn_record(row: Any) -> TurnRecord:
    return TurnRecord(*row)


def retry_record(row: Any) -> RetryRecord:
    return RetryRecord(*row)


TURN_COLUMNS = "seq, session_key, role, content, run_id, created_at"
RETRY_COLUMNS = "kind, target_id, from_state, error, attempts, actor, at"
