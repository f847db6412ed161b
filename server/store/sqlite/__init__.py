"""The SQLite store (the embedded default): one file, WAL, a group-commit writer
(in a process of its own, or a thread).

`store` (the `Store`), `accept` (the request path's writes), `runtime` (the runtime's
statements), `admin` (the admin API's reads), `migrate` (the schema), `writer` (group commit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .migrate import migrate
    from .store import SQLiteStore, StoreInUse

__all__ = ["SQLiteStore", "StoreInUse", "migrate"]


def __getattr__(name: str) -> Any:
    # loaded when first asked for: the writer process imports only what it runs
    if name == "migrate":
        from .migrate import migrate

        return migrate
    if name in ("SQLiteStore", "StoreInUse"):
        from . import store

        return getattr(store, name)
    raise AttributeError(name)
