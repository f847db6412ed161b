"""Durations in configuration: a number of seconds, or a string such as `250ms`, `30s`, `30m`, `24h`."""

from __future__ import annotations

import re
from typing import Any

from .convert import converter

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


class Duration(float):
    """A non-negative duration in seconds."""

    @classmethod
    def parse(cls, value: object) -> Duration:
        if isinstance(value, bool):
            raise ValueError("must be a duration such as 30s, 5m or 24h")
        if isinstance(value, (int, float)):
            if value < 0:
                raise ValueError("must not be negative")
            return cls(value)
        if isinstance(value, str):
            m = _PATTERN.match(value)
            if m:
                return cls(float(m.group(1)) * _UNITS[m.group(2) or "s"])
        raise ValueError("must be a duration such as 30s, 5m or 24h (a bare number is seconds)")


def _structure(value: object, _: Any) -> Duration:
    return Duration.parse(value)


converter.register_structure_hook(Duration, _structure)
