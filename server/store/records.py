"""The records of the runtime (routes, turns, deliveries, run and heartbeat endings) and of the
admin API (transcripts, sessions, retries, kept payloads): what the stores hand back and take,
independent of either store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ...engine.names import DEFAULT_AGENT_ID, DEFAULT_MAIN_SESSION

# --- the runtime's records ---------------------------------------------------------------------


@attrs.frozen
class InFlight:
    """What is under way now, for the gauges: running runs per agent (how many, seconds since
    the oldest of them started) and events waiting for a heartbeat per main session."""

    running: dict[str, tuple[int, float | None]]
    pending_events: dict[str, int]


@attrs.frozen
class NewEvent:
    """A system event to enqueue for a session (the main session for hooks)."""

    event_id: str
    session: str
    text: str
    source: str
    mode: str
    trusted: bool = False


@attrs.frozen
class Route:
    """Where a session's replies go: a channel and a recipient on it."""

    channel: str
    to: str


@attrs.frozen
class NewTurn:
    """One message of a session's transcript."""

    session_key: str
    role: str
    content: str
    run_id: str | None = None


@attrs.frozen
class Turn:
    """A stored transcript message."""

    role: Literal["user", "assistant"]
    content: str


@attrs.frozen
class NewDelivery:
    """An outgoing message for a channel; `state` is `pending`, `skipped` or `failed`."""

    delivery_id: str
    text: str
    state: str
    channel: str | None
    to: str | None
    run_id: str | None = None
    heartbeat_id: str | None = None
    fallback_channel: str | None = None
    last_error: str | None = None
    #: the main session whose last route this delivery follows (and updates once sent)
    route_session: str = DEFAULT_MAIN_SESSION


@attrs.frozen
class RunOutcome:
    """How a run ended, and everything that ending writes, committed together."""

    run_id: str
    state: str
    finished_at: float
    reply: str | None = None
    error: str | None = None
    model_used: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    turns: tuple[NewTurn, ...] = ()
    summary: NewEvent | None = None
    delivery: NewDelivery | None = None
    #: the signed POSTs of the outcome: to the run's callback URL, to lifecycle subscribers
    signed: tuple[NewDelivery, ...] = ()


@attrs.frozen
class HeartbeatOutcome:
    """A finished heartbeat: the events it consumed and what it wrote."""

    heartbeat_id: str
    reason: str
    state: str
    event_ids: tuple[str, ...]
    requested_at: float | None
    started_at: float
    finished_at: float
    reply: str | None = None
    error: str | None = None
    acknowledged: bool = False
    model_used: str | None = None
    turns: tuple[NewTurn, ...] = ()
    delivery: NewDelivery | None = None
    agent_id: str = DEFAULT_AGENT_ID


@attrs.frozen
class HeartbeatRecord:
    """A stored heartbeat."""

    heartbeat_id: str
    reason: str
    state: str
    events: int
    requested_at: float | None
    started_at: float
    finished_at: float
    reply: str | None
    error: str | None
    acknowledged: bool
    model_used: str | None
    agent_id: str = DEFAULT_AGENT_ID

    def to_json(self) -> dict[str, Any]:
        return {
            "heartbeatId": self.heartbeat_id,
            "agentId": self.agent_id,
            "reason": self.reason,
            "state": self.state,
            "events": self.events,
            "requestedAt": self.requested_at,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "reply": self.reply,
            "error": self.error,
            "acknowledged": self.acknowledged,
            "modelUsed": self.model_used,
        }


@attrs.frozen
class DeliveryRecord:
    """A stored delivery with its current state."""

    delivery_id: str
    run_id: str | None
    heartbeat_id: str | None
    channel: str | None
    to: str | None
    fallback_channel: str | None
    text: str
    state: str
    attempts: int
    last_error: str | None
    message_ids: tuple[str, ...]
    created_at: float
    updated_at: float
    next_attempt_at: float
    route_session: str = DEFAULT_MAIN_SESSION

    def to_json(self) -> dict[str, Any]:
        return {
            "deliveryId": self.delivery_id,
            "runId": self.run_id,
            "heartbeatId": self.heartbeat_id,
            "channel": self.channel,
            "to": self.to,
            "fallbackChannel": self.fallback_channel,
            "state": self.state,
            "attempts": self.attempts,
            "lastError": self.last_error,
            "messageIds": list(self.message_ids),
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }


# --- the admin API's records -------------------------------------------------------------------


@attrs.frozen
class TurnRecord:
    """A stored transcript message with where it came from."""

    seq: int
    session_key: str
    role: str
    content: str
    run_id: str | None
    created_at: float


@attrs.frozen
class SessionRecord:
    """A session with a transcript: its last turn's time and its last route (if any)."""

    session_key: str
    last_turn_at: float | None
    last_channel: str | None
    last_to: str | None


@attrs.frozen
class RetryRecord:
    """A failed run or delivery sent back to the queue: by whom, when, from what."""

    kind: str
    target_id: str
    from_state: str
    error: str | None
    attempts: int
    actor: str
    at: float


@attrs.frozen
class RetryRequest:
    """Send failed runs or deliveries back to the queue: one (`target_id`) or those matching
    `filters` (`hookwise.server.store.listing.Filters`), at most `limit`; `dry_run` only counts."""

    states: tuple[str, ...]
    actor: str
    now: float
    target_id: str | None = None
    filters: Any = None
    limit: int | None = None
    dry_run: bool = False


@attrs.frozen
class StoredPayload:
    """A request kept for replay (`hooks.retainPayloads`): the hook name (the path after the hook
    path), the query string without `token`, the headers without auth headers, the raw body."""

    request_id: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    created_at: float


@attrs.frozen
class Page:
    """One page of a listing; `next_cursor` is None on the last page."""

    items: Sequence[Any]
    next_cursor: str | None


@attrs.frozen
class Filters:
    """What a listing is narrowed to: column -> value equalities, and a creation-time window
    (epoch seconds, `since` inclusive, `until` exclusive)."""

    equal: Mapping[str, Any] = attrs.field(factory=dict)
    since: float | None = None
    until: float | None = None


@attrs.frozen
class AttemptRecord:
    """One delivery attempt and its outcome (`sent`, `pending`: to be tried again, `failed`)."""

    delivery_id: str
    at: float
    channel: str | None
    to: str | None
    outcome: str
    error: str | None
