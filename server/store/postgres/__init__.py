"""The PostgreSQL store: the `Store` for several gateway processes sharing one database.

`store` (the `Store`), `accept` (the request path's accept lane), `runtime` (the runtime's
statements), `admin` (the admin API's reads), `signals` (LISTEN/NOTIFY, leadership), `migrate`
(the schema), `writer` (group commit).
"""

from .migrate import migrate, quote_ident
from .store import PostgresStore

__all__ = ["PostgresStore", "migrate", "quote_ident"]
