"""`RefusalPacer`: refusals to one client on one route are answered at once up to a burst, then
paced, never held longer than `MAX_DELAY`; clients and routes are paced apart (a fake clock)."""

from __future__ import annotations

import pytest

from hookwise.server.ingress import pacing
from hookwise.server.ingress.pacing import BURST, MAX_DELAY, RATE, RefusalPacer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_is_answered_at_once_then_refusals_are_paced() -> None:
    clock = Clock()
    pacer = RefusalPacer(clock)
    assert [pacer.delay("a", "c1") for _ in range(BURST)] == [0.0] * BURST
    assert pacer.delay("a", "c1") == pytest.approx(1 / RATE)
    assert pacer.delay("a", "c1") == pytest.approx(2 / RATE)


def test_another_client_or_route_is_not_paced_by_a_flood() -> None:
    pacer = RefusalPacer(Clock())
    for _ in range(100):
        pacer.delay("a", "flooder")
    assert pacer.delay("a", "other") == 0.0
    assert pacer.delay("b", "flooder") == 0.0


def test_a_refusal_is_held_at_most_max_delay_however_many_connections_flood() -> None:
    clock = Clock()
    pacer = RefusalPacer(clock)
    delays = [pacer.delay("a", "c1") for _ in range(1000)]
    assert max(delays) == pytest.approx(MAX_DELAY)
    # the schedule did not run ahead: a second later, the client waits MAX_DELAY at most again
    clock.now += MAX_DELAY
    assert pacer.delay("a", "c1") <= MAX_DELAY


def test_a_client_that_waits_as_told_is_never_held() -> None:
    clock = Clock()
    pacer = RefusalPacer(clock)
    for _ in range(50):
        assert pacer.delay("a", "c1") == 0.0
        clock.now += 1 / RATE


def test_beyond_max_held_refusals_are_answered_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing, "MAX_HELD", 0)
    pacer = RefusalPacer(Clock())
    assert all(pacer.delay("a", "c1") == 0.0 for _ in range(BURST * 3))


def test_clients_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pacing, "MAX_KEYS", 10)
    pacer = RefusalPacer(Clock())
    for i in range(100):
        pacer.delay("a", f"c{i}")
    assert len(pacer._tat) == 10
