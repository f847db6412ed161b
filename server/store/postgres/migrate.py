"""The PostgreSQL store's schema: numbered SQL files in `migrations/`, applied in order under an
advisory lock (several processes may start together), versions kept in `schema_migrations`."""

from __future__ import annotations

from importlib import resources

import asyncpg

from ..schema import refuse_newer

# 'hookwise' as a big-endian int64: outside hashtext()'s int4 range, so the migration lock never
# collides with a leadership lock.
MIGRATION_LOCK = 0x686F6F6B77697365


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("hookwise.server.store.postgres") / "migrations"
    out = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            out.append((int(name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def quote_ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


async def migrate(conn: asyncpg.Connection, schema: str | None = None) -> int:
    """Bring the schema up to date, once even when several processes start together.

    Everything runs in one transaction holding a transaction-level advisory lock: the first
    process migrates, the others wait for it and then find nothing to do. Returns the version.
    Raises `SchemaTooNew` (changing nothing) when the database is newer than this code.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        if schema is not None:
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
            await conn.execute(f"SET LOCAL search_path = {quote_ident(schema)}")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        version = max(done, default=0)
        migrations = _migrations()
        # raised inside the transaction: it rolls back, nothing is changed
        refuse_newer(f"the PostgreSQL schema {schema or 'public'}", version, migrations)
        for number, sql in migrations:
            if number not in done:
                await conn.execute(sql)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", number)
                version = max(version, number)
        return version
