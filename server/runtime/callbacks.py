"""What a run's callback says: the signed POST of its outcome, planned with its ending.

A run whose mapping has a `callback` carries the URL it was accepted with (`runs.callback_url`).
When the run ends (succeeded, failed or timed out), its ending commits, in the same transaction,
a pending delivery named `callback:<rule id>` to that URL whose text is the outcome as a Standard
Webhooks payload; the delivery worker signs and sends it (`hookwise.server.channels.webhook`)
with its retries, back-off, dead letters and records, like any delivery.

The payload: `{"type": "run.succeeded" | "run.failed" | "run.timed_out", "timestamp", "data":
{"runId", "rule", "agentId", "sessionKey", "state", "reply", "error", "model", "usage"}}`.

Lifecycle subscribers (`events.subscribers`) get the same payload, typed `run.finished` (every
ending) or `run.<state>`, as deliveries named `event:<index>`, committed with the ending too.
A delivery that fails for good plans `delivery.failed` events the same way, committed with its
`failed` state (`failed_events`).
"""

from __future__ import annotations

import attrs

from ...engine.config.models import SubscriberConfig
from ..channels.webhook import CALLBACK_PREFIX, EVENT_PREFIX, envelope
from ..ids import new_id
from ..store.base import RunRecord
from ..store.records import DeliveryRecord, NewDelivery, RunOutcome


def outcome_data(run: RunRecord, outcome: RunOutcome) -> dict[str, object]:
    return {
        "runId": run.run_id,
        "rule": run.rule_id,
        "agentId": run.agent_id,
        "sessionKey": run.session_key,
        "state": outcome.state,
        "reply": outcome.reply,
        "error": outcome.error,
        "model": outcome.model_used,
        "usage": {"inputTokens": outcome.input_tokens, "outputTokens": outcome.output_tokens},
    }


def callback_of(run: RunRecord, outcome: RunOutcome) -> NewDelivery | None:
    """The pending delivery of the run's outcome to its callback URL, if it has one."""
    if not run.callback_url or run.rule_id is None:
        return None
    body = envelope(f"run.{outcome.state}", outcome_data(run, outcome), now=outcome.finished_at)
    return NewDelivery(
        delivery_id=new_id(),
        text=body,
        state="pending",
        channel=CALLBACK_PREFIX + run.rule_id,
        to=run.callback_url,
        run_id=run.run_id,
    )


@attrs.frozen
class SignedOutcomes:
    """Every signed POST a run's ending plans: its callback, and one per lifecycle subscriber
    per type it asked for that this ending is (`run.finished` for every ending, `run.<state>`
    for its state)."""

    subscribers: tuple[SubscriberConfig, ...] = ()

    def __call__(self, run: RunRecord, outcome: RunOutcome) -> tuple[NewDelivery, ...]:
        out = [d for d in (callback_of(run, outcome),) if d is not None]
        data = outcome_data(run, outcome)
        for i, sub in enumerate(self.subscribers):
            for kind in ("run.finished", f"run.{outcome.state}"):
                if kind in sub.types:
                    out.append(
                        NewDelivery(
                            delivery_id=new_id(),
                            text=envelope(kind, data, now=outcome.finished_at),
                            state="pending",
                            channel=f"{EVENT_PREFIX}{i}",
                            to=sub.url,
                            run_id=run.run_id,
                        )
                    )
        return tuple(out)


def failed_events(
    subscribers: tuple[SubscriberConfig, ...], d: DeliveryRecord, reason: str, *, now: float
) -> tuple[NewDelivery, ...]:
    """The `delivery.failed` events of a delivery that failed for good, one per subscriber that
    asks for them; none for a lifecycle event's own delivery (no event about an event, so a dead
    subscriber cannot feed itself)."""
    if (d.channel or "").startswith(EVENT_PREFIX):
        return ()
    data = {
        "deliveryId": d.delivery_id,
        "runId": d.run_id,
        "heartbeatId": d.heartbeat_id,
        "channel": d.channel,
        "attempts": d.attempts,
        "error": reason,
    }
    return tuple(
        NewDelivery(
            delivery_id=new_id(),
            text=envelope("delivery.failed", data, now=now),
            state="pending",
            channel=f"{EVENT_PREFIX}{i}",
            to=sub.url,
        )
        for i, sub in enumerate(subscribers)
        if "delivery.failed" in sub.types
    )
