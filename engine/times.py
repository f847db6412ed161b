"""Epoch seconds as the one UTC time format hookwise writes: ISO 8601 with `Z`.

The admin API and JSON log lines write `2026-11-24T23:06:29.123Z` (milliseconds, truncated);
the console shows `2026-11-24 23:06:29Z` and a heartbeat's prompt `2026-11-24 23:06:29 UTC`,
the same formatter with another separator, precision or suffix.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

Timespec = Literal["seconds", "milliseconds", "microseconds"]


def iso_utc(
    t: float, *, sep: str = "T", timespec: Timespec = "milliseconds", suffix: str = "Z"
) -> str:
    """`t` (epoch seconds) as an ISO-8601 UTC time."""
    text = dt.datetime.fromtimestamp(t, dt.UTC).isoformat(sep=sep, timespec=timespec)
    return text.removesuffix("+00:00") + suffix
