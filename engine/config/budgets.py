"""Budgets (`budget:` on a mapping, an agent and `agents.defaults`): how many tokens and how much
money the runs they cover may spend in a window, and how the window is measured.

`tokens` is a number of tokens (`2M`, `500K`, `3000`), `cost` an amount in the price table's
currency (`models.prices`), `per` a duration (`1d`, `1h`, `10s`), `window` `rolling` (the last
`per` seconds) or `calendar` (fixed windows of `per` seconds from the Unix epoch, in UTC: `1d`
starts at midnight UTC). Either limit, or both. `by: sender` gives each sender (who the door
verified: the signature's scheme and secret, or the hook token) its own allowance of these
limits, instead of one shared by all. `window_start` is where the window that holds `now`
starts. Pure (no clock: the caller gives `now`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs

from .durations import Duration
from .prices import PerTokens


def _positive_duration(_: Any, attribute: attrs.Attribute, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be a positive duration such as 1h or 1d")


def _non_negative(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ValueError(f"{attribute.name} must be a non-negative number")


@attrs.frozen
class BudgetConfig:
    """`budget: {tokens: 2M, cost: 20, per: 1d, window: rolling}`: a ceiling of spend per window."""

    tokens: PerTokens | None = None
    cost: float | None = attrs.field(default=None, validator=_non_negative)
    per: Duration = attrs.field(default=Duration(86400), validator=_positive_duration)
    window: Literal["rolling", "calendar"] = "rolling"
    #: `sender`: each sender its own allowance (None: one for every run the budget covers)
    by: Literal["sender"] | None = None

    @property
    def by_sender(self) -> bool:
        return self.by == "sender"

    def __attrs_post_init__(self) -> None:
        if self.tokens is None and self.cost is None:
            raise ValueError("a budget needs `tokens`, `cost` or both")

    def window_start(self, now: float) -> float:
        """Where the window holding `now` starts."""
        if self.window == "calendar":
            return math.floor(now / self.per) * float(self.per)
        return now - float(self.per)

    def window_end(self, now: float) -> float:
        """Until when spend counted at `now` stays in a window: the calendar window's end, or
        `per` from now for a rolling one (what an operator's release waives)."""
        if self.window == "calendar":
            return self.window_start(now) + float(self.per)
        return now + float(self.per)

    def exceeded(self, tokens: int, cost: float) -> bool:
        """Whether spending `tokens` and `cost` in one window reaches this budget."""
        return (self.tokens is not None and tokens >= self.tokens) or (
            self.cost is not None and cost >= self.cost
        )
