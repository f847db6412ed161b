"""Fresh PostgreSQL databases for tests, on the local server (127.0.0.1:5432, trust auth).

`fresh_database()` creates `hookwise_test_<hex>`, yields its URL and drops it afterwards (forcing
off connections a killed gateway left behind); when no server answers, the test is skipped with
the reason. The HTTP and multi-process suites use it to run on the PostgreSQL store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"
PG_ADMIN_URL = f"{PG_SERVER}/postgres"


def _pg(sql: str) -> None:
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    # On a thread of its own: a test may hold an event loop in this thread (Playwright's sync API).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, run()).result()


@contextmanager
def fresh_database() -> Iterator[str]:
    """The URL of a new, empty database, dropped when the block ends."""
    name = f"hookwise_test_{uuid.uuid4().hex[:12]}"
    try:
        _pg(f'CREATE DATABASE "{name}"')
    except OSError as e:
        pytest.skip(f"no PostgreSQL server on 127.0.0.1:5432 ({e})")
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
