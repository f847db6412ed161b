"""`hookwise audit`: the audit log of a running gateway (who did what, when, from where, with
which outcome), read from the admin API (`GET /api/audit`) like `hookwise runs`; filtered by
`--actor`, `--action`, `--outcome` and a time window, `--json` for scripts."""

from __future__ import annotations

from typing import Any

from .admin import _common, _listing, _window, guarded

AUDIT_COLUMNS = [
    ("AT", "at"),
    ("WHO", "actor"),
    ("VIA", "via"),
    ("CLIENT", "client"),
    ("ACTION", "action"),
    ("TARGETS", "targets"),
    ("OUTCOME", "outcome"),
    ("STATUS", "status"),
    ("CODE", "code"),
]


def add_cli(subparsers: Any) -> None:
    """Add `audit` to the `hookwise` command line."""
    p = subparsers.add_parser(
        "audit",
        help="the audit log of operator actions of a running gateway",
        description="The audit log of a running gateway, newest first: every login, logout, "
        "retry, replay, pause, resume, reload... and every refused attempt, with who (the "
        "token's name), when, the client address, what it touched and the outcome.",
    )
    _common(p)
    _window(p)
    p.add_argument("--actor", metavar="NAME", help="only actions by this token name")
    p.add_argument("--action", help="only this action (retry, pause, login...)")
    p.add_argument("--outcome", choices=("ok", "refused", "failed"), help="only this outcome")
    p.add_argument("--limit", type=int, default=50, help="how many (default 50; 0: all)")
    p.set_defaults(
        func=guarded(
            _listing("/api/audit", AUDIT_COLUMNS, "actor", "action", "outcome", "since", "until")
        )
    )
