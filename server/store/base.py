"""The store interface: what the rest of the service may ask of durable state, and the records
of the request path (events, runs, the request log, an accept operation and its answer).

The runtime's and the admin API's records are in `hookwise.server.store.records` (so is
`NewEvent`, which a run's outcome carries too; it is imported here for the request path); the rows both
stores write them as, and the listing helpers, in `hookwise.server.store.rows`.

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

from ...engine.names import DEFAULT_AGENT_ID
from ..ids import new_id
from .alerts import AlertRecord, NewAlert, SeenAlert
from .approvals import ApprovalRecord, Decided, PendingStats, Refusal
from .audit import AuditRecord
from .coalesce import CoalesceSpec
from .lanes import BudgetRaise, LaneStat, Pause
from .modelcalls import BreakerPolicy, BreakerRecord, ModelCallRecord
from .records import (
    AttemptRecord,
    DeliveryRecord,
    Filters,
    HeartbeatOutcome,
    HeartbeatRecord,
    InFlight,
    NewDelivery,
    NewEvent,
    Page,
    RetryRecord,
    RetryRequest,
    Route,
    RunOutcome,
    StoredPayload,
    Turn,
)
from .retention import Target
from .toolcalls import ToolCallRecord


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
    #: where the run's outcome is posted when it ends (its mapping's `callback`)
    callback_url: str | None = None
    #: not claimable before this time (a coalescing run's window; `hookwise.server.store.coalesce`)
    not_before: float | None = None
    #: the W3C `traceparent` of the request that created it (None: not traced; server.telemetry)
    trace: str | None = None
    #: who the door verified sent it (`hookwise.server.store.senders`; migration 0026)
    sender: str | None = None


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
    #: the provider's event type and delivery id, where its signature scheme names them
    event_type: str | None = None
    delivery_id: str | None = None
    #: the request's trace id, 32 hex digits (None: not traced; server.telemetry)
    trace_id: str | None = None


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
    #: notifications (`action: notify`): pending deliveries with no run
    deliveries: tuple[NewDelivery, ...] = ()
    #: fold the one run of `runs` into a waiting run of the same mapping and key
    #: (`hookwise.server.store.coalesce`)
    coalesce: CoalesceSpec | None = None


@attrs.frozen
class Accepted:
    """The answer to an `AcceptOp`: the response to send and whether it is a replay."""

    status: int
    body: bytes
    replayed: bool = False
    conflict: bool = False
    #: the waiting run this request joined instead of writing its own (coalescing)
    joined: str | None = None


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
    callback_url: str | None = None  # where its outcome is posted when it ends
    trace: str | None = None  # the W3C traceparent it continues (server.telemetry)

    @property
    def trace_id(self) -> str | None:
        """The trace id of `trace` (32 hex digits) when it is sampled (an unsampled one is
        kept so the run follows the request's decision, but no tracing system has it), or None."""
        parts = self.trace.split("-") if self.trace else ()
        if len(parts) != 4 or not parts[3] or parts[3][-1] not in "13579bdf":  # flag 01: sampled
            return None
        return parts[1]

    #: the conversation of a run parked for approval (JSON; `hookwise.server.runtime.parking`)
    parked: str | None = attrs.field(default=None, repr=False)
    #: who the door verified sent it (`hookwise.server.store.senders`); None: from before 0026
    sender: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "sender": self.sender,
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
            "traceId": self.trace_id,
        }


#: how many runs a claim may take: a number, or a function called when the claim executes
Limit = int | Callable[[], int]


def resolve_limit(limit: Limit) -> int:
    """A claim's limit, read when the claim executes (see `Store.claim_runs`)."""
    return limit() if callable(limit) else limit


class StoreUnavailable(RuntimeError):
    """The store could not take a write right now (its writer died, or did not answer in
    time); the same write may succeed when tried again."""


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
        full: tuple[str, ...] = (),
    ) -> list[RunRecord]:
        """Queued runs (of `agent_id` only, when given; none made by the mappings `full` names,
        whose lanes are at their `maxConcurrentRuns`) -> running, oldest first: at most
        `limit`, or, when `limit` is a function, at most what it returns when the claim executes
        (called exactly once, possibly on another thread, unless the claim failed before)."""
        ...

    async def finish_run(self, outcome: RunOutcome, *, again: bool = False) -> bool:
        """Write a run's ending (its state, turns, summary event and delivery) in one commit.
        `again`: an earlier finish of it may have been committed before its answer was lost;
        write only while the run is still `running`. False when nothing was written."""
        ...

    async def release_runs(self, *, agent_id: str | None, keep: list[str]) -> int:
        """Runs (of `agent_id`, when given) left `running` that this process, the only one
        using the store, does not execute (`keep`: those it does): a claim that was committed
        but whose answer was lost. Back to the queue without using up an attempt; how many."""
        ...

    # approvals (`hookwise.server.store.approvals`) ------------------------------------------

    async def park_run(self, run_id: str, parked: str, approvals: Sequence[ApprovalRecord]) -> bool:
        """A running run -> `awaiting_approval`, with its conversation and pending approvals, in
        one transaction; False (nothing written) when it is not `running` any more."""
        ...

    async def decide_approval(
        self,
        *,
        approval_id: str | None = None,
        token_hash: str | None = None,
        state: str,
        by: str,
        via: str,
        now: float,
        refuse: str | None = None,
    ) -> Decided:
        """Decide a pending approval (conditional: only while pending and not expired); a
        decision that changes nothing is recorded as refused. Releases the run once none of its
        approvals is pending."""
        ...

    async def expire_approvals(self, *, now: float, state: str) -> list[str]:
        """Pending approvals past their time -> `state`; the runs released."""
        ...

    async def approvals(
        self, *, state: str | None = None, run_id: str | None = None, limit: int = 100
    ) -> list[ApprovalRecord]: ...

    async def approval(
        self, approval_id: str | None = None, *, token_hash: str | None = None
    ) -> ApprovalRecord | None: ...

    async def approval_refusals(self, run_id: str) -> list[Refusal]: ...

    async def pending_approvals(self) -> PendingStats: ...

    async def record_tool_calls(self, calls: Sequence[ToolCallRecord]) -> None:
        """Write (or rewrite) tool-call rows of runs and heartbeats (see `store.toolcalls`)."""
        ...

    async def tool_calls(self, run_id: str) -> list[ToolCallRecord]: ...

    async def tool_calls_of(self, owner_ids: Sequence[str]) -> list[ToolCallRecord]:
        """The calls of several runs or heartbeats (by id), each one's in order."""
        ...

    # accounting and breakers of model calls (see `store.modelcalls`)
    async def record_model_calls(self, calls: Sequence[ModelCallRecord]) -> None:
        """Write the records of model calls of runs and heartbeats."""
        ...

    async def model_calls_of(self, owner_ids: Sequence[str]) -> list[ModelCallRecord]:
        """The model calls of several runs or heartbeats (by id), each one's in order."""
        ...

    async def spend(
        self, column: str, name: str, *, since: float, exclude: str = ""
    ) -> tuple[int, float]:
        """Tokens (in and out) and cost of the model calls whose `column` (`rule_id` or
        `agent_id`) is `name`, started at `since` or later, but those of run `exclude`: what a
        budget counts."""
        ...

    async def top_senders(
        self, kind: str, name: str, *, since: float, limit: int
    ) -> list[tuple[str, int, float]]:
        """The senders that spent most in the mapping or agent `name` (`kind`) since `since`,
        from the running totals' whole buckets (a listing, not a budget's check): (sender,
        tokens, cost), most tokens first, at most `limit`."""
        ...

    async def breakers(self) -> list[BreakerRecord]:
        """Every model's breaker that is not closed and clean, by model."""
        ...

    async def breaker_failure(
        self, model: str, *, now: float, policy: BreakerPolicy, error_class: str
    ) -> BreakerRecord:
        """Count an unavailable failure of `model` (atomically); its breaker after it."""
        ...

    async def breaker_success(self, model: str) -> None:
        """`model` answered: its breaker closes, its failures are forgotten."""
        ...

    async def breaker_probe(self, model: str, *, now: float, lease: float) -> bool:
        """Whether this caller is the one half-open try of `model` (for `lease` seconds)."""
        ...

    async def has_queued_runs(self) -> bool: ...

    # sessions and the main session's events
    async def session_turns(self, session_key: str, *, limit: int) -> list[Turn]: ...

    async def pending_events(
        self, session: str, *, limit: int, after: int = 0
    ) -> list[EventRecord]:
        """A session's unconsumed events, oldest first: at most `limit`, those whose `seq` is
        greater than `after` (to read a backlog page by page)."""
        ...

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

    async def delivery_state(self, delivery_id: str) -> str | None: ...

    async def delivery_attempts(self, delivery_ids: list[str]) -> list[AttemptRecord]:
        """Every attempt of these deliveries, oldest first."""
        ...

    # the admin API and the console: listings, one record, what is under way
    async def admin_list(
        self, name: str, filters: Filters, *, limit: int, cursor: str | None
    ) -> Page:
        """One page of a listing (`store.listing.LISTINGS`), newest first."""
        ...

    async def get_request(self, request_id: str) -> RequestLogEntry | None: ...

    async def list_sessions(self, *, limit: int, cursor: str | None) -> Page: ...

    async def list_retries(self, target_id: str) -> list[RetryRecord]: ...

    async def retry(self, kind: str, req: RetryRequest) -> int:
        """Send the failed rows `req` picks back to the queue (attempts kept, each retry
        recorded); the number sent (or, with `dry_run`, that would be)."""
        ...

    async def activity(
        self, name: str, *, since: float, width: float, failed: bool = False
    ) -> dict[int, int]:
        """Rows of listing `name` created per `width`-second bucket since `since`."""
        ...

    async def queue_stats(self, *, now: float) -> dict[str, tuple[int, float | None]]:
        """`runs` (queued) and `deliveries` (pending): (how many, age of the oldest in s)."""
        ...

    async def in_flight(self, *, now: float, sessions: Sequence[str]) -> InFlight:
        """Running runs per agent and pending events of each of `sessions`."""
        ...

    # lanes and pauses (hookwise.server.store.lanes)
    async def pause(self, p: Pause) -> int:
        """Record a pause (replacing one of the same mapping or agent) and hold the queued runs
        it covers; how many were held."""
        ...

    async def resume(self, kind: str, name: str) -> int | None:
        """Lift a pause and send the runs it held back to the queue, in order; how many went
        back (None: it was not paused)."""
        ...

    async def pauses(self) -> list[Pause]:
        """Every pause in force, oldest first."""
        ...

    async def waive_budget(self, kind: str, name: str, *, until: float, by: str) -> None:
        """An operator released the budget of a mapping or agent: unchecked until `until`."""
        ...

    async def budget_waiver(self, kind: str, name: str) -> float | None:
        """Until when the budget of a mapping or agent is waived (None: it is not)."""
        ...

    async def raise_budget(self, raised: BudgetRaise) -> None:
        """An operator raised the budget of a mapping or agent until `raised.until` (replacing
        an earlier raise of it)."""
        ...

    async def budget_raises(self) -> list[BudgetRaise]:
        """Every raise stored (ended ones too, until replaced), by kind and name."""
        ...

    async def lanes(self) -> list[LaneStat]:
        """Each lane (agent, mapping) with runs queued or held."""
        ...

    async def readiness(self) -> list[str]:
        """What keeps the store from serving (empty when it is ready)."""
        ...

    # requests kept for replay (`hooks.retainPayloads`)
    def keep_payload(self, payload: StoredPayload) -> None:
        """Keep a request for replay; written with the next group, never awaited."""
        ...

    async def get_payload(self, request_id: str) -> StoredPayload | None: ...

    async def delete_payload(self, request_id: str) -> bool: ...

    async def prune_payloads(self, *, before: float, batch: int = 1000) -> int:
        """Forget payloads kept since before `before`, in small batches; how many."""
        ...

    # the lock-out of wrong tokens, shared by the processes of one store
    async def auth_failure(
        self, client: str, *, now: float, window: float, max_failures: int, lockout: float
    ) -> float | None:
        """Count a failure; the end of the lock-out when this failure starts one."""
        ...

    async def auth_locked_until(self, client: str, *, now: float) -> float | None: ...

    async def auth_success(self, client: str) -> None: ...

    # the audit log of operator actions (`store.audit`; listed by `admin_list("audit", ...)`)
    async def record_audit(self, entry: AuditRecord) -> None:
        """Keep one operator action; committed when this returns."""
        ...

    # the console's sessions that were logged out
    async def end_console_session(self, session_id: str, *, now: float) -> None: ...

    async def console_session_ended(self, session_id: str) -> bool: ...

    # signals between processes, and leaderships (one process runs a loop at a time)
    async def notify(self, topic: str) -> None:
        """Tell every process (this one at once, the others within a poll)."""
        ...

    def subscribe(self, topic: str, callback: Callable[[], None]) -> None:
        """Call `callback` on the event loop whenever `topic` is notified by any process."""
        ...

    async def try_lead(self, name: str) -> bool: ...

    async def resign(self, name: str) -> None: ...

    # alerts (`hookwise.server.store.alerts`): at most one active per rule and key
    async def open_alert(self, alert: NewAlert, notes: tuple[NewDelivery, ...]) -> bool:
        """Open `alert` and plan its notifications in one commit, unless an alert of its rule
        and key is active (then nothing is written); whether it opened."""
        ...

    async def alerts_seen(self, seen: Sequence[SeenAlert], *, now: float) -> None:
        """Active alerts still hold: count each, keep its newest value, summary and subjects;
        all of a round's in one statement (a resolved one is left alone)."""
        ...

    async def resolve_alert(
        self, alert_id: str, *, now: float, notes: tuple[NewDelivery, ...]
    ) -> bool:
        """Resolve an active alert and plan its notifications in one commit; whether it did."""
        ...

    async def ack_alert(self, alert_id: str, *, now: float, by: str) -> AlertRecord | None:
        """Acknowledge an open alert (others are left as they are); the alert after it."""
        ...

    async def get_alert(self, alert_id: str) -> AlertRecord | None: ...

    async def active_alerts(self) -> list[AlertRecord]:
        """Every alert not resolved, oldest first."""
        ...

    # retention
    async def retention_boundary(self, target: Target, cutoff: float) -> int:
        """The highest seq of `target`'s table older than `cutoff` (0: nothing is)."""
        ...

    async def prune_batch(self, target: Target, *, upto: int, cutoff: float, limit: int) -> int:
        """Delete up to `limit` finished rows of `target` with seq <= `upto` older than
        `cutoff`, oldest first; how many went."""
        ...

    async def reclaim(self, targets: list[Target]) -> None:
        """Make the space pruned rows held reusable (PostgreSQL vacuums; SQLite reuses it)."""
        ...
