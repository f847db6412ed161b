"""What the admin API answers: typed response models (msgspec Structs, camelCase on the wire,
documented in the OpenAPI schema) and their construction from the store's records.

Times are ISO-8601 strings in UTC with millisecond precision (`2026-11-24T23:52:00.123Z`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ...engine.times import iso_utc
from ..store.approvals import ApprovalRecord
from ..store.base import EventRecord, RequestLogEntry, RunRecord
from ..store.modelcalls import BreakerRecord, ModelCallRecord
from ..store.modelcalls import Usage as SummedUsage
from ..store.records import (
    DeliveryRecord,
    HeartbeatRecord,
    RetryRecord,
    SessionRecord,
    TurnRecord,
)
from ..store.toolcalls import ToolCallRecord


def iso(t: float) -> str:
    """Epoch seconds as an ISO-8601 UTC time."""
    return iso_utc(t)


def iso_or_none(t: float | None) -> str | None:
    return None if t is None else iso(t)


class Model(msgspec.Struct, rename="camel", kw_only=True):
    """A response body part: camelCase keys, every field always present (null when unset)."""


# --- records --------------------------------------------------------------------------------------


class Event(Model, kw_only=True):
    event_id: str
    session: str
    text: str
    source: str
    mode: str
    trusted: bool
    created_at: str
    consumed_at: str | None

    @classmethod
    def of(cls, e: EventRecord) -> Event:
        return cls(
            event_id=e.event_id,
            session=e.session,
            text=e.text,
            source=e.source,
            mode=e.mode,
            trusted=e.trusted,
            created_at=iso(e.created_at),
            consumed_at=iso_or_none(e.consumed_at),
        )


class Usage(Model, kw_only=True):
    """Tokens and cost of a run's or heartbeat's model calls, summed (see docs/accounting.md):
    `inputTokens` are the uncached input tokens; a count is null when no call reported it;
    `cost` (in the currency of `models.prices`) is null when a call that reported tokens has
    no price. `calls`: the calls made (skipped models not counted)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost: float | None = None
    calls: int = 0

    @classmethod
    def of(cls, calls: Sequence[ModelCallRecord], r: RunRecord | None = None) -> Usage:
        u = SummedUsage.of(calls)
        if not u.calls and r is not None:  # a run from before calls were recorded
            return cls(input_tokens=r.input_tokens, output_tokens=r.output_tokens)
        return cls(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
            cost=u.cost,
            calls=u.calls,
        )


class ModelCall(Model, kw_only=True):
    """One model call of a run or heartbeat (or a model its chain skipped), in order:
    `outcome` `ok`, `error` or `skipped` (its breaker was open); `errorClass` says why it
    failed (`rate_limited`, `overloaded`, `bad_request`, ...; see docs/accounting.md)."""

    attempt: int
    seq: int
    model: str
    outcome: str
    error_class: str | None
    status: int | None
    error: str | None
    started_at: str
    duration_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost: float | None

    @classmethod
    def of(cls, c: ModelCallRecord) -> ModelCall:
        return cls(
            attempt=c.attempt,
            seq=c.seq,
            model=c.model,
            outcome=c.outcome,
            error_class=c.error_class,
            status=c.status,
            error=c.error,
            started_at=iso(c.started_at),
            duration_ms=c.duration_ms,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            cache_read_tokens=c.cache_read_tokens,
            cache_write_tokens=c.cache_write_tokens,
            cost=c.cost,
        )


class Run(Model, kw_only=True):
    run_id: str
    agent_id: str
    request_id: str | None
    session_key: str
    name: str
    message: str
    rule: str | None
    state: str
    wake_mode: str
    deliver: bool
    channel: str
    to: str | None
    model: str | None
    #: the models tried after `model` when it is unavailable (its fallback chain)
    fallbacks: list[str]
    thinking: str | None
    timeout_seconds: float | None
    attempts: int
    created_at: str
    started_at: str | None
    finished_at: str | None
    reply: str | None
    error: str | None
    model_used: str | None
    usage: Usage
    #: the trace it belongs to (32 hex digits) when tracing was on (docs/tracing.md)
    trace_id: str | None = None
    #: who the door verified sent it (`<scheme>#<n>`, `token`, ...; docs/accounting.md)
    sender: str | None = None

    @classmethod
    def fields_of(cls, r: RunRecord, calls: Sequence[ModelCallRecord] = ()) -> dict[str, object]:
        chain = r.model.split() if r.model else []
        return {
            "run_id": r.run_id,
            "agent_id": r.agent_id,
            "request_id": r.request_id,
            "session_key": r.session_key,
            "name": r.name,
            "message": r.message,
            "rule": r.rule_id,
            "state": r.state,
            "wake_mode": r.wake_mode,
            "deliver": r.deliver,
            "channel": r.channel,
            "to": r.to,
            "model": chain[0] if chain else None,
            "fallbacks": chain[1:],
            "thinking": r.thinking,
            "timeout_seconds": r.timeout_seconds,
            "attempts": r.attempts,
            "created_at": iso(r.created_at),
            "started_at": iso_or_none(r.started_at),
            "finished_at": iso_or_none(r.finished_at),
            "reply": r.reply,
            "error": r.error,
            "model_used": r.model_used,
            "usage": Usage.of(calls, r),
            "trace_id": r.trace_id,
            "sender": r.sender,
        }

    @classmethod
    def of(cls, r: RunRecord, calls: Sequence[ModelCallRecord] = ()) -> Run:
        return cls(**cls.fields_of(r, calls))  # type: ignore[arg-type]


class Delivery(Model, kw_only=True):
    delivery_id: str
    run_id: str | None
    heartbeat_id: str | None
    channel: str | None
    to: str | None
    fallback_channel: str | None
    state: str
    attempts: int
    last_error: str | None
    message_ids: list[str]
    created_at: str
    updated_at: str
    next_attempt_at: str

    @classmethod
    def of(cls, d: DeliveryRecord) -> Delivery:
        return cls(
            delivery_id=d.delivery_id,
            run_id=d.run_id,
            heartbeat_id=d.heartbeat_id,
            channel=d.channel,
            to=d.to,
            fallback_channel=d.fallback_channel,
            state=d.state,
            attempts=d.attempts,
            last_error=d.last_error,
            message_ids=list(d.message_ids),
            created_at=iso(d.created_at),
            updated_at=iso(d.updated_at),
            next_attempt_at=iso(d.next_attempt_at),
        )


class Retry(Model, kw_only=True):
    """A failed run or delivery sent back to the queue."""

    from_state: str
    error: str | None
    attempts: int
    by: str
    at: str

    @classmethod
    def of(cls, r: RetryRecord) -> Retry:
        return cls(
            from_state=r.from_state, error=r.error, attempts=r.attempts, by=r.actor, at=iso(r.at)
        )


class ToolCall(Model, kw_only=True):
    """One MCP tool call of a run, in order. `outcome` is `ok`, `error`, `timeout`, or
    `started` for a call the run was interrupted in, or `unavailable` (tool `*`, `seq` below
    zero, `result` saying why) for a granted server that was down when the run started. `arguments` and `result` are present only
    where payloads are kept (`hooks.retainPayloads`); their size and SHA-256 digest always."""

    seq: int
    server: str
    tool: str
    outcome: str
    started_at: str
    duration_ms: float | None
    result_bytes: int | None
    truncated: bool
    arguments_bytes: int
    arguments_digest: str
    result_digest: str | None
    arguments: str | None = None
    result: str | None = None

    @classmethod
    def of(cls, c: ToolCallRecord) -> ToolCall:
        return cls(
            seq=c.seq,
            server=c.server,
            tool=c.tool,
            outcome=c.outcome,
            started_at=iso(c.started_at),
            duration_ms=c.duration_ms,
            result_bytes=c.result_bytes,
            truncated=c.truncated,
            arguments_bytes=c.arguments_bytes,
            arguments_digest=c.arguments_digest,
            result_digest=c.result_digest,
            arguments=c.arguments,
            result=c.result,
        )


class Approval(Model, kw_only=True):
    """A tool call that waited for (or waits for) a person's decision: `state` `pending`,
    `approved`, `denied` or `timed_out`; who decided, when and through what (`via`: `api`,
    `console`, `link`, `telegram`, `slack`, `sweep`). `arguments` only where payloads are kept;
    `argumentsDigest` (what the decider saw) always."""

    approval_id: str
    run_id: str
    seq: int
    server: str
    tool: str
    arguments: str | None
    arguments_digest: str
    state: str
    created_at: str
    expires_at: str
    decided_at: str | None
    decided_by: str | None
    via: str | None
    agent_id: str | None
    rule: str | None
    session_key: str | None
    #: who sent the hook that started the run (client address and path), and whether its
    #: signature was verified (its mapping checks one)
    sender: str | None
    verified: bool

    @classmethod
    def of(cls, a: ApprovalRecord, *, arguments: bool) -> Approval:
        return cls(
            approval_id=a.approval_id,
            run_id=a.run_id,
            seq=a.seq,
            server=a.server,
            tool=a.tool,
            arguments=a.arguments if arguments else None,
            arguments_digest=a.arguments_digest,
            state=a.state,
            created_at=iso(a.created_at),
            expires_at=iso(a.expires_at),
            decided_at=iso_or_none(a.decided_at),
            decided_by=a.decided_by,
            via=a.via,
            agent_id=a.agent_id,
            rule=a.rule_id,
            session_key=a.session_key,
            sender=a.sender,
            verified=a.verified,
        )


class RefusedDecision(Model, kw_only=True):
    """A decision refused (forged, replayed, late, second, not an approver): it changed nothing."""

    approval_id: str | None
    at: str
    by: str
    via: str
    reason: str


class RunDetail(Run, kw_only=True):
    """A run with its deliveries, the retries that sent it back to the queue, and its tool
    calls."""

    deliveries: list[Delivery]
    retries: list[Retry]
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    #: every model call of every attempt, and every model its chain skipped, in order
    model_calls: list[ModelCall] = msgspec.field(default_factory=list)
    #: its tool calls that waited for approval, and the decisions refused
    approvals: list[Approval] = msgspec.field(default_factory=list)
    refused_decisions: list[RefusedDecision] = msgspec.field(default_factory=list)


class Heartbeat(Model, kw_only=True):
    """A heartbeat of an agent's main session. `state` `started` marks one that had begun
    calling tools and has not finished (still running, or interrupted); `toolCalls` are its
    MCP tool calls, in order (in listings)."""

    heartbeat_id: str
    agent_id: str
    reason: str
    state: str
    events: int
    requested_at: str | None
    started_at: str
    finished_at: str
    reply: str | None
    error: str | None
    acknowledged: bool
    model_used: str | None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    usage: Usage = msgspec.field(
        default_factory=lambda: Usage(input_tokens=None, output_tokens=None)
    )
    model_calls: list[ModelCall] = msgspec.field(default_factory=list)

    @classmethod
    def of(
        cls,
        h: HeartbeatRecord,
        tool_calls: Sequence[ToolCallRecord] = (),
        model_calls: Sequence[ModelCallRecord] = (),
    ) -> Heartbeat:
        return cls(
            heartbeat_id=h.heartbeat_id,
            agent_id=h.agent_id,
            reason=h.reason,
            state=h.state,
            events=h.events,
            requested_at=iso_or_none(h.requested_at),
            started_at=iso(h.started_at),
            finished_at=iso(h.finished_at),
            reply=h.reply,
            error=h.error,
            acknowledged=h.acknowledged,
            model_used=h.model_used,
            tool_calls=[ToolCall.of(c) for c in tool_calls],
            usage=Usage.of(model_calls),
            model_calls=[ModelCall.of(c) for c in model_calls],
        )


class RequestEntry(Model, kw_only=True):
    """One line of the request log: never the payload, never a token."""

    request_id: str | None
    at: str
    path: str
    status: int
    client: str | None
    size: int
    action: str | None
    rule: str | None
    code: str | None
    event_ids: list[str]
    run_ids: list[str]
    #: the provider's name of the event (X-GitHub-Event, a Stripe event's type), when known
    event_type: str | None = None
    #: the provider's id of the delivery (X-GitHub-Delivery, a Stripe event's id), when known
    delivery_id: str | None = None
    #: the request's trace (32 hex digits) when tracing was on (docs/tracing.md)
    trace_id: str | None = None

    @classmethod
    def of(cls, e: RequestLogEntry) -> RequestEntry:
        return cls(
            request_id=e.request_id,
            at=iso(e.at),
            path=e.path,
            status=e.status,
            client=e.client,
            size=e.size,
            action=e.action,
            rule=e.rule_id,
            code=e.code,
            event_ids=list(e.event_ids),
            run_ids=list(e.run_ids),
            event_type=e.event_type,
            delivery_id=e.delivery_id,
            trace_id=e.trace_id,
        )


class Session(Model, kw_only=True):
    session_key: str
    last_turn_at: str | None
    last_channel: str | None
    last_to: str | None

    @classmethod
    def of(cls, s: SessionRecord) -> Session:
        return cls(
            session_key=s.session_key,
            last_turn_at=iso_or_none(s.last_turn_at),
            last_channel=s.last_channel,
            last_to=s.last_to,
        )


class SessionTurn(Model, kw_only=True):
    role: str
    content: str
    run_id: str | None
    created_at: str

    @classmethod
    def of(cls, t: TurnRecord) -> SessionTurn:
        return cls(role=t.role, content=t.content, run_id=t.run_id, created_at=iso(t.created_at))


# --- answers --------------------------------------------------------------------------------------


class Answer(Model, kw_only=True):
    ok: bool = True


class EventPage(Answer, kw_only=True):
    items: list[Event]
    next_cursor: str | None


class Breaker(Model, kw_only=True):
    """A model's circuit breaker (only models that failed lately have one): `state` is
    `closed` (failures counted in the window), `open` (skipped by chains until `openUntil`) or
    `half_open` (one call may try it)."""

    model: str
    state: str
    failures: int
    open_until: str | None
    last_error_class: str | None
    updated_at: str

    @classmethod
    def of(cls, b: BreakerRecord, now: float) -> Breaker:
        return cls(
            model=b.model,
            state=b.state_at(now),
            failures=b.failures,
            open_until=iso_or_none(b.open_until),
            last_error_class=b.last_error_class,
            updated_at=iso(b.updated_at),
        )


class BreakerPage(Answer, kw_only=True):
    items: list[Breaker]
    next_cursor: str | None = None


class RunPage(Answer, kw_only=True):
    items: list[Run]
    next_cursor: str | None


class DeliveryPage(Answer, kw_only=True):
    items: list[Delivery]
    next_cursor: str | None


class HeartbeatPage(Answer, kw_only=True):
    items: list[Heartbeat]
    next_cursor: str | None


class RequestPage(Answer, kw_only=True):
    items: list[RequestEntry]
    next_cursor: str | None


class SessionPage(Answer, kw_only=True):
    items: list[Session]
    next_cursor: str | None


class TurnPage(Answer, kw_only=True):
    """A session's transcript, newest turn first."""

    session_key: str
    items: list[SessionTurn]
    next_cursor: str | None


class RunAnswer(Answer, kw_only=True):
    run: RunDetail


class RequestAnswer(Answer, kw_only=True):
    request: RequestEntry


class RetriedRun(Answer, kw_only=True):
    run_id: str


class RetriedDelivery(Answer, kw_only=True):
    delivery_id: str


class RetryCount(Answer, kw_only=True):
    """How many were sent back to the queue (with `dryRun`: would be)."""

    count: int
    dry_run: bool = False


class Problem(Model, kw_only=True):
    """Every refusal: `{"ok": false, "error", "code"}`, `field` naming the parameter."""

    ok: bool
    error: str
    code: str
    field: str | None = None


# --- replay ---------------------------------------------------------------------------------------


class ReplayAction(Model, kw_only=True):
    """An action today's rules make of a kept request: `wake` or `agent`, with its fields."""

    kind: str
    fields: dict[str, Any]


class ReplayPreview(Answer, kw_only=True):
    """`?dryRun=true`: what a replay would do; nothing is stored."""

    dry_run: bool = True
    rule: str | None
    skipped: bool
    actions: list[ReplayAction]


class Replayed(Answer, kw_only=True):
    """A replay dispatched: its own request log line (`requestId`) and what it created."""

    request_id: str
    replay_of: str
    status: int
    rule: str | None
    skipped: bool
    event_ids: list[str]
    run_ids: list[str]


class PayloadDeleted(Answer, kw_only=True):
    request_id: str
