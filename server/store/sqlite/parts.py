"""What the SQLite store's mixins (admin reads, stats, retention) need from `SQLiteStore`: its
read on a reader thread, its group-commit write and its writer. Declared once, here."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class SQLiteParts:
    """The base of every `SQLiteStore` mixin; `SQLiteStore` provides what it declares."""

    _writer: Any

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError

    def write(self, fn: Callable[[sqlite3.Cursor], T]) -> asyncio.Future[T]:
        raise NotImplementedError
