"""The heartbeat's digest of pending events stays under its bound whatever the events hold."""

from __future__ import annotations

import pytest

from hookwise.server.runtime.digest import FULL_ENTRIES, PROMPT_MAX_CHARS, coalesce
from hookwise.server.runtime.prompts import heartbeat_prompt
from hookwise.server.store.base import EventRecord


def event(i: int, text: str, source: str = "hook:github") -> EventRecord:
    return EventRecord(i, f"ev-{i}", "main", text, source, "now", False, 1.7e9 + i, None)


@pytest.mark.parametrize(
    "events",
    [
        # long multi-line texts: indentation must not push an entry past its cut
        [event(i, "\n".join(["x"] * 50_000)) for i in range(50)],
        # a source per event, each with a long name
        [event(i, f"e{i}", source="hook:" + "s" * 500 + str(i)) for i in range(5000)],
        # one huge event
        [event(0, "y" * 1_000_000)],
    ],
    ids=["multi-line", "many-sources", "one-huge"],
)
def test_the_prompt_stays_under_its_bound(events: list[EventRecord]) -> None:
    prompt = heartbeat_prompt(events, "wake", 1.7e9)
    assert len(prompt) <= PROMPT_MAX_CHARS
    assert prompt.rstrip().endswith("HEARTBEAT_OK.")


def test_few_events_are_all_shown_with_consecutive_duplicates_counted() -> None:
    events = [event(0, "a"), event(1, "b"), event(2, "b"), event(3, "b"), event(4, "a")]
    prompt = heartbeat_prompt(events, "wake", 1.7e9)
    assert "5 pending system event(s):" in prompt
    assert "System: [hook:github] a\nSystem: [hook:github] b (x3)\nSystem: [hook:github] a\n" in (
        prompt
    )
    assert "By source" not in prompt


def test_many_events_are_summed_up_by_source_with_the_newest_shown() -> None:
    events = [event(i, f"e{i}", source=f"hook:r{i % 30}") for i in range(3000)]
    prompt = heartbeat_prompt(events, "wake", 1.7e9)
    assert "3,000 pending system events" in prompt
    assert "- hook:r0: 100" in prompt
    assert "- 10 other sources: 1,000" in prompt
    assert f"The newest {FULL_ENTRIES} of them" in prompt
    assert "System: [hook:r29] e2999" in prompt and "e2979" not in prompt


def test_duplicates_differ_by_source_too() -> None:
    entries = coalesce([event(0, "a"), event(1, "a", source="hook:other"), event(2, "a")])
    assert [e.count for e in entries] == [1, 1, 1]
