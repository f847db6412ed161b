"""The running hookwise's version, as every surface shows it.

`hookwise --version`, the start-up banner, the `User-Agent` of every outbound HTTP call (model
providers, channels, the mail watcher's POSTs) and the readiness endpoint all read it here, so
they cannot disagree. The version comes from the installed distribution's metadata.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

from hookwise import __version__

if TYPE_CHECKING:
    import httpx

VERSION: str = __version__
USER_AGENT: str = f"hookwise/{VERSION}"


def version_info() -> dict[str, str]:
    """What a readiness or status endpoint reports about the build: `{"version", "python"}`."""
    return {"version": VERSION, "python": platform.python_version()}


def outbound_client(**kwargs: Any) -> httpx.AsyncClient:
    """An `httpx.AsyncClient` for calls leaving hookwise: identifies itself as `hookwise/<version>`
    (a caller's own `User-Agent` in `headers` wins)."""
    import httpx  # here: the SQLite writer process reads VERSION and makes no HTTP calls

    headers = {"User-Agent": USER_AGENT, **dict(kwargs.pop("headers", None) or {})}
    return httpx.AsyncClient(headers=headers, **kwargs)
