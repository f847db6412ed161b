"""Lanes and pauses, as both stores keep them: the records and the SQL both speak.

A lane is where queued runs wait: one per agent and mapping (`rule_id`; none for `/hooks/agent`
requests). Inside a lane, runs of one session run one at a time, in acceptance order (the claim
of each store: `SESSION_FREE`). A pause holds the runs of a mapping or of an agent: they are
written `held` and no claim takes them until the pause is lifted; the agent's wakes (its main
session's events) and a mapping's wakes stay pending meanwhile. Pauses are rows of `pauses`
(migration 0012), so they hold in every process and across restarts. A budget by sender holds
one sender's runs of a mapping or an agent: a pause of kind `mapping-sender` or `agent-sender`
named `<mapping or agent>/<sender>` (`hookwise.server.store.senders`), written by a budget only.
"""

from __future__ import annotations

from typing import Literal

import attrs

from .senders import SENDER_NAME_SQL

PauseKind = Literal["mapping", "agent", "mapping-sender", "agent-sender"]
#: what an operator pauses (a sender is held by its budget only)
PAUSE_KINDS: tuple[PauseKind, ...] = ("mapping", "agent")
#: the column of `runs` (or the expression over it) a pause of each kind matches
PAUSED_COLUMN: dict[str, str] = {"mapping": "rule_id", "agent": "agent_id", **SENDER_NAME_SQL}
#: who paused a mapping whose configuration says `paused: true`
BY_CONFIG = "config"
#: who paused a mapping or an agent whose budget is spent (`hookwise.server.runtime.budgets`)
BY_BUDGET = "budget"


@attrs.frozen
class Pause:
    """A mapping or an agent whose runs and wakes are held: who paused it, when and why."""

    kind: PauseKind
    name: str
    paused_by: str
    paused_at: float
    reason: str | None = None
    #: an agent's main session (its wakes stay pending); None for a mapping
    session: str | None = None


@attrs.frozen
class BudgetRaise:
    """An operator's temporary raise of a mapping's or an agent's budget: its limits (None: the
    configured one) until `until`, by whom, when (`budget_raises`, migration 0025)."""

    kind: str
    name: str
    tokens: int | None
    cost: float | None
    until: float
    raised_by: str
    raised_at: float


@attrs.frozen
class LaneStat:
    """One lane's queue: runs waiting (`queued`), held, and the age of the oldest of either."""

    agent_id: str
    rule_id: str | None
    queued: int
    held: int
    oldest_created_at: float | None


def run_paused(run: str) -> str:
    """SQL: a pause holds the run aliased `run` (its agent or its mapping is paused)."""
    sender = f"COALESCE({run}.sender, 'none')"
    return (
        f"EXISTS (SELECT 1 FROM pauses p WHERE (p.kind = 'agent' AND p.name = {run}.agent_id)"
        f" OR (p.kind = 'mapping' AND p.name = {run}.rule_id)"
        f" OR (p.kind = 'agent-sender' AND p.name = {run}.agent_id || '/' || {sender})"
        f" OR (p.kind = 'mapping-sender' AND p.name = {run}.rule_id || '/' || {sender}))"
    )


def requeued_state(run: str) -> str:
    """SQL: the state in which the run aliased `run` goes (back) to the queue: `held` while a
    pause holds it (`run_paused`), else `queued`. Every statement that sets a run `queued` from
    another state than `held` uses it (a requeue after a stop, an expired lease reclaimed, a
    lost claim released, a retry, a decided approval), so a run that was running (or failed,
    or waiting) when its lane was paused comes back `held`, and the resume counts it."""
    return f"CASE WHEN {run_paused(run)} THEN 'held' ELSE 'queued' END"


def event_paused(event: str) -> str:
    """SQL: a pause holds the event aliased `event` (a wake of a paused mapping, whose source is
    `hook:<rule id>`, or one for a paused agent's main session)."""
    return (
        f"EXISTS (SELECT 1 FROM pauses p WHERE p.session = {event}.session"
        f" OR (p.kind = 'mapping' AND {event}.source = 'hook:' || p.name))"
    )
