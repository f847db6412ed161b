"""What each alert kind watches: a registry of small checks over what the store already records.

A check takes the rule and a `Look` (the store, the time, the hook path) and returns the
`Finding`s that hold now, each with its key (the channel, the model, the mapping held...), the
value measured, a sentence, and the ids of the requests, runs or deliveries behind it. The rule
holds for a key when its value reaches the rule's threshold (`holds`); keys of active alerts
that no longer hold are resolved by the evaluator. A new kind is one function registered with
`@kind("name")` plus its line in `hookwise.engine.config.alerts.KINDS` (its scope and defaults);
a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from ...engine.config.alerts import AlertRuleConfig
from ..store.base import Store
from ..store.lanes import BY_BUDGET
from ..store.listing import FAILED_RUN_STATES
from ..store.records import Filters

#: how many rows a check reads at most (a count past it is reported as "at least")
SCAN = 500


@attrs.frozen
class Look:
    """What a check may look at: the store, now, and the hook path (for `path` scopes)."""

    store: Store
    now: float
    hook_path: str = "/hooks"


@attrs.frozen
class Finding:
    """A key for which the rule's condition was measured: its value and what is behind it."""

    key: str
    value: float
    summary: str
    subjects: dict[str, tuple[str, ...]] = attrs.field(factory=dict)


Check = Callable[[AlertRuleConfig, Look], Awaitable[list[Finding]]]

#: every alert kind's check, by name (the names of `hookwise.engine.config.alerts.KINDS`)
CHECKS: dict[str, Check] = {}


def kind(name: str) -> Callable[[Check], Check]:
    """Register the check of alert kind `name`."""

    def register(check: Check) -> Check:
        CHECKS[name] = check
        return check

    return register


def holds(rule: AlertRuleConfig, finding: Finding) -> bool:
    return finding.value >= rule.limit


def _ago(seconds: float) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


async def _rows(look: Look, listing: str, equal: dict[str, Any], since: float | None) -> list[Any]:
    page = await look.store.admin_list(
        listing, Filters(equal, since=since), limit=SCAN, cursor=None
    )
    return list(page.items)


def _many(found: list[Any], scanned: list[Any]) -> str:
    """How many were found, `at least` when the read stopped at `SCAN` rows."""
    return f"at least {len(found)}" if len(scanned) >= SCAN else str(len(found))


def _failing(d: Any) -> bool:
    return d.state == "failed" or (d.state == "pending" and d.last_error is not None)


@kind("deliveries_failing")
async def deliveries_failing(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Deliveries to the channel created in the window that failed for good or are waiting for
    another attempt after a failure; none while the channel's latest outcome is a success."""
    channel = rule.channel or ""
    rows = await _rows(look, "deliveries", {"channel": channel}, look.now - rule.seconds)
    failing = [d for d in rows if _failing(d)]
    settled = [d for d in rows if d.state == "sent" or _failing(d)]
    latest = max(settled, key=lambda d: d.updated_at, default=None)
    if not failing or (latest is not None and latest.state == "sent"):
        return []
    return [
        Finding(
            channel,
            len(failing),
            f"{_many(failing, rows)} deliveries to {channel} failing in the last {_ago(rule.seconds)}"
            f" (latest error: {failing[0].last_error})",
            {"deliveries": tuple(d.delivery_id for d in failing)},
        )
    ]


@kind("runs_failing")
async def runs_failing(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Runs of the mapping created in the window that ended failed or timed out."""
    mapping = rule.mapping or ""
    rows = await _rows(look, "runs", {"rule_id": mapping}, look.now - rule.seconds)
    bad = [r for r in rows if r.state in FAILED_RUN_STATES]
    if not bad:
        return []
    return [
        Finding(
            mapping,
            len(bad),
            f"{_many(bad, rows)} runs of mapping {mapping} failed or timed out in the last"
            f" {_ago(rule.seconds)}",
            {"runs": tuple(r.run_id for r in bad)},
        )
    ]


@kind("dead_letters")
async def dead_letters(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Deliveries created in the window that failed for good (dead letters)."""
    rows = await _rows(look, "deliveries", {"state": "failed"}, look.now - rule.seconds)
    if not rows:
        return []
    return [
        Finding(
            "all",
            len(rows),
            f"{_many(rows, rows)} deliveries failed for good in the last {_ago(rule.seconds)}",
            {"deliveries": tuple(d.delivery_id for d in rows)},
        )
    ]


@kind("queue_age")
async def queue_age(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """The age of the oldest queued run or pending delivery (`queue: runs | deliveries`)."""
    queue = rule.queue or "runs"
    depth, age = (await look.store.queue_stats(now=look.now)).get(queue, (0, None))
    if not depth or age is None:
        return []
    summary = f"the oldest of {depth} {queue} waiting is {age:.0f}s old"
    return [Finding(queue, age, summary)]


@kind("breaker_open")
async def breaker_open(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Each model whose breaker is open or half-open."""
    found = []
    for b in await look.store.breakers():
        state = b.state_at(look.now)
        if state != "closed":
            summary = f"the breaker of model {b.model} is {state} ({b.last_error_class})"
            found.append(Finding(b.model, max(1.0, float(b.failures)), summary))
    return found


@kind("budget_crossed")
async def budget_crossed(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Each mapping or agent held because its budget is spent."""
    return [
        Finding(
            f"{p.kind}:{p.name}",
            1.0,
            f"the {p.kind} {p.name} is held: its budget is spent ({p.reason})",
        )
        for p in await look.store.pauses()
        if p.paused_by == BY_BUDGET
    ]


@kind("runs_held")
async def runs_held(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Runs held (a paused mapping or agent, a spent budget), however old."""
    rows = await _rows(look, "runs", {"state": "held"}, None)
    if not rows:
        return []
    return [
        Finding(
            "held",
            len(rows),
            f"{_many(rows, rows)} runs are held",
            {"runs": tuple(r.run_id for r in rows)},
        )
    ]


@kind("approvals_waiting")
async def approvals_waiting(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """The age of the oldest tool call waiting for a person's approval."""
    stats = await look.store.pending_approvals()
    if not stats.count or stats.oldest_created_at is None:
        return []
    age = max(0.0, look.now - stats.oldest_created_at)
    pending = await look.store.approvals(state="pending", limit=SCAN)
    summary = f"{stats.count} tool call(s) wait for approval, the oldest for {_ago(round(age))}"
    runs = tuple(dict.fromkeys(a.run_id for a in pending))
    return [Finding("approvals", age, summary, {"runs": runs})]


@kind("signature_failures")
async def signature_failures(rule: AlertRuleConfig, look: Look) -> list[Finding]:
    """Requests to the path refused with `invalid_signature` in the window."""
    path = rule.path or ""
    if not path.startswith("/"):
        path = f"{look.hook_path.rstrip('/')}/{path}"
    rows = await _rows(look, "requests", {"path": path, "status": 401}, look.now - rule.seconds)
    bad = [e for e in rows if e.code == "invalid_signature"]
    if not bad:
        return []
    return [
        Finding(
            path,
            len(bad),
            f"{_many(bad, rows)} requests to {path} with a bad signature in the last"
            f" {_ago(rule.seconds)}",
            {"requests": tuple(e.request_id for e in bad)},
        )
    ]


async def evaluate(rule: AlertRuleConfig, look: Look) -> Sequence[Finding]:
    """The findings of `rule` that reach its threshold now."""
    return [f for f in await CHECKS[rule.kind](rule, look) if holds(rule, f)]
