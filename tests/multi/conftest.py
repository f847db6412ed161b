"""Fixtures for several gateway processes on one store: SQLite (one file) and PostgreSQL.

`backend` is parametrised: `sqlite` runs `--workers N` on one SQLite file; `postgres` gives
each test a fresh database on the local server (127.0.0.1:5432), dropped afterwards, and is
skipped with the reason when no PostgreSQL answers there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _pg(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    try:
        import server.store.postgres  # noqa: F401
    except ImportError as e:  # pragma: no cover - the PostgreSQL store is part of the project
        pytest.fail(f"the PostgreSQL store does not import: {e}")
    name = f"hookwise_test_{uuid.uuid4().hex[:12]}"
    try:
        _pg(f'CREATE DATABASE "{name}"')
    except OSError as e:
        pytest.skip(f"no PostgreSQL server on 127.0.0.1:5432 ({e})")
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """`hookwise serve` arguments selecting the store; `--workers` is added by each test."""
    if request.param == "sqlite":
        yield []
    else:
        yield ["--store", request.getfixturevalue("postgres_url")]
