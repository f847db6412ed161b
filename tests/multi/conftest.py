"""Fixtures for several gateway processes on one store: SQLite (one file) and PostgreSQL.

`backend` is parametrised: `sqlite` runs `--workers N` on one SQLite file; `postgres` gives
each test a fresh database on the local server (127.0.0.1:5432), dropped afterwards, and is
skipped with the reason when no PostgreSQL answers there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import fresh_database


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """`hookwise serve` arguments selecting the store; `--workers` is added by each test."""
    if request.param == "sqlite":
        yield []
    else:
        yield ["--store", request.getfixturevalue("postgres_url")]
