"""The overview's small charts: requests, runs, failed runs and failed deliveries (however early
they failed) per bucket over the last hour and the last day, counted by the store in one pass over each creation-time index.

Counting a busy day is not free, so each process keeps the figures for `CACHE_SECONDS`: the charts
may lag that much behind, the pages stay fast however large the store.
"""

from __future__ import annotations

import attrs

from ..store.base import Store

CACHE_SECONDS = 10.0
#: (name, seconds covered, buckets)
WINDOWS = (("hour", 3600.0, 12), ("day", 86400.0, 24))
SERIES = (
    ("requests", "requests", False),
    ("runs", "runs", False),
    ("failed runs", "runs", True),
    ("failed deliveries", "deliveries", True),
)


@attrs.frozen
class Series:
    """One chart: counts per bucket, oldest first, and their total."""

    name: str
    window: str
    counts: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.counts)


_cache: dict[int, tuple[float, list[Series]]] = {}


async def overview_activity(store: Store, now: float) -> list[Series]:
    """Every chart of the overview, at most `CACHE_SECONDS` old."""
    cached = _cache.get(id(store))
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    out = []
    for window, span, buckets in WINDOWS:
        width = span / buckets
        since = now - span
        for name, listing, failed in SERIES:
            found = await store.activity(listing, since=since, width=width, failed=failed)
            counts = tuple(found.get(i, 0) for i in range(buckets))
            out.append(Series(name, window, counts))
    _cache.clear()
    _cache[id(store)] = (now, out)
    return out
