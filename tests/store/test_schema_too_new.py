"""A database migrated by a newer hookwise is refused at start-up with a clear message, and left
as it was (both stores)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from hookwise.server.store.postgres.migrate import migrate as pg_migrate
from hookwise.server.store.sqlite.migrate import migrate as sqlite_migrate
from tests.cli.support import run
from tests.support.postgres import fresh_database

FUTURE = 9999


def _serve(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    assert run("init", cwd=tmp_path).returncode == 0
    return run("serve", "--port", "0", "--state-dir", "state", *extra, cwd=tmp_path)


def _one_error_line(stderr: str) -> str:
    [line] = [x for x in stderr.splitlines() if " INFO " not in x and x.strip()]
    return line


def test_sqlite_newer_than_the_code_is_refused_and_untouched(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    db = tmp_path / "state" / "hookwise.db"
    conn = sqlite3.connect(db)
    known = sqlite_migrate(conn)
    conn.execute(f"PRAGMA user_version = {FUTURE}")
    conn.close()
    r = _serve(tmp_path)
    assert r.returncode == 1
    line = _one_error_line(r.stderr)
    assert line.startswith(
        f"hookwise: start-up failed: the SQLite database {db} has schema version {FUTURE}"
    )
    assert f"(up to {known})" in line and "nothing was changed" in line
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (FUTURE,)
    conn.close()


def test_postgres_newer_than_the_code_is_refused_and_untouched(tmp_path: Path) -> None:
    import asyncpg

    with fresh_database() as url:

        async def bump() -> int:
            conn = await asyncpg.connect(url)
            try:
                known = await pg_migrate(conn)
                await conn.execute("INSERT INTO schema_migrations (version) VALUES ($1)", FUTURE)
                return known
            finally:
                await conn.close()

        async def versions() -> list[int]:
            conn = await asyncpg.connect(url)
            try:
                rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY 1")
                return [r[0] for r in rows]
            finally:
                await conn.close()

        known = asyncio.run(bump())
        before = asyncio.run(versions())
        r = _serve(tmp_path, "--store", url)
        assert r.returncode == 1
        line = _one_error_line(r.stderr)
        assert line.startswith(
            f"hookwise: start-up failed: the PostgreSQL schema public has schema version {FUTURE}"
        )
        assert f"(up to {known})" in line
        assert asyncio.run(versions()) == before
