"""Dispatch: the one narrow interface from the HTTP layer to durable state and the runtime.

`Dispatcher.dispatch` takes validated actions, writes them (events, queued runs, the idempotency
record and the request log line) in one group-committed transaction, and only then returns the
response to send. After a commit that created something, it tells its listeners (the runtime) so
that a heartbeat or a run can start without polling.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ...engine.actions import Action, AgentAction, NotifyAction, WakeAction
from ...engine.config.mapping import RespondConfig
from ...engine.request import InboundRequest
from ...engine.signatures import Verifier
from .. import telemetry
from ..channels.webhook import CALLBACK_PREFIX, envelope
from ..ids import new_id
from ..store.base import Accepted, AcceptOp, NewEvent, NewRun, RequestLogEntry, Store
from ..store.bounded import within_store_wait
from ..store.coalesce import CoalesceSpec
from ..store.records import NewDelivery
from .asgi import encode_json

log = logging.getLogger("hookwise.dispatch")

Listener = Callable[[Sequence[NewEvent], Sequence[NewRun]], None]


#: the longest provider's event type or delivery id the request log keeps
MAX_PROVIDER_VALUE = 200


@attrs.frozen
class RequestMeta:
    """What the request log records about a request: never the payload or the token. Immutable:
    made once the body is read (the hook endpoint), and anew when the walk learns the provider's
    names for the event and the delivery (`named_by`)."""

    path: str
    client: str | None
    size: int
    #: the id of the request's log line (and of its kept payload)
    request_id: str = attrs.field(factory=new_id)
    #: the provider's name of the event and id of the delivery, where its scheme gives them
    event_type: str | None = None
    delivery_id: str | None = None

    def named_by(self, verifier: Verifier, request: InboundRequest) -> RequestMeta:
        """This request with what the provider calls the event and the delivery, as `verifier`'s
        scheme reads them from `request` (headers, or the payload); a name already known stays."""
        event_type = self.event_type or provider_value(verifier.event_type(request))
        delivery_id = self.delivery_id or provider_value(verifier.delivery_id(request))
        if event_type == self.event_type and delivery_id == self.delivery_id:
            return self
        return RequestMeta(
            self.path, self.client, self.size, self.request_id, event_type, delivery_id
        )


def provider_value(value: str | None) -> str | None:
    """A provider's event type or delivery id as the request log keeps it: printable, bounded."""
    if value is None:
        return None
    text = value.strip()
    return text[:MAX_PROVIDER_VALUE] if text.isprintable() and text else None


def _run(
    action: AgentAction,
    rule_id: str | None,
    callback_url: str | None = None,
    sender: str | None = None,
) -> NewRun:
    return NewRun(
        run_id=new_id(),
        session_key=action.session_key or f"hook:{new_id()}",
        name=action.name,
        message=action.message,
        rule_id=rule_id,
        wake_mode=action.wake_mode,
        deliver=action.deliver,
        channel=action.channel,
        to=action.to,
        model=action.model,
        thinking=action.thinking,
        timeout_seconds=action.timeout_seconds,
        fallback_channel=action.fallback_channel,
        allow_unsafe_external_content=action.allow_unsafe_external_content,
        agent_id=action.agent_id,
        callback_url=callback_url,
        trace=telemetry.traceparent(),  # the request's trace continues in the run's process
        sender=sender,
    )


def _event(action: WakeAction, rule_id: str | None) -> NewEvent:
    return NewEvent(
        event_id=new_id(),
        session=action.session,
        text=action.text,
        source=f"hook:{rule_id}" if rule_id else "hook",
        mode=action.mode,
        trusted=False,
    )


def _notes(
    action: NotifyAction, rule_id: str | None, callback_url: str | None
) -> list[NewDelivery]:
    """A notification's deliveries: to its channel, and to the mapping's callback, if any."""
    notes = []
    if action.channel is not None:
        notes.append(
            NewDelivery(
                delivery_id=new_id(),
                text=action.text,
                state="pending",
                channel=action.channel,
                to=action.to,  # None: the channel's defaultTo, when it is sent
            )
        )
    if callback_url is not None and rule_id is not None:
        body = envelope("notification", {"rule": rule_id, "text": action.text})
        notes.append(
            NewDelivery(
                delivery_id=new_id(),
                text=body,
                state="pending",
                channel=CALLBACK_PREFIX + rule_id,
                to=callback_url,
            )
        )
    return notes


def respond_body(respond: RespondConfig) -> bytes | None:
    """A mapping's fixed answer body: a string as is, anything else as JSON, None for none."""
    body = respond.body
    if body is None:
        return None
    return body.encode() if isinstance(body, str) else encode_json(body)


def _response(
    events: list[NewEvent],
    runs: list[NewRun],
    rule_id: str | None,
    respond: RespondConfig | None,
    notes: Sequence[NewDelivery] = (),
    coalesced: bool = False,
) -> tuple[int, bytes | None]:
    if respond is not None and respond.wait is None:  # a waited answer is the run's
        return respond.status, respond_body(respond)
    out: dict[str, Any] = {"ok": True}
    if notes and not events and not runs:
        out["deliveryIds"] = [d.delivery_id for d in notes]
        if rule_id is not None:
            out["rule"] = rule_id
        return 202, encode_json(out)
    if len(events) + len(runs) == 1:
        if events:
            out.update(mode=events[0].mode, eventId=events[0].event_id)
        else:
            out.update(runId=runs[0].run_id, sessionKey=runs[0].session_key)
    else:
        out["events"] = [{"eventId": e.event_id, "mode": e.mode} for e in events]
        out["runs"] = [{"runId": r.run_id, "sessionKey": r.session_key} for r in runs]
    if rule_id is not None:
        out["rule"] = rule_id
    if coalesced:
        out["coalesced"] = True
    return (202 if runs else 200), encode_json(out)


class Dispatcher:
    """Persists accepted actions and answers for them."""

    def __init__(
        self,
        store: Store,
        *,
        idempotency_window: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.idempotency_window = idempotency_window
        self._clock = clock
        self._listeners: list[Listener] = []
        #: called when notifications were committed (the delivery worker's wake-up)
        self.on_deliveries: Callable[[], None] = lambda: None

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def dispatch(
        self,
        actions: Sequence[Action],
        *,
        meta: RequestMeta,
        rule_id: str | None = None,
        respond: RespondConfig | None = None,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
        callback_url: str | None = None,
        coalesce: CoalesceSpec | None = None,
        sender: str | None = None,
    ) -> Accepted:
        """Commit what a request made (one transaction); `sender` is who the door or the rule
        verified (`hookwise.server.runtime.senders`), stamped on its runs."""
        events = [_event(a, rule_id) for a in actions if isinstance(a, WakeAction)]
        runs = [
            _run(a, rule_id, callback_url, sender) for a in actions if isinstance(a, AgentAction)
        ]
        notes = [
            d
            for a in actions
            if isinstance(a, NotifyAction)
            for d in _notes(a, rule_id, callback_url)
        ]
        if len(runs) != 1 or events or notes:  # only a request of one run coalesces
            coalesce = None
        now = self._clock()
        if coalesce is not None:
            runs = [attrs.evolve(runs[0], not_before=now + min(coalesce.window, coalesce.max_wait))]
        status, body = _response(events, runs, rule_id, respond, notes, coalesce is not None)
        kind = "wake" if not runs else "agent" if not events else "mixed"
        if notes and not events and not runs:
            kind = "notify"
        op = AcceptOp(
            status=status,
            body=body if body is not None else b"",
            log=RequestLogEntry(
                at=now,
                path=meta.path,
                status=status,
                client=meta.client,
                size=meta.size,
                action=kind,
                rule_id=rule_id,
                request_id=meta.request_id,
                event_ids=tuple(e.event_id for e in events),
                run_ids=tuple(r.run_id for r in runs),
                event_type=meta.event_type,
                delivery_id=meta.delivery_id,
                trace_id=telemetry.trace_id(),
            ),
            events=tuple(events),
            runs=tuple(runs),
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            now=now,
            idempotency_window=self.idempotency_window,
            deliveries=tuple(notes),
            coalesce=coalesce,
        )
        accepted = await within_store_wait(self.store.accept(op))
        if accepted.joined is not None and coalesce is not None:
            # the waiting run it joined: its window now closes `window` from now (or sooner)
            runs = [attrs.evolve(runs[0], run_id=accepted.joined, not_before=now + coalesce.window)]
            log.info(
                "%s: joined run %s (coalesce key %r)", meta.path, accepted.joined, coalesce.key
            )
        if not accepted.replayed and not accepted.conflict:
            for listener in self._listeners:
                try:
                    listener(events, runs)
                except Exception:  # committed is committed: the answer must still be sent
                    log.exception("a dispatch listener failed")
            if notes:
                self.on_deliveries()
        return accepted

    def refused(
        self,
        meta: RequestMeta,
        status: int,
        code: str,
        rule_id: str | None = None,
        action: str | None = None,
    ) -> None:
        """Record a refused (or answered, not dispatched) request in the request log (not
        awaited); `action` is `handshake` for a provider's verification handshake."""
        self.store.log_request(
            RequestLogEntry(
                at=self._clock(),
                path=meta.path,
                status=status,
                client=meta.client,
                size=meta.size,
                action=action,
                rule_id=rule_id,
                code=code,
                request_id=meta.request_id,
                event_type=meta.event_type,
                delivery_id=meta.delivery_id,
                trace_id=telemetry.trace_id(),
            )
        )
