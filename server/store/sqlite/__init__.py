"""The SQLite store (the embedded default): one file, WAL, a group-commit writer thread.

`store` (the `Store`), `accept` (the request path's writes), `runtime` (the runtime's
statements), `admin` (the admin API's reads), `migrate` (the schema), `writer` (group commit).
"""

from hookwise.server.store.sqlite.migrate import migrate
from hookwise.server.store.sqlite.store import SQLiteStore, StoreInUse

__all__ = ["SQLiteStore", "StoreInUse", "migrate"]
