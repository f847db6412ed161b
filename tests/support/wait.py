"""Waiting for asynchronous effects in tests: poll until a condition holds, bounded in time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T],
    *,
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Call `probe` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
