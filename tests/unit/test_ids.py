"""Identifiers are valid, distinct UUIDv7 strings that sort in the order they were made."""

from __future__ import annotations

import time
import uuid

from hookwise.server.ids import new_id


def test_ids_are_version_7_uuids_distinct_and_time_ordered() -> None:
    before = time.time_ns() // 1_000_000
    ids = [new_id() for _ in range(5000)]
    after = time.time_ns() // 1_000_000
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    for value in ids[:600]:
        parsed = uuid.UUID(value)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == value
        assert before <= parsed.int >> 80 <= after + 2  # the millisecond it was made in


def test_ids_keep_increasing_within_a_millisecond_and_when_the_clock_goes_back() -> None:
    t = time.time_ns() + 10**12  # a clock ahead of all ids made so far
    same_ms = [new_id(t) for _ in range(5000)]  # more than the 12-bit counter holds
    earlier = [new_id(t - 10**9) for _ in range(3)]  # the clock stepped back a second
    assert same_ms + earlier == sorted(same_ms + earlier)
    assert len(set(same_ms + earlier)) == 5003
