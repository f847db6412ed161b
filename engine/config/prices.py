"""The price table (`models.prices`) and the circuit breakers' settings (`models.breaker`).

A price is per token kind, in the operator's currency, for `per` tokens:
`{"openai/gpt-4.1": {input: 2.0, output: 8.0, per: 1M}}` reads "2.00 per million input tokens,
8.00 per million output tokens". `per` is `1M`, `1K`, or a positive whole number of tokens.
`cacheRead` and `cacheWrite` price the tokens a provider reports as read from or written to its
prompt cache; left out, they cost what `input` costs. hookwise ships no prices: a model without
an entry has cost `null`, never a guess. `cost` turns a call's token counts into money. Pure.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from .convert import converter
from .durations import Duration

_PER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}


class PerTokens(int):
    """How many tokens a price is for: `1M`, `1K`, `1000`."""

    @classmethod
    def parse(cls, value: object) -> PerTokens:
        if isinstance(value, bool):
            raise ValueError("must be a number of tokens such as 1M, 1K or 1000")
        if isinstance(value, int) and value > 0:
            return cls(value)
        if isinstance(value, str):
            m = _PER.match(value)
            if m:
                n = float(m.group(1)) * _SCALE[m.group(2).lower()]
                if n >= 1 and n == int(n):
                    return cls(int(n))
        raise ValueError("must be a number of tokens such as 1M, 1K or 1000")


converter.register_structure_hook(PerTokens, lambda v, _: PerTokens.parse(v))


def _non_negative(_: Any, attribute: attrs.Attribute, value: float | None) -> None:
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ValueError(f"{attribute.name} must be a non-negative number")


@attrs.frozen
class PriceConfig:
    """`models.prices."<provider>/<model>"`: what `per` tokens of each kind cost (any currency,
    the same everywhere). `cacheRead`/`cacheWrite` default to `input`."""

    input: float = attrs.field(validator=_non_negative)
    output: float = attrs.field(validator=_non_negative)
    cache_read: float | None = attrs.field(default=None, validator=_non_negative)
    cache_write: float | None = attrs.field(default=None, validator=_non_negative)
    per: PerTokens = PerTokens(1_000_000)

    def cost(
        self,
        input_tokens: int | None,
        output_tokens: int | None,
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> float:
        """The cost of one call's tokens. `input_tokens` are the uncached input tokens."""
        cr = self.input if self.cache_read is None else self.cache_read
        cw = self.input if self.cache_write is None else self.cache_write
        total = (
            (input_tokens or 0) * self.input
            + (output_tokens or 0) * self.output
            + (cache_read or 0) * cr
            + (cache_write or 0) * cw
        )
        return total / self.per


@attrs.frozen
class BreakerConfig:
    """`models.breaker`: a model that failed `failures` times (as unavailable: connection,
    timeout, 429, 5xx, overload, quota) within `window` is skipped for `cooldown`, then tried
    again by one call (half-open): its success closes the breaker, its failure opens it again.
    `failures: 0` turns breakers off."""

    failures: int = 5
    window: Duration = Duration(60)
    cooldown: Duration = Duration(30)
