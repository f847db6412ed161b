"""The one back-off policy: how long every retry loop in hookwise waits before its next try.

`Backoff(base, factor, cap, jitter)` is a frozen value; `Backoff.delay(n, rand=...)` is a pure
function of the retry number `n` (0-based) and a uniform draw `rand` in [0, 1) that the caller
supplies (no clock, no randomness inside):

- the step is `base * factor**n`, capped at `cap`;
- `jitter` is the share of the step that is drawn: the wait is `step * (1 - jitter)` plus
  `rand * step * jitter`. 0 is no jitter (the wait is the step), 0.5 "equal jitter" (between
  half and all of the step, the default: clients that failed together do not come back
  together), 1 "full jitter";
- a `retry_after` the peer asked for (`Retry-After`) is a floor, which may exceed `cap` but not
  `MAX_RETRY_AFTER`.

`Retries` is the counter a loop keeps around the policy: `next()` gives the wait before the next
try and counts it, `reset()` starts again from `base` after a success.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

MAX_RETRY_AFTER = 86400.0
"""The longest `Retry-After` honoured (a day): a peer cannot park a retry for ever."""


def _positive(_inst: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{attribute.name} must be a finite number >= 0, not {value!r}")


def _factor(_inst: object, _attribute: attrs.Attribute[float], value: float) -> None:
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"factor must be a finite number >= 1, not {value!r}")


def _share(_inst: object, _attribute: attrs.Attribute[float], value: float) -> None:
    if not 0 <= value <= 1:
        raise ValueError(f"jitter must be between 0 and 1, not {value!r}")


@attrs.frozen
class Backoff:
    """Exponential back-off: `base * factor**n` capped at `cap`, with a `jitter` share drawn;
    `retry_after` is a floor (see the module docstring)."""

    base: float = attrs.field(default=0.5, validator=_positive)
    cap: float = attrs.field(default=20.0, validator=_positive)
    factor: float = attrs.field(default=2.0, validator=_factor)
    jitter: float = attrs.field(default=0.5, validator=_share)

    def step(self, retry: int) -> float:
        """The un-jittered wait before retry number `retry` (0-based), capped."""
        n = max(0, retry)
        if self.factor == 1 or self.base == 0:
            return min(self.cap, self.base)
        # past this exponent the step is above the cap anyway (and factor**n may overflow)
        limit = math.log(max(self.cap, self.base) / self.base, self.factor) + 1
        if n > limit:
            return self.cap
        return min(self.cap, self.base * self.factor**n)

    def delay(self, retry: int, *, rand: float, retry_after: float | None = None) -> float:
        """The wait before retry `retry` (0-based); `rand` is a uniform draw in [0, 1)."""
        full = self.step(retry)
        drawn = min(max(rand, 0.0), 1.0)
        wait = full * (1 - self.jitter) + drawn * full * self.jitter
        if retry_after is not None and math.isfinite(retry_after):
            wait = max(wait, min(max(retry_after, 0.0), MAX_RETRY_AFTER))
        return wait


#: no draw: for a policy without jitter, or a caller that wants the step itself
NO_DRAW: Callable[[], float] = lambda: 1.0  # noqa: E731


class Retries:
    """Successive waits of one `Backoff`: `next()` is the wait before the next try (and counts
    it), `reset()` after a success starts again from `base`. `rand` draws the jitter (pass
    `random.random`; the default draws nothing, fine for a policy without jitter)."""

    def __init__(self, policy: Backoff, rand: Callable[[], float] = NO_DRAW) -> None:
        self.policy = policy
        self._rand = rand
        self.count = 0
        """Waits handed out since the last `reset` (the failures in a row)."""

    def next(self, retry_after: float | None = None) -> float:
        wait = self.policy.delay(self.count, rand=self._rand(), retry_after=retry_after)
        self.count += 1
        return wait

    def reset(self) -> None:
        self.count = 0


__all__ = ["MAX_RETRY_AFTER", "NO_DRAW", "Backoff", "Retries"]
