"""How both stores read their records back: the column lists they select, and rows -> records.

The other direction (records -> rows for inserts) lives beside the records in `base`.
"""

from __future__ import annotations

import json
from typing import Any

from hookwise.server.store.base import DeliveryRecord, EventRecord, HeartbeatRecord, RunRecord

RUN_COLUMNS = (
    "seq, run_id, session_key, name, message, rule_id, state, wake_mode, deliver, channel, "
    "recipient, model, thinking, timeout_seconds, fallback_channel, allow_unsafe, attempts, "
    "created_at, started_at, finished_at, reply, error, model_used, input_tokens, output_tokens, "
    "agent_id"
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
