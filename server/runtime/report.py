"""What the runtime reports when work ends: one log line with the ids, and the metrics.

A run's ending is one line (INFO when it succeeded, WARNING when it `failed` or `timed_out`)
with its run id, agent, rule, session key, state, duration and error; a delivery that fails for
good (however early: one that had nowhere to go when its run ended, too) and a heartbeat that
fails are one WARNING each; a skipped delivery is an INFO line. Each is counted once. In the JSON log format the ids are fields
of their own (see `hookwise.server.logs.fields`). Never a payload: the lines carry ids, states
and the error text the providers and channels already clip and redact.
"""

from __future__ import annotations

import logging

from .. import metrics
from ..logs import fields
from ..store.base import RunRecord
from ..store.records import DeliveryRecord, HeartbeatOutcome, NewDelivery, RunOutcome

log = logging.getLogger("hookwise.report")

DEFAULT_AGENT = "main"


def agent_of(run: RunRecord) -> str:
    """The agent a run belongs to."""
    return run.agent_id


def run_ended(run: RunRecord, outcome: RunOutcome) -> None:
    agent = agent_of(run)
    duration = outcome.finished_at - run.started_at if run.started_at is not None else None
    ok = outcome.state == "succeeded"
    log.log(
        logging.INFO if ok else logging.WARNING,
        "run %s %s in %s (agent %s, rule %s, session %s)%s",
        run.run_id,
        outcome.state,
        "?" if duration is None else f"{duration:.3f} s",
        agent,
        run.rule_id or "-",
        run.session_key,
        "" if ok else f": {outcome.error}",
        extra=fields(
            runId=run.run_id,
            agent=agent,
            rule=run.rule_id,
            sessionKey=run.session_key,
            state=outcome.state,
            durationSeconds=None if duration is None else round(duration, 6),
            error=outcome.error,
            attempt=run.attempts,
        ),
    )
    metrics.run_ended(agent, outcome.state, duration)


def delivery_planned(d: NewDelivery | None) -> None:
    """A delivery was committed with its run's or heartbeat's ending: one that ended there
    (`failed`: nothing to deliver to; `skipped`: nothing to deliver) is logged and counted
    like one that ends later."""
    if d is None or d.state == "pending":
        return
    failed = d.state == "failed"
    log.log(
        logging.WARNING if failed else logging.INFO,
        "delivery %s (%s) %s: %s",
        d.delivery_id,
        _owner(d.run_id, d.heartbeat_id),
        d.state,
        d.last_error,
        extra=fields(
            deliveryId=d.delivery_id,
            runId=d.run_id,
            heartbeatId=d.heartbeat_id,
            channel=d.channel,
            state=d.state,
            error=d.last_error,
        ),
    )
    metrics.delivery(d.channel, d.state)


def _owner(run_id: str | None, heartbeat_id: str | None) -> str:
    if run_id:
        return f"run {run_id}"
    return f"heartbeat {heartbeat_id}" if heartbeat_id else "no run"


def delivery_sent(d: DeliveryRecord, channel: str) -> None:
    metrics.delivery(channel, "sent")


def delivery_retried(d: DeliveryRecord) -> None:
    metrics.delivery(d.channel, "retried")


def delivery_failed(d: DeliveryRecord, reason: str) -> None:
    """A delivery failed for good (no attempt or fallback left)."""
    log.warning(
        "delivery %s (%s) to %s failed: %s",
        d.delivery_id,
        _owner(d.run_id, d.heartbeat_id),
        d.channel or "no channel",
        reason,
        extra=fields(
            deliveryId=d.delivery_id,
            runId=d.run_id,
            heartbeatId=d.heartbeat_id,
            channel=d.channel,
            attempts=d.attempts,
            error=reason,
        ),
    )
    metrics.delivery(d.channel, "failed")


def heartbeat_ended(outcome: HeartbeatOutcome, events: int, agent: str = DEFAULT_AGENT) -> None:
    result = "acknowledged" if outcome.acknowledged else outcome.state
    ok = outcome.state == "succeeded"
    log.log(
        logging.INFO if ok else logging.WARNING,
        "heartbeat %s (%s): %d event(s), %s%s",
        outcome.heartbeat_id,
        outcome.reason,
        events,
        result,
        "" if ok else f": {outcome.error}",
        extra=fields(
            heartbeatId=outcome.heartbeat_id,
            agent=agent,
            reason=outcome.reason,
            events=events,
            state=outcome.state,
            durationSeconds=round(outcome.finished_at - outcome.started_at, 6),
            error=outcome.error,
        ),
    )
    metrics.heartbeat(agent, result)


def heartbeat_crashed(agent: str = DEFAULT_AGENT) -> None:
    """A heartbeat that could not even be recorded (the exception is logged by the caller)."""
    metrics.heartbeat(agent, "error")
