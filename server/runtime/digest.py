"""The digest of a heartbeat's pending events: what the model reads of a backlog, in bounded size.

A heartbeat may take thousands of events at once (a provider's backfill, a retry storm). The
model gets a readable digest rather than thousands of lines:

- consecutive events with the same source and text are one entry with a count (`(x12)`);
- when the entries are few (`FULL_ENTRIES`) and short, every one is shown;
- otherwise the digest gives the count, the time span, the counts by source (hook events by
  the rule that made them, run summaries together; the `SOURCE_LINES` largest, the rest summed
  up), then the newest entries in full, oldest first, as many as `ITEMS_MAX_CHARS` holds.

Each entry's text is cut at `ENTRY_MAX_CHARS`; the whole prompt stays under `PROMPT_MAX_CHARS`
whatever the backlog. Every event of the batch is marked consumed, shown or counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import attrs

from ...engine.times import iso_utc
from ..store.base import EventRecord
from .external import wrap_external

#: up to this many entries (after coalescing), all are shown and no summary is made
FULL_ENTRIES = 20
#: the most characters of one entry's text
ENTRY_MAX_CHARS = 2000
#: the most characters of the entries shown (the newest first, then older ones while they fit)
ITEMS_MAX_CHARS = 8000
#: the sources counted by name; the others are summed up in one line
SOURCE_LINES = 20
#: the heartbeat prompt's bound (header, counts, entries, the external-content markers)
PROMPT_MAX_CHARS = 12_000


@attrs.frozen
class Entry:
    """One line of the digest: consecutive identical events (same source and text)."""

    source: str
    text: str
    count: int

    def render(self) -> str:
        """`System: [<source>] <text> (x<count>)`, continuation lines indented, cut at
        `ENTRY_MAX_CHARS`."""
        first, *rest = self.text[:ENTRY_MAX_CHARS].splitlines() or [""]
        times = f" (x{self.count})" if self.count > 1 else ""
        line = "\n".join(
            [f"System: [{_name(self.source)}] {first}{times}", *(f"  {r}" for r in rest)]
        )
        return line if len(line) <= ENTRY_MAX_CHARS else line[: ENTRY_MAX_CHARS - 1] + "…"


def _name(source: str) -> str:
    return " ".join(source.split())[:80]


def coalesce(events: Sequence[EventRecord]) -> list[Entry]:
    """Consecutive events with the same source and text as one entry with their count (counted
    first, each entry made once: a flood of one wake is thousands of identical events)."""
    entries: list[Entry] = []
    source = text = ""
    count = 0
    for e in events:
        if count and e.text == text and e.source == source:
            count += 1
            continue
        if count:
            entries.append(Entry(source, text, count))
        source, text, count = e.source, e.text, 1
    if count:
        entries.append(Entry(source, text, count))
    return entries


def source_of(event: EventRecord) -> str:
    """What the counts group by: a run's summary is `run` (every run has its own source)."""
    return "run summaries" if event.source.startswith("run:") else event.source


def _when(at: float) -> str:
    return iso_utc(at, sep=" ", timespec="seconds", suffix=" UTC")


def _newest(entries: list[Entry]) -> list[str]:
    """The newest entries' lines, oldest first, as many as `ITEMS_MAX_CHARS` holds (at least
    the newest one)."""
    shown: list[str] = []
    used = 0
    for entry in reversed(entries):
        line = entry.render()
        if shown and (len(shown) >= FULL_ENTRIES or used + len(line) + 1 > ITEMS_MAX_CHARS):
            break
        shown.append(line)
        used += len(line) + 1
    shown.reverse()
    return shown


def _counts(events: Sequence[EventRecord]) -> list[str]:
    by_source = Counter(source_of(e) for e in events).most_common()
    lines = [f"- {_name(name)}: {n:,}" for name, n in by_source[:SOURCE_LINES]]
    rest = by_source[SOURCE_LINES:]
    if rest:
        lines.append(f"- {len(rest):,} other sources: {sum(n for _, n in rest):,}")
    return lines


def digest(events: Sequence[EventRecord]) -> list[str]:
    """The lines of the heartbeat prompt that show `events` (see the module's docstring)."""
    if not events:
        return ["There are no pending system events."]
    entries = coalesce(events)
    lines = _newest(entries)
    if len(lines) == len(entries):
        return [
            f"{len(events)} pending system event(s):",
            wrap_external("\n".join(lines), source="system events"),
        ]
    shown = sum(e.count for e in entries[len(entries) - len(lines) :])
    return [
        f"{len(events):,} pending system events, from {_when(events[0].created_at)} "
        f"to {_when(events[-1].created_at)}. By source:",
        *_counts(events),
        f"The newest {shown:,} of them, oldest first (consecutive duplicates counted once):",
        wrap_external("\n".join(lines), source="system events"),
    ]
