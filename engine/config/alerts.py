"""`alerts:`: rules over what the gateway already knows, and who is told when one holds.

An alert rule names a `kind` (what it watches, see `KINDS`), the scope it watches where the kind
has one (`channel`, `mapping`, `path`, `queue`, `model`), a `threshold` and a `window` (each
with a documented default per kind, `KINDS[kind]`), and optionally its own `notify` targets
(otherwise `alerts.notify`). A target is `<channel>` (that channel's `defaultTo`) or
`<channel>:<recipient>` (`telegram:-100123`, `slack:#alerts`, `webhook:https://...`): what a
delivery already understands. `alerts.interval` is how often the rules are evaluated.

Pure: the evaluation of each kind lives in `hookwise.server.alerts.kinds` (a registry keyed by
the same names); this module only validates the configuration.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from .durations import Duration


@attrs.frozen
class KindSpec:
    """An alert kind's configuration contract: the scope key it requires (None: none), its
    default threshold and window, and a sentence for the docs and errors."""

    scope: str | None
    threshold: float
    window: float
    about: str


#: every alert kind: what it watches, its scope key and its defaults (threshold, window seconds)
KINDS: dict[str, KindSpec] = {
    "deliveries_failing": KindSpec(
        "channel", 3, 300, "deliveries to a channel failing (an attempt failed) in the window"
    ),
    "runs_failing": KindSpec(
        "mapping", 3, 600, "runs of a mapping ending failed or timed out in the window"
    ),
    "dead_letters": KindSpec(None, 1, 3600, "deliveries that failed for good in the window"),
    "queue_age": KindSpec(
        "queue", 300, 0, "the oldest item of a queue (runs or deliveries) older than threshold s"
    ),
    "breaker_open": KindSpec(None, 1, 0, "a model's breaker open (or half-open)"),
    "budget_crossed": KindSpec(None, 1, 0, "a mapping or agent held by its budget"),
    "runs_held": KindSpec(None, 1, 0, "runs held (paused or over budget) at least threshold"),
    "approvals_waiting": KindSpec(
        None, 900, 0, "a tool call waiting for a person's approval for threshold s or more"
    ),
    "signature_failures": KindSpec(
        "path", 10, 300, "requests refused for a bad signature on a path in the window"
    ),
}

_TARGET = re.compile(r"^[a-z][a-z0-9_-]*(:.+)?$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _targets(_: Any, attribute: attrs.Attribute, value: tuple[str, ...] | None) -> None:
    for target in value or ():
        if not _TARGET.match(target):
            raise ValueError(
                f"{attribute.name}: {target!r} is not a target: <channel> or <channel>:<recipient>"
            )


def _kind(_: Any, __: attrs.Attribute, value: str) -> None:
    if value not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")


def _positive(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or value <= 0):
        raise ValueError(f"{attribute.name} must be a positive number")


@attrs.frozen
class AlertRuleConfig:
    """`alerts.rules[]`: one rule. `id` defaults to `<kind>` or `<kind>:<scope>`."""

    kind: str = attrs.field(validator=_kind)
    id: str | None = None
    channel: str | None = None
    mapping: str | None = None
    path: str | None = None
    queue: str | None = None
    threshold: float | None = attrs.field(default=None, validator=_positive)
    window: Duration | None = None
    notify: tuple[str, ...] | None = attrs.field(default=None, validator=_targets)

    def __attrs_post_init__(self) -> None:
        spec = KINDS[self.kind]
        scopes = {k: getattr(self, k) for k in ("channel", "mapping", "path", "queue")}
        extra = [k for k, v in scopes.items() if v is not None and k != spec.scope]
        if extra:
            raise ValueError(f"a {self.kind} rule takes no {', '.join(extra)}")
        if spec.scope is not None and scopes[spec.scope] is None:
            raise ValueError(f"a {self.kind} rule needs `{spec.scope}`")
        if self.queue is not None and self.queue not in ("runs", "deliveries"):
            raise ValueError("queue must be runs or deliveries")
        if self.id is not None and not _ID.match(self.id):
            raise ValueError("id must be letters, digits, `_`, `.` or `-` (at most 64)")

    @property
    def scope(self) -> str | None:
        spec = KINDS[self.kind]
        return None if spec.scope is None else getattr(self, spec.scope)

    @property
    def rule_id(self) -> str:
        if self.id is not None:
            return self.id
        return self.kind if self.scope is None else f"{self.kind}:{self.scope}"

    @property
    def limit(self) -> float:
        return self.threshold if self.threshold is not None else KINDS[self.kind].threshold

    @property
    def seconds(self) -> float:
        return float(self.window) if self.window is not None else KINDS[self.kind].window


def _unique_ids(_: Any, __: attrs.Attribute, value: tuple[AlertRuleConfig, ...]) -> None:
    seen: set[str] = set()
    for rule in value:
        if rule.rule_id in seen:
            raise ValueError(f"two rules have the id {rule.rule_id!r}: give one an `id`")
        seen.add(rule.rule_id)


@attrs.frozen
class AlertsConfig:
    """`alerts.*`: the rules, where they are told (`notify`), how often they are evaluated."""

    rules: tuple[AlertRuleConfig, ...] = attrs.field(default=(), validator=_unique_ids)
    notify: tuple[str, ...] = attrs.field(default=(), validator=_targets)
    interval: Duration = Duration(30)

    def targets(self, rule: AlertRuleConfig) -> tuple[str, ...]:
        return rule.notify if rule.notify is not None else self.notify


def split_target(target: str) -> tuple[str, str | None]:
    """`slack:#alerts` -> (`slack`, `#alerts`); `telegram` -> (`telegram`, None)."""
    channel, _, to = target.partition(":")
    return channel, (to or None)
