"""Retention, the part both stores share: what may be pruned from each table, and how the
oldest rows are found without an index on time.

Only finished records go: runs that `succeeded`, `failed` or `timed_out`, events a heartbeat
consumed, deliveries `sent`, `failed` or `skipped`, alerts `resolved`; heartbeats, transcript turns and request-log
rows once old. Queued, running and pending work is never pruned, however old.

Rows are inserted in time order, so `seq` (the primary key) follows their time: `boundary` finds
the last row older than the cut-off with a binary search of primary-key lookups (a few dozen
reads, no scan), and the stores then delete finished rows up to it, oldest first, in small
batches, each its own short commit, so that pruning never holds the writer for long.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

#: seconds an ended console session is remembered (pruned with the request records): longer
#: than a console session lives (12 h)
LOGOUTS_KEPT = 24 * 3600.0


@attrs.frozen
class Target:
    """One prunable table: the `retention.<key>` that bounds it, its time column and the
    condition a row must meet to be pruned."""

    key: str
    table: str
    at: str
    done: str
    #: what the pruning's log line calls its rows (default: `key`)
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.key


TARGETS: tuple[Target, ...] = (
    # the records of model calls go with the runs' horizon (a call's record outlives no run)
    Target("runs", "model_calls", "started_at", "1 = 1", "model calls"),
    # and so do the running totals of budgets (`budget_usage`), by their bucket's start
    Target("runs", "budget_usage", "bucket", "1 = 1", "budget totals"),
    Target("runs", "runs", "created_at", "state IN ('succeeded', 'failed', 'timed_out')"),
    Target("events", "events", "created_at", "consumed_at IS NOT NULL"),
    # resolved alerts go with the deliveries' horizon (their notifications are deliveries)
    Target("deliveries", "alerts", "opened_at", "state = 'resolved'", "alerts"),
    Target("deliveries", "deliveries", "created_at", "state IN ('sent', 'failed', 'skipped')"),
    Target("heartbeats", "heartbeats", "started_at", "1 = 1"),
    Target("transcripts", "turns", "created_at", "1 = 1"),
    Target("requests", "request_log", "at", "1 = 1"),
    Target("audit", "audit", "at", "1 = 1", "audit entries"),
)

#: `(seq, time)` of the first row whose seq is at least the argument, or None past the end
Probe = Callable[[int], Awaitable[tuple[int, float] | None]]


async def boundary(probe: Probe, last_seq: int, cutoff: float) -> int:
    """The highest seq (up to `last_seq`) whose row, by the time order of seq, is older than
    `cutoff`; 0 if none.

    Times are nearly monotonic in seq (several processes commit a few ms apart), so rows right
    at the edge may be taken on the next round instead; the delete also checks the time."""
    first = await probe(0)
    if first is None or first[1] >= cutoff:
        return 0
    lo, hi = first[0], last_seq
    while lo < hi:
        mid = (lo + hi + 1) // 2
        row = await probe(mid)
        if row is not None and row[1] < cutoff:
            lo = row[0]
        else:
            hi = mid - 1
    return lo
