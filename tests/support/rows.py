"""Reading a gateway's store directly in tests, for effects the admin API does not show (a
session's transcript): SQL on its SQLite file, or on its PostgreSQL database."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from tests.support.gateway import GatewayProcess


def store_rows(gw: GatewayProcess, sql: str) -> list[tuple[Any, ...]]:
    """The rows of a parameterless query, on whichever store the gateway runs on."""
    if "--store" in gw.extra_args:
        import asyncpg

        url = gw.extra_args[gw.extra_args.index("--store") + 1]

        async def fetch() -> list[tuple[Any, ...]]:
            conn = await asyncpg.connect(url, timeout=5)
            try:
                return [tuple(r) for r in await conn.fetch(sql)]
            finally:
                await conn.close()

        return asyncio.run(fetch())
    with sqlite3.connect(gw.state_dir / "hookwise.db", timeout=10) as conn:
        return conn.execute(sql).fetchall()


def transcript(gw: GatewayProcess, session_key: str) -> list[tuple[str, str]]:
    """A session's turns (role, content), oldest first. `session_key` must be a plain literal."""
    assert "'" not in session_key
    return [
        (r[0], r[1])
        for r in store_rows(
            gw,
            f"SELECT role, content FROM turns WHERE session_key = '{session_key}' ORDER BY seq",
        )
    ]
