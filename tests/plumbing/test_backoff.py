"""The one back-off policy (hookwise.plumbing.backoff): a pure function of the retry number and a
draw, and the counter a loop keeps around it."""

from __future__ import annotations

import math

import pytest

from hookwise.plumbing.backoff import MAX_RETRY_AFTER, Backoff, Retries


@pytest.mark.parametrize(
    ("policy", "rand", "waits"),
    [
        # no jitter: the steps themselves (the MCP reconnects, the run recorder)
        (Backoff(base=1.0, cap=30.0, jitter=0.0), 0.3, [1, 2, 4, 8, 16, 30, 30]),
        (Backoff(base=0.25, cap=2.0, jitter=0.0), 0.9, [0.25, 0.5, 1, 2, 2, 2, 2]),
        # another factor
        (Backoff(base=1.0, cap=100.0, factor=3.0, jitter=0.0), 0.0, [1, 3, 9, 27, 81, 100, 100]),
        # factor 1: a constant wait
        (Backoff(base=0.5, cap=9.0, factor=1.0, jitter=0.0), 0.0, [0.5] * 7),
        # equal jitter (the default): half the step at rand 0, all of it at rand 1
        (Backoff(base=1.0, cap=8.0), 0.0, [0.5, 1, 2, 4, 4, 4, 4]),
        (Backoff(base=1.0, cap=8.0), 1.0, [1, 2, 4, 8, 8, 8, 8]),
        # full jitter: anything from nothing to the step
        (Backoff(base=1.0, cap=8.0, jitter=1.0), 0.0, [0] * 7),
        (Backoff(base=1.0, cap=8.0, jitter=1.0), 0.5, [0.5, 1, 2, 4, 4, 4, 4]),
        # a base above the cap is the cap
        (Backoff(base=10.0, cap=4.0, jitter=0.0), 0.0, [4] * 7),
    ],
)
def test_the_waits_grow_by_the_factor_up_to_the_cap_with_the_jitter_share_drawn(
    policy: Backoff, rand: float, waits: list[float]
) -> None:
    assert [policy.delay(n, rand=rand) for n in range(7)] == pytest.approx(waits)


def test_the_draw_is_clamped_and_negative_retry_numbers_are_the_first() -> None:
    policy = Backoff(base=1.0, cap=8.0)
    assert policy.delay(0, rand=-5.0) == 0.5
    assert policy.delay(0, rand=7.0) == 1.0
    assert policy.delay(-3, rand=1.0) == 1.0


@pytest.mark.parametrize("retry", [63, 64, 1_000, 10**9])
def test_huge_retry_numbers_neither_overflow_nor_pass_the_cap(retry: int) -> None:
    assert Backoff(base=0.001, cap=5.0, factor=10.0, jitter=0.0).delay(retry, rand=0.0) == 5.0
    assert Backoff(base=1.0, cap=8.0).delay(retry, rand=0.5) == 6.0


def test_retry_after_is_a_floor_past_the_cap_but_bounded_and_never_negative() -> None:
    policy = Backoff(base=1.0, cap=8.0, jitter=0.0)
    assert policy.delay(0, rand=0.0, retry_after=30.0) == 30.0
    assert policy.delay(3, rand=0.0, retry_after=2.0) == 8.0
    assert policy.delay(0, rand=0.0, retry_after=1e12) == MAX_RETRY_AFTER
    assert policy.delay(0, rand=0.0, retry_after=-4.0) == 1.0
    assert policy.delay(0, rand=0.0, retry_after=math.nan) == 1.0
    assert policy.delay(0, rand=0.0, retry_after=math.inf) == 1.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("base", -1.0),
        ("base", math.nan),
        ("cap", math.inf),
        ("factor", 0.5),
        ("factor", math.nan),
        ("jitter", 1.5),
        ("jitter", -0.1),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused_when_made(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        Backoff(**{field: value})


def test_retries_count_the_failures_in_a_row_and_reset_after_a_success() -> None:
    draws = iter([0.0, 1.0, 0.5, 0.0, 1.0])
    retries = Retries(Backoff(base=1.0, cap=8.0), lambda: next(draws))
    assert [retries.next(), retries.next(), retries.next()] == [0.5, 2.0, 3.0]
    assert retries.count == 3
    retries.reset()
    assert retries.count == 0
    assert retries.next() == 0.5
    assert retries.next(retry_after=60.0) == 60.0


def test_retries_without_a_draw_are_the_steps() -> None:
    retries = Retries(Backoff(base=0.1, cap=5.0, jitter=0.0))
    assert [retries.next() for _ in range(8)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    )


def test_the_server_uses_the_same_policy() -> None:
    from hookwise.server import retry

    assert retry.Backoff is Backoff and retry.Retries is Retries
