"""The SQLite store's schema: numbered SQL files in `migrations/`, applied in order, the version
kept in `PRAGMA user_version`."""

from __future__ import annotations

import sqlite3
from importlib import resources

from ..schema import refuse_newer


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("hookwise.server.store.sqlite") / "migrations"
    out = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql"):
            out.append((int(name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(out)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date; returns the version reached. Raises `SchemaTooNew` (and
    changes nothing) when the database is newer than this code."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    migrations = _migrations()
    file = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    refuse_newer(f"the SQLite database {file or '(in memory)'}", version, migrations)
    for number, sql in migrations:
        if number > version:
            conn.executescript(f"BEGIN;\n{sql}\nPRAGMA user_version = {number};\nCOMMIT;")
            version = number
    return version
