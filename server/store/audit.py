"""The audit log's record, as both stores keep it (table `audit`, migration 23).

One row per operator action (a login, a retry, a pause, a reload, a refused attempt...): who (the
name of the token used, or of the console login's token), when, from which client address (as the
trusted proxies resolve it), what it touched (`targets`: ids and names, never a payload), the
outcome and, when refused or failed, the error's stable code. Never a token or a payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

AUDIT_COLUMNS = "seq, at, actor, via, client, action, targets, outcome, status, code"
#: the columns an insert gives (`seq` is the store's)
AUDIT_INSERT = "at, actor, via, client, action, targets, outcome, status, code"
OUTCOMES = ("ok", "refused", "failed")


@attrs.frozen
class AuditRecord:
    """One operator action. `via` is `api`, `console`, a chat service (`telegram`, `slack`: an
    approval button) or `signal`/`watch` (a reload); `outcome` is `ok`, `refused` (no or a
    wrong token, a scope lacked, a CSRF check failed) or `failed` (the action itself answered
    an error, e.g. `run_not_retryable`)."""

    at: float
    actor: str
    via: str
    client: str
    action: str
    targets: Mapping[str, str]
    outcome: str
    status: int
    code: str | None = None
    seq: int = 0


def audit_row(entry: AuditRecord) -> tuple[Any, ...]:
    """The values of `AUDIT_INSERT` for `entry`."""
    return (
        entry.at,
        entry.actor,
        entry.via,
        entry.client,
        entry.action,
        json.dumps(dict(entry.targets), separators=(",", ":"), sort_keys=True),
        entry.outcome,
        entry.status,
        entry.code,
    )


def audit_record(row: Any) -> AuditRecord:
    seq, at, actor, via, client, action, targets, outcome, status, code = tuple(row)
    return AuditRecord(
        at=float(at),
        actor=actor,
        via=via,
        client=client,
        action=action,
        targets=json.loads(targets) if targets else {},
        outcome=outcome,
        status=int(status),
        code=code,
        seq=int(seq),
    )
