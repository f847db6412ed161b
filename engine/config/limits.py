"""Per-route limits as configured: a rate (`rateLimit`) and a concurrency cap (`maxInFlight`).

A mapping may carry `rateLimit: {requests: 30, per: 1m, by: route|address}` and `maxInFlight: 4`;
the built-in paths take the same keys under `hooks.limits.wake` and `hooks.limits.agent`. A limit
belongs to a path, not to one rule: the request is counted before its body is read, so before
any rule is selected. `path_limits` gathers the rules' limits by path and refuses (at load) two
rules on one path that disagree, or a limit on a rule without `match.path`. Counting is the
server's (`hookwise.server.ingress.limits`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from ..errors import ConfigIssue
from .durations import Duration


def positive(_: object, attribute: attrs.Attribute, value: object) -> None:
    if isinstance(value, int | float) and value <= 0:
        raise ValueError("must be greater than 0")


@attrs.frozen
class RateLimitConfig:
    """`rateLimit`: at most `requests` at once, refilled at `requests` per `per`; counted for
    the whole route (`by: route`) or per client address (`by: address`)."""

    requests: int = attrs.field(validator=positive)
    per: Duration = attrs.field(validator=positive)
    by: Literal["route", "address"] = "route"

    @property
    def interval(self) -> float:
        """Seconds between two requests at the steady rate."""
        return float(self.per) / self.requests


@attrs.frozen
class RouteLimitsConfig:
    """The limits of one route: a rate and/or a cap on requests being handled at once."""

    rate_limit: RateLimitConfig | None = None
    max_in_flight: int | None = attrs.field(default=None, validator=positive)

    @property
    def empty(self) -> bool:
        return self.rate_limit is None and self.max_in_flight is None


@attrs.frozen
class HookLimitsConfig:
    """`hooks.limits`: the limits of the built-in paths `/wake` and `/agent`."""

    wake: RouteLimitsConfig | None = None
    agent: RouteLimitsConfig | None = None
    #: requests held open at once for their run's outcome (`wait`), per process; more are
    #: answered 202 at once
    max_waiting: int = attrs.field(default=256, validator=positive)


def path_limits(
    rules: Iterable[tuple[str, str | None, RouteLimitsConfig]],
) -> tuple[dict[str, RouteLimitsConfig], list[ConfigIssue]]:
    """From (rule id, path, limits) of each rule: the limits by path, and the problems found."""
    by_path: dict[str, tuple[str, RouteLimitsConfig]] = {}
    issues: list[ConfigIssue] = []
    for rule_id, path, limits in rules:
        if limits.empty:
            continue
        if path is None:
            issues.append(
                ConfigIssue(
                    "rateLimit" if limits.rate_limit is not None else "maxInFlight",
                    "a limit belongs to a path: give the rule a match.path",
                    rule_id=rule_id,
                )
            )
            continue
        key = path.strip("/")
        seen = by_path.get(key)
        if seen is None:
            by_path[key] = (rule_id, limits)
        elif seen[1] != limits:
            issues.append(
                ConfigIssue(
                    "rateLimit",
                    f"path {key!r} already has other limits (rule {seen[0]!r}); the rules of"
                    " one path share its limits: give them on one rule or the same on each",
                    rule_id=rule_id,
                )
            )
    return {k: v for k, (_, v) in by_path.items()}, issues
