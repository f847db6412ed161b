"""The binary search that finds the last row older than a cut-off by primary-key lookups."""

from __future__ import annotations

import asyncio

import pytest

from hookwise.server.store.retention import boundary


def search(rows: list[tuple[int, float]], cutoff: float) -> tuple[int, int]:
    """(the boundary, how many lookups it took) over rows of (seq, time)."""
    lookups = 0

    async def probe(seq: int) -> tuple[int, float] | None:
        nonlocal lookups
        lookups += 1
        return next((r for r in rows if r[0] >= seq), None)

    last = rows[-1][0] if rows else 0
    return asyncio.run(boundary(probe, last, cutoff)), lookups


@pytest.mark.parametrize(
    ("rows", "cutoff", "expected"),
    [
        ([], 10.0, 0),
        ([(1, 5.0)], 10.0, 1),
        ([(1, 50.0)], 10.0, 0),
        ([(1, 1.0), (2, 2.0), (3, 3.0), (7, 4.0), (9, 20.0)], 10.0, 7),  # gaps in seq
        ([(1, 1.0), (2, 2.0), (3, 3.0)], 2.0, 1),  # strictly older
        ([(1, 1.0), (2, 2.0), (3, 3.0)], 100.0, 3),  # everything
        ([(4, 1.0), (5, 3.0), (6, 2.5), (8, 11.0)], 10.0, 6),  # nearly monotonic
    ],
)
def test_boundary(rows: list[tuple[int, float]], cutoff: float, expected: int) -> None:
    assert search(rows, cutoff)[0] == expected


def test_a_million_rows_take_a_few_dozen_lookups() -> None:
    rows = [(seq, float(seq)) for seq in range(1, 1_000_001)]

    # a direct index instead of a scan, so that the test measures lookups, not Python
    async def probe(seq: int) -> tuple[int, float] | None:
        nonlocal lookups
        lookups += 1
        return rows[max(0, seq - 1)] if seq <= len(rows) else None

    lookups = 0
    assert asyncio.run(boundary(probe, len(rows), 654_321.5)) == 654_321
    assert lookups <= 25
