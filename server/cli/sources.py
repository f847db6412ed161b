"""`hookwise sources`: the pull sources of a running gateway (connected, lag, last error, counts),
read from the admin API (`GET /api/sources`) like `hookwise runs`; `--json` for scripts."""

from __future__ import annotations

import argparse
from typing import Any

from .admin import _client, _common, _emit, guarded, table

SOURCE_COLUMNS = [
    ("SOURCE", "name"),
    ("KIND", "kind"),
    ("PATH", "path"),
    ("CONNECTED", "connected"),
    ("LAG", "lag"),
    ("RECEIVED", "received"),
    ("ACKED", "acked"),
    ("REDELIVERED", "redelivered"),
    ("REFUSED", "refused"),
    ("LAST ERROR", "lastError"),
]


def cmd_sources(args: argparse.Namespace) -> int:
    with _client(args) as client:
        sources = client.get("/api/sources")["sources"]
    _emit(args, sources, lambda out: table(sources, SOURCE_COLUMNS, out))
    return 0


def add_cli(subparsers: Any) -> None:
    """Add `sources` to the `hookwise` command line."""
    p = subparsers.add_parser(
        "sources",
        help="pull sources of a running gateway",
        description=(
            "The pull sources of the gateway process that answers: connected or not, the lag "
            "its broker reports, the last error, and message counts since it started."
        ),
    )
    _common(p)
    p.set_defaults(func=guarded(cmd_sources))
