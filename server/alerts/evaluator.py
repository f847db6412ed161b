"""The alert evaluator: every `alerts.interval`, one process (the `alerts` leader when several
share the store) checks each rule (`hookwise.server.alerts.kinds`) and moves its alerts.

- A key that holds and has no active alert opens one (`Store.open_alert`): its notifications to
  the rule's targets are pending deliveries committed with it, sent by the delivery worker with
  its retries, fallbacks and records. The store's unique index makes a second open of the same
  rule and key (a race between two leaders) write nothing: an alert opens once.
- A key that holds and has an active alert (open or acknowledged) is counted (`seen`), its
  newest value and the ids behind it kept (merged with those it had when the round began);
  nobody is told again. All of a round's are one statement (`Store.alerts_seen`).
- An active alert whose key no longer holds resolves, with a resolve notification.
- A check that fails (the store did not answer) changes nothing for its rule: an alert is never
  resolved because its condition could not be measured. It is logged and counted.
- Active alerts of rules no longer configured are resolved without notification.

Each transition is a log line with the alert's id, rule and key, and a metric.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

from ...engine.config.alerts import AlertRuleConfig, AlertsConfig, split_target
from ...engine.errors import ConfigError, ConfigIssue
from .. import metrics
from ..channels.base import Channel
from ..channels.registry import canonical_id
from ..ids import new_id
from ..logs import fields
from ..store.alerts import AlertRecord, NewAlert, SeenAlert, merge_subjects
from ..store.base import Store
from ..store.records import NewDelivery
from .kinds import CHECKS, Finding, Look, evaluate

log = logging.getLogger("hookwise.alerts")

LEADERSHIP = "alerts"
#: seconds one rule's check may take before it counts as failed (the store did not answer)
CHECK_TIMEOUT = 10.0


def check_targets(config: AlertsConfig, channels: Mapping[str, Channel]) -> None:
    """Refuse targets naming a channel that is not configured or a recipient it refuses, and
    rules without any target; every problem with its key path."""
    issues = []

    def check(path: str, target: str) -> None:
        name, to = split_target(target)
        channel = channels.get(canonical_id(name) or name)
        if channel is None:
            issues.append(ConfigIssue(path, "names no configured channel"))
        elif to is None and not channel.default_to:
            issues.append(ConfigIssue(path, f"names no recipient and {name} has no defaultTo"))
        elif to is not None and (problem := channel.validate_recipient(to)):
            issues.append(ConfigIssue(path, f"invalid recipient: {problem}"))

    for i, target in enumerate(config.notify):
        check(f"alerts.notify[{i}]", target)
    for n, rule in enumerate(config.rules):
        for i, target in enumerate(rule.notify or ()):
            check(f"alerts.rules[{n}].notify[{i}]", target)
        if not config.targets(rule):
            issues.append(
                ConfigIssue(f"alerts.rules[{n}]", "tells nobody: set alerts.notify or its notify")
            )
    if issues:
        raise ConfigError(issues)


def notification_text(state: str, rule: str, key: str, summary: str, alert_id: str) -> str:
    """What a person reads: `[ALERT] <rule> (<key>): <summary> (alert <id>)`."""
    head = "[ALERT]" if state == "opened" else "[RESOLVED]"
    return f"{head} {rule} ({key}): {summary} (alert {alert_id})"


class AlertEvaluator:
    """Evaluates the configured rules and moves the alerts in the store."""

    def __init__(
        self,
        store: Store,
        config: AlertsConfig,
        *,
        shared: bool,
        hook_path: str = "/hooks",
        on_planned: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.config = config
        self._shared = shared
        self._hook_path = hook_path
        #: called after notifications were committed (wakes this process's delivery worker)
        self._on_planned = on_planned
        self._clock = clock

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(float(self.config.interval))
            try:
                await self.evaluate_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("evaluating the alert rules failed; trying again")

    async def evaluate_once(self) -> dict[str, int]:
        """One round over every rule; how many alerts opened, stayed and resolved."""
        counts = {"opened": 0, "seen": 0, "resolved": 0}
        active = await self._store.active_alerts()
        rules = {r.rule_id for r in self.config.rules}
        if not rules and not active:
            return counts
        if self._shared and not await self._store.try_lead(LEADERSHIP):
            return counts
        now = self._clock()
        look = Look(self._store, now, self._hook_path)
        planned = False
        seen: list[SeenAlert] = []
        for rule in self.config.rules:
            mine = {a.key: a for a in active if a.rule == rule.rule_id}
            try:
                async with asyncio.timeout(CHECK_TIMEOUT):
                    found = await evaluate(rule, look)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "alert rule %s: the check failed; its alerts stay as they are", rule.rule_id
                )
                metrics.alert_check_failed(rule.rule_id)
                continue
            for finding in found:
                alert = mine.pop(finding.key, None)
                if alert is None:
                    if await self._open(rule, finding, now):
                        planned = True
                        counts["opened"] += 1
                else:
                    subjects = merge_subjects(alert.subjects, finding.subjects)
                    seen.append(SeenAlert(alert.alert_id, finding.value, finding.summary, subjects))
                    counts["seen"] += 1
            for alert in mine.values():
                planned |= await self._resolve(alert, now, self._notes(rule, alert, now))
                counts["resolved"] += 1
        await self._store.alerts_seen(seen, now=now)
        for alert in active:
            if alert.rule not in rules:  # its rule was removed from the configuration
                await self._resolve(alert, now, ())
                counts["resolved"] += 1
        if planned:
            self._on_planned()
        return counts

    async def _open(self, rule: AlertRuleConfig, finding: Finding, now: float) -> bool:
        alert = NewAlert(
            alert_id=new_id(),
            rule=rule.rule_id,
            kind=rule.kind,
            key=finding.key,
            summary=finding.summary,
            value=finding.value,
            threshold=rule.limit,
            now=now,
            subjects=finding.subjects,
        )
        text = notification_text(
            "opened", rule.rule_id, finding.key, finding.summary, alert.alert_id
        )
        notes = self._deliveries(rule, text)
        if not await self._store.open_alert(alert, notes):
            return False  # another process opened it first (or it was resolved just now)
        metrics.alert_transition(rule.rule_id, "opened")
        log.warning(
            "alert %s opened: %s (%s): %s",
            alert.alert_id,
            rule.rule_id,
            finding.key,
            finding.summary,
            extra=fields(
                alert_id=alert.alert_id,
                rule=rule.rule_id,
                key=finding.key,
                delivery_ids=[d.delivery_id for d in notes],
            ),
        )
        return True

    def _notes(
        self, rule: AlertRuleConfig, alert: AlertRecord, now: float
    ) -> tuple[NewDelivery, ...]:
        summary = f"cleared after {now - alert.opened_at:.0f}s (was: {alert.summary})"
        text = notification_text("resolved", alert.rule, alert.key, summary, alert.alert_id)
        return self._deliveries(rule, text)

    async def _resolve(
        self, alert: AlertRecord, now: float, notes: tuple[NewDelivery, ...]
    ) -> bool:
        if not await self._store.resolve_alert(alert.alert_id, now=now, notes=notes):
            return False
        metrics.alert_transition(alert.rule, "resolved")
        log.info(
            "alert %s resolved: %s (%s)",
            alert.alert_id,
            alert.rule,
            alert.key,
            extra=fields(
                alert_id=alert.alert_id,
                rule=alert.rule,
                key=alert.key,
                delivery_ids=[d.delivery_id for d in notes],
            ),
        )
        return bool(notes)

    def _deliveries(self, rule: AlertRuleConfig, text: str) -> tuple[NewDelivery, ...]:
        out = []
        for target in self.config.targets(rule):
            channel, to = split_target(target)
            out.append(
                NewDelivery(
                    delivery_id=new_id(),
                    text=text,
                    state="pending",
                    channel=canonical_id(channel) or channel,
                    to=to,  # None: the channel's defaultTo, when it is sent
                )
            )
        return tuple(out)

    async def open_counts(self) -> dict[str, int]:
        """Active alerts per configured rule (0 for a rule with none; others under `other`)."""
        counts = {r.rule_id: 0 for r in self.config.rules}
        for alert in await self._store.active_alerts():
            name = alert.rule if alert.rule in counts else "other"
            counts[name] = counts.get(name, 0) + 1
        return counts


__all__ = ["CHECKS", "LEADERSHIP", "AlertEvaluator", "check_targets", "notification_text"]
