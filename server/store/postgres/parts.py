"""What the PostgreSQL store's mixins (admin reads, stats, retention) need from
`PostgresStore`: its read pool, its serial write and its writer. Declared once, here."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

T = TypeVar("T")


class PostgresParts:
    """The base of every `PostgresStore` mixin; `PostgresStore` provides what it declares."""

    _writer: Any

    @property
    def _readers(self) -> asyncpg.Pool:
        raise NotImplementedError

    def write(
        self, fn: Callable[[asyncpg.Connection], Awaitable[T]], *, alone: bool = False
    ) -> asyncio.Future[T]:
        raise NotImplementedError
