"""PostgreSQL helpers for the benchmarks: a fresh database per configuration, and sync queries.

`fresh_database(server_url)` creates `hookwise_bench_<hex>` on the server named by `server_url`
(any database on it, e.g. `postgresql://postgres@127.0.0.1:5432/postgres`), yields its URL and
drops it afterwards (`WITH (FORCE)`, so leftover connections do not keep it alive), also on error
or Ctrl-C. Every database created is remembered until dropped; `drop_leftovers()` is the last
resort for a script's `finally`.

`PgQuery` runs queries from synchronous benchmark code on one connection and one event loop.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
CONNECT_TIMEOUT_S = 10.0

_CREATED: dict[str, str] = {}  # database name -> server URL it was created on


class PgError(Exception):
    """PostgreSQL could not be reached, or a database could not be created or dropped."""


def is_postgres(url: str | None) -> bool:
    """True for a `postgresql://` or `postgres://` URL."""
    return bool(url) and urlsplit(url or "").scheme in ("postgresql", "postgres")


def with_database(server_url: str, name: str) -> str:
    """`server_url` with its database (the URL path) replaced by `name`."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def _connect(url: str) -> Any:
    import asyncpg

    try:
        return await asyncpg.connect(url, timeout=CONNECT_TIMEOUT_S)
    except (TimeoutError, OSError, asyncpg.PostgresError) as e:
        raise PgError(f"PostgreSQL at {url} is not reachable: {e}") from e


async def _execute(server_url: str, sql: str) -> None:
    import asyncpg

    conn = await _connect(server_url)
    try:
        await conn.execute(sql)
    except asyncpg.PostgresError as e:
        raise PgError(f"{sql}: {e}") from e
    finally:
        await conn.close()


def create_database(server_url: str) -> str:
    """Create a fresh `hookwise_bench_<hex>` database; return its name."""
    name = f"hookwise_bench_{secrets.token_hex(6)}"
    _CREATED[name] = server_url
    asyncio.run(_execute(server_url, f'CREATE DATABASE "{name}"'))  # on failure: a leftover
    return name


def drop_database(name: str) -> None:
    """Drop a database created by `create_database` (forcing other connections off)."""
    server_url = _CREATED.get(name)
    if server_url is not None:
        asyncio.run(_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        del _CREATED[name]


def drop_leftovers() -> list[str]:
    """Drop every database created here and not dropped yet; a line per database for the log."""
    lines = []
    for name in list(_CREATED):
        try:
            drop_database(name)
            lines.append(f"dropped leftover database {name}")
        except Exception as e:  # best effort on the way out
            lines.append(f"could not drop database {name}: {e}")
    return lines


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new empty database on `server_url`'s server; yields its URL, drops it on exit."""
    name = create_database(server_url)
    try:
        yield with_database(server_url, name)
    finally:
        drop_database(name)


class PgQuery:
    """One asyncpg connection driven from synchronous code (its own event loop)."""

    def __init__(self, url: str) -> None:
        import asyncpg

        self._loop = asyncio.new_event_loop()
        try:
            self._conn: asyncpg.Connection = self._loop.run_until_complete(_connect(url))
        except BaseException:
            self._loop.close()
            raise

    def one(self, sql: str, *args: Any) -> tuple[Any, ...]:
        """The first row of `sql` (`$1`-style parameters) as a tuple."""
        row = self._loop.run_until_complete(self._conn.fetchrow(sql, *args))
        return tuple(row) if row is not None else ()

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._conn.close())
        finally:
            self._loop.close()


def count_rows(url: str, table: str) -> int | None:
    """Row count of `table` in the database at `url` (None if the table does not exist)."""
    query = PgQuery(url)
    try:
        (exists,) = query.one("SELECT to_regclass($1) IS NOT NULL", table)
        if not exists:
            return None
        return int(query.one(f'SELECT count(*) FROM "{table}"')[0])
    finally:
        query.close()
