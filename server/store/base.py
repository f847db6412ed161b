"""The store interface: what the rest of the service may ask of durable state, and its records.

Callers depend on `Store` only, so a PostgreSQL implementation can sit beside SQLite without
touching them. The one write on the request path is `accept`: it checks the idempotency key and
writes the action's rows and the request's log entry in one transaction, and it returns only
after that transaction is committed ("accepted means persisted"). Implementations commit the
operations that arrive together in one transaction (group commit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import msgspec

from hookwise.engine.agents import DEFAULT_AGENT_ID, DEFAULT_MAIN_SESSION
from hookwise.server.ids import new_id


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
class NewRun:
    """An isolated agent run to record in state `queued`."""

    run_id: str
    session_key: str
    name: str
    message: str
    rule_id: str | None
    wake_mode: str
    deliver: bool
    channel: str
    to: str | None
    model: str | None
    thinking: str | None
    timeout_seconds: float | None
    fallback_channel: str | None
    allow_unsafe_external_content: bool
    agent_id: str = DEFAULT_AGENT_ID


@attrs.frozen
class RequestLogEntry:
    """One line of the request log. Never the payload, never a token."""

    at: float
    path: str
    status: int
    client: str | None
    size: int
    action: str | None = None
    rule_id: str | None = None
    code: str | None = None
    #: the request's own id (time-ordered), and what it created (written only when it did)
    request_id: str = attrs.field(factory=new_id)
    event_ids: tuple[str, ...] = ()
    run_ids: tuple[str, ...] = ()


@attrs.frozen
class AcceptOp:
    """Everything one accepted request writes, committed together or not at all.

    When `idempotency_key` was seen within the window with the same `fingerprint`, nothing is
    written and the first response is returned; with another fingerprint the result says so.
    """

    status: int
    body: bytes
    log: RequestLogEntry
    events: tuple[NewEvent, ...] = ()
    runs: tuple[NewRun, ...] = ()
    idempotency_key: str | None = None
    fingerprint: str | None = None
    now: float = 0.0
    idempotency_window: float = 86400.0


@attrs.frozen
class Accepted:
    """The answer to an `AcceptOp`: the response to send and whether it is a replay."""

    status: int
    body: bytes
    replayed: bool = False
    conflict: bool = False


@attrs.frozen
class EventRecord:
    """A stored system event."""

    seq: int
    event_id: str
    session: str
    text: str
    source: str
    mode: str
    trusted: bool
    created_at: float
    consumed_at: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "session": self.session,
            "text": self.text,
            "source": self.source,
            "mode": self.mode,
            "trusted": self.trusted,
            "createdAt": self.created_at,
            "consumedAt": self.consumed_at,
        }


@attrs.frozen
class RunRecord:
    """A stored agent run with its current state."""

    seq: int
    run_id: str
    session_key: str
    name: str
    message: str
    rule_id: str | None
    state: str
    wake_mode: str
    deliver: bool
    channel: str
    to: str | None
    model: str | None
    thinking: str | None
    timeout_seconds: float | None
    fallback_channel: str | None
    allow_unsafe_external_content: bool
    attempts: int
    created_at: float
    started_at: float | None
    finished_at: float | None
    reply: str | None
    error: str | None
    model_used: str | None
    input_tokens: int | None
    output_tokens: int | None
    agent_id: str = DEFAULT_AGENT_ID
    request_id: str | None = None  # the request that created it

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "agentId": self.agent_id,
            "sessionKey": self.session_key,
            "name": self.name,
            "message": self.message,
            "rule": self.rule_id,
            "state": self.state,
            "wakeMode": self.wake_mode,
            "deliver": self.deliver,
            "channel": self.channel,
            "to": self.to,
            "model": self.model,
            "thinking": self.thinking,
            "timeoutSeconds": self.timeout_seconds,
            "attempts": self.attempts,
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "reply": self.reply,
            "error": self.error,
            "modelUsed": self.model_used,
            "usage": {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens},
        }


@attrs.frozen
class Page:
    """One page of a listing; `next_cursor` is None on the last page."""

    items: Sequence[Any]
    next_cursor: str | None


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
    "at, path, status, client, size, action, rule_id, code, request_id, event_ids, run_ids"
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


#: how many runs a claim may take: a number, or a function called when the claim executes
Limit = int | Callable[[], int]


def resolve_limit(limit: Limit) -> int:
    """A claim's limit, read when the claim executes (see `Store.claim_runs`)."""
    return limit() if callable(limit) else limit


class Store(Protocol):
    """Durable state of the service. Implementations: `SQLiteStore`; the PostgreSQL one follows.

    Writes are group-committed: concurrent calls that arrive together share one transaction, and
    every awaited write returns only after its commit.
    """

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    # the request path
    async def accept(self, op: AcceptOp) -> Accepted: ...

    def log_request(self, entry: RequestLogEntry) -> None:
        """Record a refused request; written with the next group, never awaited by callers."""
        ...

    async def prune(
        self, *, now: float, idempotency_window: float, log_retention: float
    ) -> None: ...

    # admin reads (newest first, cursor = the last item's sequence number)
    async def list_events(self, session: str, *, limit: int, cursor: str | None) -> Page: ...

    async def list_runs(
        self, *, limit: int, cursor: str | None, state: str | None, agent: str | None = None
    ) -> Page: ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def request_log(self, *, limit: int, cursor: str | None) -> Page: ...

    async def list_deliveries(
        self, *, limit: int, cursor: str | None, run_id: str | None = None, state: str | None = None
    ) -> Page: ...

    async def list_heartbeats(self, *, limit: int) -> list[HeartbeatRecord]: ...

    # runs
    async def recover_runs(
        self, *, max_attempts: int, now: float, expired_only: bool = False
    ) -> tuple[int, int]: ...

    async def requeue_runs(self, run_ids: list[str]) -> None: ...

    async def claim_runs(
        self,
        *,
        limit: Limit,
        now: float,
        lease: float = 60.0,
        default_timeout: float = 600.0,
        agent_id: str | None = None,
    ) -> list[RunRecord]:
        """Queued runs (of `agent_id` only, when given) -> running, oldest first: at most
        `limit`, or, when `limit` is a function, at most what it returns when the claim executes
        (called exactly once, possibly on another thread, unless the claim failed before)."""
        ...

    async def finish_run(self, outcome: RunOutcome) -> None: ...

    async def has_queued_runs(self) -> bool: ...

    # sessions and the main session's events
    async def session_turns(self, session_key: str, *, limit: int) -> list[Turn]: ...

    async def pending_events(self, session: str, *, limit: int) -> list[EventRecord]: ...

    async def finish_heartbeat(self, outcome: HeartbeatOutcome) -> None: ...

    async def last_route(self, session_key: str) -> Route | None: ...

    async def set_last_route(
        self, session_key: str, route: Route, *, now: float, only_if_unset: bool = False
    ) -> None: ...

    # deliveries
    async def recover_deliveries(self) -> int: ...

    async def claim_deliveries(
        self, *, limit: int, now: float, lease: float
    ) -> list[DeliveryRecord]: ...

    async def update_delivery(self, delivery_id: str, **fields: Any) -> None: ...

    async def next_delivery_due(self) -> float | None: ...


# --- the runtime's records ---------------------------------------------------------------------


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

    role: str
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
