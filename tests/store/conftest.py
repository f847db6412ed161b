"""The store suite's backends: every test runs against SQLite and PostgreSQL.

`backend` is parametrized over `sqlite` (a `SQLiteStore` on a file in the test's tmp dir, its
writer in a process of its own, the default), `sqlite-thread` (the same with `store.writer:
thread`) and `postgres` (a `PostgresStore` on 127.0.0.1:5432 in a fresh schema, dropped
afterwards). Several
stores made by one backend share their data, as several gateway processes would. Tests are plain
functions that hand an async body to `backend.run`; each runs in its own event loop.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from hookwise.server.store.postgres import PostgresStore
from hookwise.server.store.sqlite import SQLiteStore

POSTGRES_URL = os.environ.get(
    "HOOKWISE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
POSTGRES_ADDRESS = ("127.0.0.1", 5432)

Store = SQLiteStore | PostgresStore


def postgres_answers() -> bool:
    """True when something accepts connections on PostgreSQL's address."""
    try:
        with socket.create_connection(POSTGRES_ADDRESS, timeout=2):
            return True
    except OSError:
        return False


class Backend:
    """Makes stores on one database (a SQLite file or a PostgreSQL schema) and runs test bodies."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        #: `sqlite` or `postgres` (which database; `sqlite-thread` is SQLite too)
        self.name = "sqlite" if name.startswith("sqlite") else name
        self.writer = "thread" if name == "sqlite-thread" else "process"
        self.path = tmp_path / "hookwise.db"
        self.schema = f"test_{uuid.uuid4().hex[:16]}"

    def store(self) -> Store:
        """A new, unopened store on this backend's database (another "process")."""
        if self.name == "sqlite":
            return SQLiteStore(self.path, writer=self.writer)
        return PostgresStore(POSTGRES_URL, schema=self.schema, pool_size=4)

    def run(self, body: Callable[..., Awaitable[Any]], *, instances: int = 1) -> Any:
        """Open `instances` stores, run `body(*stores)` in a new event loop, close the stores."""

        async def main() -> Any:
            stores = [self.store() for _ in range(instances)]
            opened: list[Store] = []
            try:
                for store in stores:
                    await store.open()
                    opened.append(store)
                return await body(*stores)
            finally:
                for store in opened:
                    await store.close()

        return asyncio.run(main())

    @property
    def integrity_error(self) -> type[Exception]:
        """What a write breaking a unique constraint raises."""
        if self.name == "sqlite":
            import sqlite3

            return sqlite3.IntegrityError
        return asyncpg.UniqueViolationError

    def drop(self) -> None:
        if self.name != "postgres":
            return

        async def drop() -> None:
            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            finally:
                await conn.close()

        asyncio.run(drop())


def _backend(name: str, tmp_path: Path) -> Iterator[Backend]:
    if name == "postgres" and not postgres_answers():
        pytest.skip(f"no PostgreSQL server answers on {POSTGRES_ADDRESS[0]}:{POSTGRES_ADDRESS[1]}")
    backend = Backend(name, tmp_path)
    try:
        yield backend
    finally:
        backend.drop()


@pytest.fixture(params=["sqlite", "sqlite-thread", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """Each backend in turn."""
    yield from _backend(request.param, tmp_path)


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[Backend]:
    """The PostgreSQL backend only (cross-process signals, leadership)."""
    yield from _backend("postgres", tmp_path)
