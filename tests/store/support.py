"""Builders for the store suite: requests, events, runs and deliveries with plain defaults."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import attrs

from hookwise.server.store.approvals import ApprovalRecord
from hookwise.server.store.base import AcceptOp, NewEvent, NewRun, RequestLogEntry
from hookwise.server.store.lanes import BY_BUDGET, Pause
from hookwise.server.store.records import HeartbeatOutcome, NewDelivery

NOW = 1_000_000.0
_ids = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def log_entry(path: str = "/hooks/agent", status: int = 202, at: float = NOW) -> RequestLogEntry:
    return RequestLogEntry(
        at=at, path=path, status=status, client="10.0.0.1", size=42, action="agent", rule_id="r1"
    )


def without_ids(entries: Any) -> list[RequestLogEntry]:
    """Request log entries with their (random, time-ordered) request ids blanked, to compare."""
    return [attrs.evolve(e, request_id="") for e in entries]


def new_event(session: str = "main", text: str = "hello", event_id: str | None = None) -> NewEvent:
    return NewEvent(
        event_id=event_id or unique("ev"),
        session=session,
        text=text,
        source="hook:test",
        mode="next-heartbeat",
        trusted=False,
    )


def new_run(
    run_id: str | None = None,
    *,
    timeout: float | None = None,
    session_key: str | None = None,
    agent_id: str = "main",
) -> NewRun:
    """A queued run; each in a session of its own unless `session_key` names one (runs of one
    session are claimed one at a time, in order)."""
    return NewRun(
        run_id=run_id or unique("run"),
        session_key=session_key or unique("hook:test"),
        name="Test",
        message="do it",
        rule_id="rule-1",
        wake_mode="now",
        deliver=True,
        channel="slack",
        to="C123",
        model="echo/echo",
        thinking="low",
        timeout_seconds=timeout,
        fallback_channel="discord",
        allow_unsafe_external_content=False,
        agent_id=agent_id,
    )


#: the sender of `sent_run`'s runs
SENDER = "github#0"
#: an operator's pauses and a budget's (by sender), each matching the runs of `sent_run()`
#: (mapping `rule-1`, agent `main`, sender `github#0`)
PAUSES = [
    Pause("mapping", "rule-1", "ops@127.0.0.1", NOW),
    Pause("agent", "main", "ops@127.0.0.1", NOW),
    Pause("mapping-sender", f"rule-1/{SENDER}", BY_BUDGET, NOW),
    Pause("agent-sender", f"main/{SENDER}", BY_BUDGET, NOW),
]


def sent_run(rule_id: str = "rule-1", agent_id: str = "main") -> NewRun:
    """A queued run of `SENDER` (of `rule_id` and `agent_id`: by default every pause of
    `PAUSES` holds it)."""
    return attrs.evolve(new_run(agent_id=agent_id), rule_id=rule_id, sender=SENDER)


def pending_approval(run_id: str, n: int, *, expires_at: float) -> ApprovalRecord:
    """A pending approval (`apr_<n>`, its token hash `<n>` * 64) of a merge by `run_id`."""
    return ApprovalRecord(
        approval_id=f"apr_{n}",
        run_id=run_id,
        seq=0,
        call_id=f"call_{n}",
        server="github",
        tool="merge_pull_request",
        arguments="{}",
        arguments_digest="sha256:0",
        token_hash=f"{n}" * 64,
        state="pending",
        created_at=NOW,
        expires_at=expires_at,
    )


def accept_op(
    *,
    events: tuple[NewEvent, ...] = (),
    runs: tuple[NewRun, ...] = (),
    key: str | None = None,
    fingerprint: str = "fp-1",
    now: float = NOW,
    window: float = 86400.0,
    status: int = 202,
    body: bytes = b'{"ok":true}',
    path: str = "/hooks/agent",
) -> AcceptOp:
    return AcceptOp(
        status=status,
        body=body,
        log=attrs.evolve(
            log_entry(path=path, status=status, at=now),
            event_ids=tuple(e.event_id for e in events),
            run_ids=tuple(r.run_id for r in runs),
        ),
        events=events,
        runs=runs,
        idempotency_key=key,
        fingerprint=fingerprint if key is not None else None,
        now=now,
        idempotency_window=window,
    )


def new_delivery(
    delivery_id: str | None = None,
    *,
    state: str = "pending",
    run_id: str | None = None,
    heartbeat_id: str | None = None,
    fallback_channel: str | None = "discord",
) -> NewDelivery:
    return NewDelivery(
        delivery_id=delivery_id or unique("dl"),
        text="the reply",
        state=state,
        channel="slack",
        to="C123",
        run_id=run_id,
        heartbeat_id=heartbeat_id,
        fallback_channel=fallback_channel,
    )


async def add_runs(
    store: Any, count: int, *, now: float = NOW, timeout: float | None = None
) -> list[str]:
    """Accept `count` runs in one request; their ids, oldest first."""
    runs = tuple(new_run(timeout=timeout) for _ in range(count))
    await store.accept(accept_op(runs=runs, now=now))
    return [r.run_id for r in runs]


async def add_delivery(store: Any, *, at: float = NOW, **kw: Any) -> str:
    """A delivery written by a finished heartbeat (nothing else creates one); its id."""
    hb = unique("hb")
    d = new_delivery(heartbeat_id=hb, **kw)
    await store.finish_heartbeat(
        HeartbeatOutcome(
            heartbeat_id=hb,
            reason="interval",
            state="succeeded",
            event_ids=(),
            requested_at=None,
            started_at=at,
            finished_at=at,
            reply="the reply",
            delivery=d,
        )
    )
    return d.delivery_id


async def eventually(
    probe: Callable[[], Any], *, timeout: float = 15.0, interval: float = 0.02, what: str = "it"
) -> Any:
    """Await until `probe()` (sync or async) is truthy; fail after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while loop.time() < deadline:
        last = probe()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
