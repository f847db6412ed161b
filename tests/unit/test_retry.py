"""The one backoff policy and `Retry-After` reader (hookwise.server.retry)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from hookwise.server.retry import (
    MAX_RETRY_AFTER,
    Backoff,
    retry_after_from_headers,
    retry_after_seconds,
)

NOW = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def tokyo(monkeypatch):
    """Run with the machine's local time zone far from UTC (the `-0000` bug showed there)."""
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2", 2.0),
        (" 0.5 ", 0.5),
        ("-3", 0.0),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        ("", None),
        (None, None),
        ("Thu, 01 Jan 2026 00:00:30 GMT", 30.0),
        ("Thu, 01 Jan 2026 00:00:30 +0000", 30.0),
        ("Thu, 01 Jan 2026 00:00:30 -0000", 30.0),
        ("Thu, 01 Jan 2026 09:00:30 +0900", 30.0),
        ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),
        ("Thu, 99 Foo 2026 00:00:30 GMT", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates_in_any_local_zone(tokyo, value, expected):
    assert retry_after_seconds(value, now=NOW) == expected


def test_retry_after_ms_comes_first():
    headers = {"retry-after-ms": "250", "retry-after": "9"}
    assert retry_after_from_headers(headers, now=NOW) == 0.25
    assert retry_after_from_headers({"retry-after-ms": "x", "retry-after": "9"}, now=NOW) == 9.0
    assert retry_after_from_headers(object(), now=NOW) is None


def test_backoff_doubles_with_equal_jitter_and_a_cap():
    policy = Backoff(base=1.0, cap=8.0)
    assert [policy.delay(n, rand=1.0) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert [policy.delay(n, rand=0.0) for n in range(4)] == [0.5, 1.0, 2.0, 4.0]
    assert policy.delay(10_000, rand=0.5) == 6.0  # huge retry numbers do not overflow


def test_retry_after_is_a_floor_even_past_the_cap_but_bounded():
    policy = Backoff(base=1.0, cap=8.0)
    assert policy.delay(0, rand=0.0, retry_after=30.0) == 30.0
    assert policy.delay(3, rand=1.0, retry_after=2.0) == 8.0
    assert policy.delay(0, rand=0.0, retry_after=1e12) == MAX_RETRY_AFTER
