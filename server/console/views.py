"""How records look on a console page: times, durations, states, short ids, and small charts.

Pure functions used as Jinja filters; they return plain strings (autoescaping applies), except
`bars`, which returns the numbers a template draws as an SVG (no markup is built here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...engine.times import iso_utc

FAILED_STATES = frozenset({"failed", "timed_out", "error"})


def _epoch(value: float | str | None) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):  # the admin API's ISO-8601 UTC times
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


def iso(value: float | str | None) -> str:
    """A time (epoch seconds or the admin API's ISO string) as `2026-11-24 23:06:29Z`."""
    ts = _epoch(value)
    if ts is None:
        return ""
    return iso_utc(ts, sep=" ", timespec="seconds")


def duration(start: float | str | None, end: float | str | None) -> str:
    """`end - start` for people: `850 ms`, `4.2 s`, `3 min 10 s`; empty when unknown."""
    a, b = _epoch(start), _epoch(end)
    if a is None or b is None:
        return ""
    seconds = max(0.0, b - a)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


def state_class(state: str | None) -> str:
    """The CSS class of a state badge."""
    if state in FAILED_STATES or state == "open":  # `open`: an alert
        return "bad"
    if state in {"succeeded", "sent", "ok", "delivered", "acknowledged", "resolved"}:
        return "good"
    if state in {"queued", "pending", "running"}:
        return "wait"
    return "neutral"


def status_class(status: int | None) -> str:
    if status is None:
        return "neutral"
    return "good" if status < 400 else ("wait" if status == 429 else "bad")


def short(value: str | None, n: int = 8) -> str:
    """The end of an id: ids are time-ordered UUIDv7, whose first characters are a timestamp
    shared by everything made in the same moment, while the last ones are random."""
    return "" if value is None else value[-n:]


def pretty(value: Any) -> str:
    """A value as indented JSON (for payloads, rendered actions, extracted values)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def bars(counts: Sequence[int], width: int = 240, height: int = 40) -> list[dict[str, float]]:
    """Bar geometry for a count series: x, y, w, h per bar, scaled to the largest count."""
    if not counts:
        return []
    top = max(max(counts), 1)
    step = width / len(counts)
    out = []
    for i, c in enumerate(counts):
        h = 0.0 if c == 0 else max(1.0, height * c / top)
        out.append(
            {
                "x": round(i * step, 2),
                "y": round(height - h, 2),
                "w": round(step * 0.8, 2),
                "h": round(h, 2),
                "n": c,
            }
        )
    return out


FILTERS = {
    "iso": iso,
    "duration": duration,
    "state_class": state_class,
    "status_class": status_class,
    "short": short,
    "pretty": pretty,
    "bars": bars,
}
