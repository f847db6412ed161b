"""Writing one entry of the audit log: its log line, its row in the store and its count.

The admin API's and the console's operator actions reach it through `admin.audit` (the
middleware that sees them); a reload the process makes itself, on `SIGHUP` or a change seen by
`serve --watch`, through `Gateway.reload_audited`. Each entry is a log line (`hookwise.audit`,
`WARNING` for a refusal or failure, the action, actor, client, outcome, code and targets as JSON
fields), a row of the store (the write bounded by the store wait) and a count in
`hookwise_audit_entries{action,outcome}`. An entry that cannot be written is logged with the
action, actor and client and counted as `outcome="lost"`; it never fails what it records, which
already happened.
"""

from __future__ import annotations

import logging
from typing import Any

from . import metrics
from .logs import fields
from .store.audit import AuditRecord
from .store.base import Store
from .store.bounded import within_store_wait

log = logging.getLogger("hookwise.audit")


def log_fields(entry: AuditRecord) -> dict[str, Any]:
    """`extra=` of a log line about `entry` (ids and names; never a payload or a token)."""
    return fields(
        action=entry.action,
        actor=entry.actor,
        client=entry.client,
        outcome=entry.outcome,
        code=entry.code,
        targets=dict(entry.targets),
    )


async def write(store: Store, entry: AuditRecord) -> None:
    """Log, store and count `entry` (see the module); never raises."""
    ids = log_fields(entry)
    level = logging.INFO if entry.outcome == "ok" else logging.WARNING
    log.log(
        level,
        "audit: %s by %s from %s: %s%s",
        entry.action,
        entry.actor,
        entry.client,
        entry.outcome,
        f" ({entry.code})" if entry.code else "",
        extra=ids,
    )
    try:
        await within_store_wait(store.record_audit(entry))
    except Exception:
        metrics.audited(entry.action, "lost")
        log.exception(
            "audit: could not record %s by %s from %s",
            entry.action,
            entry.actor,
            entry.client,
            extra=ids,
        )
        return
    metrics.audited(entry.action, entry.outcome)
