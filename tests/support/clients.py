"""The test process's HTTP clients: one TLS context per set of TLS options, made once.

httpx builds a TLS context for every client it makes, loading the whole CA bundle each time
(about 17 ms of CPU), even for a client that only ever talks plain HTTP. The tests make clients
by the thousand (`httpx.post(...)` makes one a call; tests/multi posts 1,000 hooks, each on a
new connection), so `share_tls_contexts()` (called by tests/conftest.py) has httpx make one
context per distinct `verify`/`cert`/`trust_env` and reuse it: what a context checks is the
same, only made once (no test speaks HTTP/2, whose clients would set ALPN on a shared context).
Gateways (their own processes) are not touched.
"""

from __future__ import annotations

import functools
from typing import Any

import httpx._transports.default as transports


def share_tls_contexts() -> None:
    """Make httpx reuse one TLS context per distinct set of options (idempotent)."""
    made = transports.create_ssl_context
    if getattr(made, "cache_info", None) is not None:
        return

    @functools.lru_cache(maxsize=64)
    def once(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        return made(verify=verify, cert=cert, trust_env=trust_env)

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        try:
            return once(verify, cert, trust_env)
        except TypeError:  # an unhashable option (a list): made anew, as httpx does
            return made(verify=verify, cert=cert, trust_env=trust_env)

    create_ssl_context.cache_info = once.cache_info  # type: ignore[attr-defined]
    transports.create_ssl_context = create_ssl_context  # type: ignore[assignment]
